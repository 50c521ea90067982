"""A run's results: the `--json` entry (a contract: docs/train.md), and the report document
(`provision.report/v1` plus a `train` section) written as JSON/Markdown/HTML and recorded in the
history, so `provision report --compare` shows a job before and after a change."""

from __future__ import annotations

import math
from typing import Any

from provision.choose.check import section as prediction_section  # docs/choose.md
from provision.report.document import write_report
from provision.report.schema import SCHEMA, Finding, now_iso, validate

# Figures of `provision train` reports, compared with the host's previous train report.
COMPARED_TRAIN = (
    ("run seconds", "run_seconds"),
    ("steps/s", "steps_per_s"),
    ("data-wait share", "data_wait_fraction"),
    ("GPU util %", "gpu_util_mean"),
)
PROFILE_KEYS = ("steps", "data_wait_fraction", "gpu_util_mean", "cpu_util_mean", "num_workers", "amp")


def profile(summary: dict[str, Any] | None) -> dict[str, Any]:
    """The six figures of the JSON contract (null when not measured)."""
    s = summary if isinstance(summary, dict) else {}  # the host's document: any shape (issue 20)
    per_gpu = _part(s, "gpu").get("per_gpu")
    utils = [g["util_pct_mean"] for g in (per_gpu if isinstance(per_gpu, list) else [])
             if isinstance(g, dict) and _number(g.get("util_pct_mean"))]
    amp = s.get("amp")
    return {
        "steps": s.get("steps"),
        "data_wait_fraction": s.get("data_wait_fraction"),
        "gpu_util_mean": round(sum(utils) / len(utils), 1) if utils else None,
        "cpu_util_mean": _part(s, "cpu").get("busy_pct_mean"),
        "num_workers": _part(s, "loader").get("num_workers"),
        # autocast's dtype when used, False when the run was watched and used none, None unknown
        "amp": (amp.get("dtype") or True) if isinstance(amp, dict) else (False if s.get("instrumented") else None),
    }


def _part(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def run_entry(run: dict[str, Any], summary: dict[str, Any] | None, findings: list[Finding],
              report_paths: dict[str, str] | None) -> dict[str, Any]:
    """One host's entry of `{"runs": {HOST: ...}}` — exactly these keys."""
    return {
        "run_id": run.get("run_id"),
        "state": run.get("state"),
        "exit_code": run.get("exit_code"),
        "seconds": run.get("seconds"),
        "workdir": run.get("workdir"),
        "log": run.get("log"),
        "profile": profile(summary),
        "findings": [f.as_dict() for f in findings],
        "report": report_paths,
    }


def build_document(host: str, run: dict[str, Any], summary: dict[str, Any], findings: list[Finding],
                   facts: dict[str, Any] | None = None, price_per_hour: float | None = None,
                   distributed: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = {
        "schema": SCHEMA,
        "host": host,
        "created": now_iso(),
        "price_per_hour": price_per_hour,
        "facts": facts or {},
        "compat": {},
        "install": {"python": run.get("python")},
        "datasets": [],
        "bench": {},
        "diagnosis": [f.as_dict() for f in findings],
        "train": {
            "run_id": run.get("run_id"), "state": run.get("state"), "command": run.get("command"),
            "exit_code": run.get("exit_code"), "seconds": run.get("seconds"),
            "workdir": run.get("workdir"), "log": run.get("log"),
            "label": run.get("label"), "profile": profile(summary),
            "summary": {k: v for k, v in summary.items() if k not in ("run", "tail")},
            "tail": summary.get("tail") or [],
        },
    }
    if distributed is not None:  # one run across hosts: the fabric, all-reduce, the whole run's findings
        doc["train"]["distributed"] = distributed
    if (prediction := prediction_section(doc)) is not None:
        doc["prediction"] = prediction
    validate(doc, f"train report for {host}")
    return doc


def is_train(doc: dict[str, Any]) -> bool:
    return isinstance(doc.get("train"), dict)


def headline_figures(doc: dict[str, Any]) -> dict[str, Any]:
    """The figures a job is compared by, before vs after a change."""
    train = doc.get("train") if isinstance(doc.get("train"), dict) else {}
    prof = train.get("profile") or {}
    seconds, steps = train.get("seconds"), prof.get("steps")
    return {
        "run_seconds": seconds,
        "steps_per_s": round(steps / seconds, 3) if steps and seconds else None,
        "data_wait_fraction": prof.get("data_wait_fraction"),
        "gpu_util_mean": prof.get("gpu_util_mean"),
    }


def write(doc: dict[str, Any], out_dir: str) -> dict[str, str]:
    """JSON + Markdown + HTML side by side (the bench's writer and file names)."""
    return write_report(doc, out_dir)
