"""Checked after renting: a report's `prediction` section — what `choose`'s model predicts for the
host's GPU next to what the host measured. The ratios feed later predictions (calibrate.py).

Bench reports: the two workloads of `bench.amp` (provision/agent/bench/models.py; their shapes
are in the report) are rebuilt on the meta device and predicted at the batch and precisions the
host ran. Train reports: the job is the user's own, so it is compared with the last
`provision choose` document only when that model's name appears in the job's command or label.

Section: {"gpu": catalogue name, "source", "checks": [{"workload", "precision", "batch",
"predicted_samples_per_s", "measured_samples_per_s", "ratio" (measured ÷ predicted)}]}.
"""

from __future__ import annotations

import logging
from typing import Any

from provision.choose import catalogue

log = logging.getLogger(__name__)
_PRECISION = {"fp32": "fp32", "fp16": "amp", "bf16": "bf16"}


def _gpu(doc: dict[str, Any]) -> Any:
    gpus = (doc.get("facts") or {}).get("gpus") or []
    first = gpus[0] if gpus and isinstance(gpus[0], dict) else None
    if not first or not first.get("name"):
        return None
    mib = (first.get("memory") or {}).get("total_mib") if isinstance(first.get("memory"), dict) else None
    spec = catalogue.lookup(str(first["name"]), mib / 1024 if isinstance(mib, (int, float)) else None)
    return spec if spec is not None and catalogue.usable(spec) else None


def _bench_spec(name: str, shape: dict[str, Any]) -> Any:
    """The bench's workload as a choose ModelSpec (same classes the agent ran)."""
    # torch is optional on the controller: imported only when a prediction is made
    from provision.agent.bench import models as bench_models
    from provision.choose.models import (
        IMAGE,
        TOKENS,
        ModelSpec,
    )

    if name == "convnet":
        size = int(shape["image_size"])
        blocks = tuple(int(b) for b in shape["blocks"])
        return ModelSpec("bench convnet", lambda: bench_models.SmallResNet(int(shape["width"]), blocks, 1000, size),
                         IMAGE, image_size=size)
    return ModelSpec("bench transformer", lambda: bench_models.TinyTransformer(
        int(shape["vocab"]), int(shape["d_model"]), int(shape["heads"]), int(shape["layers"]), int(shape["seq_len"])),
        TOKENS, seq_len=int(shape["seq_len"]), vocab=int(shape["vocab"]))


def bench_section(doc: dict[str, Any]) -> dict[str, Any] | None:
    from provision.choose import graph, speed  # torch is optional: only when a prediction is made

    gpu = _gpu(doc)
    models = ((doc.get("bench") or {}).get("amp") or {}).get("models") or {}
    if gpu is None or not isinstance(models, dict):
        return None
    checks = []
    for name, m in models.items():
        if not isinstance(m, dict) or not isinstance(m.get("model"), dict) or not m.get("batch"):
            continue
        try:
            profile = graph.measure(_bench_spec(name, m["model"]))
        except (KeyError, TypeError, ValueError) as exc:
            log.debug("bench %s not predicted: %s", name, exc)
            continue
        batch = int(m["batch"])
        for precision, run in (m.get("runs") or {}).items():
            measured = run.get("samples_per_s") if isinstance(run, dict) else None
            if precision not in _PRECISION or not isinstance(measured, (int, float)) or measured <= 0:
                continue
            try:
                s = speed.step(profile, gpu, _PRECISION[precision], "sgd", batch, batch)
            except speed.Unsupported:
                continue
            checks.append(_check(name, precision, batch, s.samples_per_s, float(measured)))
    return {"gpu": gpu.name, "source": "bench.amp workloads", "checks": checks} if checks else None


def _check(workload: str, precision: str, batch: int, predicted: float, measured: float) -> dict[str, Any]:
    return {"workload": workload, "precision": precision, "batch": batch,
            "predicted_samples_per_s": float(f"{predicted:.4g}"),
            "measured_samples_per_s": float(f"{measured:.4g}"), "ratio": float(f"{measured / predicted:.4g}")}


def train_section(doc: dict[str, Any], choice: dict[str, Any] | None) -> dict[str, Any] | None:
    """A train run vs the last `choose` prediction for the host's GPU (same model by name)."""
    gpu = _gpu(doc)
    train = doc.get("train") if isinstance(doc.get("train"), dict) else {}
    if gpu is None or not choice:
        return None
    model = str((choice.get("model") or {}).get("name") or "").split(" @ ")[0]
    command = train.get("command") or ""
    said = (command if isinstance(command, str) else " ".join(str(x) for x in command)) + " " + str(train.get("label") or "")
    if not model or model.lower() not in said.lower():
        return None
    entry = next((g for g in choice.get("gpus") or [] if g.get("gpu") == gpu.name), None)
    steps, seconds = (train.get("profile") or {}).get("steps"), train.get("seconds")
    batch = (choice.get("request") or {}).get("batch")
    if not entry or not entry.get("predicted_samples_per_s") or not steps or not seconds or not batch:
        return None
    measured = steps * batch / seconds  # one step = one batch of the request choose predicted for
    return {"gpu": gpu.name, "source": f"last `provision choose` for {model}",
            "checks": [_check(model, (choice.get("request") or {}).get("precision", "?"), int(batch),
                              float(entry["predicted_samples_per_s"]), measured)]}


def offers_seen(choice: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The offers the last `choose` ranked (for the report's cost-vs-hours chart)."""
    keys = ("id", "gpu", "count", "price_per_hour", "fits", "predicted_hours", "predicted_cost", "rank")
    return [{k: o.get(k) for k in keys} for o in (choice or {}).get("offers") or []
            if isinstance(o, dict) and o.get("predicted_hours")][:40]


def section(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The report's `prediction` section, or None (no GPU, nothing comparable, no torch here).
    A prediction never breaks a report: any failure leaves the section out, logged."""
    try:
        from provision.choose.calibrate import last_choice  # imports torch (optional here)

        choice = last_choice()
        found = train_section(doc, choice) if isinstance(doc.get("train"), dict) else bench_section(doc)
    except ImportError as exc:  # torch is optional on the controller
        log.debug("no prediction section: %s", exc)
        return None
    except Exception as exc:  # noqa: BLE001 - the report matters more than the comparison
        log.warning("no prediction section in the report: %s: %s", type(exc).__name__, exc)
        return None
    if found is not None and offers_seen(choice):
        found["offers"] = offers_seen(choice)
        found["offers_model"] = (choice.get("model") or {}).get("name")
    return found
