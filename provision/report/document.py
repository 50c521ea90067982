"""Assembling and writing report documents: build_report (the sections, the diagnosis, secrets
masked, validated), write_report (JSON, Markdown and HTML side by side), add_timings.

The schema, accessors and validation are provision/report/schema.py's (re-exported here, where
callers have always found them); the sections other packages contribute come through
provision/report/sections.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provision import paths as _paths
from provision import strict_json  # _paths.write_atomic at call time (tests spy on it)
from provision.report import sections
from provision.report.diagnosis import diagnose
from provision.report.render import render_html, render_markdown
from provision.report.schema import (
    FINDING_KEYS,
    REQUIRED_KEYS,
    SCHEMA,
    SEVERITIES,
    get,
    headline,
    load_report,
    now_iso,
    parse_time,
    price_of,
    validate,
)
from provision.secrets import mask_url_passwords

__all__ = [  # the schema's names, where callers import them from
    "FINDING_KEYS", "REQUIRED_KEYS", "SCHEMA", "SEVERITIES", "add_timings", "build_report", "get",
    "headline", "load_report", "now_iso", "parse_time", "price_of", "validate", "write_report",
]  # fmt: skip


def build_report(
    host: str,
    *,
    facts: dict[str, Any] | None = None,
    compat: dict[str, Any] | None = None,
    install: dict[str, Any] | None = None,
    datasets: list[dict[str, Any]] | None = None,
    bench: dict[str, Any] | None = None,
    price_per_hour: float | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """Assemble the document and diagnose it. Sections not measured stay empty ({} / [])."""
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "host": host,
        "created": created or now_iso(),
        "price_per_hour": price_per_hour,
        "facts": facts or {},
        "compat": compat or {},
        "install": dict(install or {}),
        "datasets": datasets or [],
        "bench": bench or {},
    }
    if doc["install"]:
        doc["install"].setdefault("python", None)  # the key is part of the schema, even unknown
    sections.contribute(doc)  # e.g. choose's predicted vs measured (docs/choose.md)
    doc["diagnosis"] = [f.as_dict() for f in diagnose(doc)]
    # a report outlives the run: no URL password (an index or proxy URL) is ever written
    doc = mask_url_passwords(doc)
    validate(doc, f"report for {host}")
    return doc


def write_report(doc: dict[str, Any], out_dir: str | Path) -> dict[str, str]:
    """Write JSON, Markdown and HTML side by side; return their paths."""
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    stamp = str(doc["created"]).replace(":", "").replace("+0000", "Z")
    base = out / f"{_safe(doc['host'])}-{_safe(stamp)}"
    paths = {
        "json": base.with_name(base.name + ".json"),
        "markdown": base.with_name(base.name + ".md"),
        "html": base.with_name(base.name + ".html"),
    }
    # each by temp file + rename: a crash never leaves a truncated JSON for `report --compare`
    _paths.write_atomic(paths["json"], strict_json.dumps(doc, indent=2, default=str, ensure_ascii=False) + "\n")
    _paths.write_atomic(paths["markdown"], render_markdown([doc]))
    _paths.write_atomic(paths["html"], render_html([doc]))
    return {k: str(v) for k, v in paths.items()}


def add_timings(paths: dict[str, str], timings: dict[str, Any]) -> None:
    """Put the run's timings into a report already written (the report step runs before the
    run ends, so only the caller knows them all) and render its Markdown and HTML again."""
    doc = load_report(paths["json"])
    doc["timings"] = timings
    validate(doc, paths["json"])
    _paths.write_atomic(Path(paths["json"]), strict_json.dumps(doc, indent=2, default=str, ensure_ascii=False) + "\n")
    _paths.write_atomic(Path(paths["markdown"]), render_markdown([doc]))
    _paths.write_atomic(Path(paths["html"]), render_html([doc]))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name)) or "host"

