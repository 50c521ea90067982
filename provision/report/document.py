"""The versioned report document: one per host per run.

Schema `provision.report/v1` (docs/reports.md lists every key):

    schema, host, created (ISO 8601, UTC), price_per_hour (number | null),
    facts     the agent's `facts` result (docs/facts.md)
    compat    `provision check`'s per-host result (verdict OK/WARN/BROKEN, problems, fix, verify)
    install   {"python": managed env's interpreter, "torch": version, "managed": bool, ...}
    datasets  [{"name", "path", "format", ...}] the datasets the benchmark read
    bench     the agent's `bench` result (docs/bench.md)
    diagnosis [{"id", "severity", "title", "evidence", "recommendation"}]
    timings   (optional, `up` only) where the run's time went: provision/report/timings.py
    prediction (optional) `provision choose`'s prediction for the host's GPU beside the measured
              figures: provision/choose/check.py

Every consumer reads it through `headline` or `get`, so a missing section renders as "not
measured", never as a crash. `validate` checks the shape (and the types of the figures the
renderers, the ranking and the history rely on) and names the key at fault.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

from provision import strict_json

SCHEMA = "provision.report/v1"
REQUIRED_KEYS = (
    "schema",
    "host",
    "created",
    "facts",
    "compat",
    "install",
    "datasets",
    "bench",
    "diagnosis",
)
SEVERITIES = ("critical", "warn", "info")
FINDING_KEYS = ("id", "severity", "title", "evidence", "recommendation")
# Figures the ranking, charts and history read: number or null when present.
_NUMBERS = (
    "bench.amp.speedup",
    "bench.amp.train_samples_per_s",
    "bench.dataloader.best_samples_per_s",
    "bench.dataloader.best_num_workers",
    "price_per_hour",
)


def get(doc: Any, dotted: str, default: Any = None) -> Any:
    """`get(report, "bench.amp.speedup")`; list indices allowed (`facts.gpus.0.name`)."""
    cur = doc
    for part in dotted.split("."):
        if isinstance(cur, dict):
            if part not in cur:
                return default
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return default
    return default if cur is None and default is not None else cur


def parse_time(text: Any) -> _dt.datetime:
    """ISO 8601, also with a trailing "Z" (which Python 3.10's fromisoformat refuses)."""
    value = str(text)
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    return _dt.datetime.fromisoformat(value)


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


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
    from provision.report.diagnosis import diagnose
    from provision.secrets import mask_url_passwords

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
    from provision.choose.check import section  # predicted vs measured (docs/choose.md)

    if (prediction := section(doc)) is not None:
        doc["prediction"] = prediction
    doc["diagnosis"] = [f.as_dict() for f in diagnose(doc)]
    # a report outlives the run: no URL password (an index or proxy URL) is ever written
    doc = mask_url_passwords(doc)
    validate(doc, f"report for {host}")
    return doc


def validate(doc: Any, where: str = "report") -> None:
    """Raise ValueError naming the first problem (`where: key: what is wrong`)."""
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: not a JSON object (got {type(doc).__name__})")
    if doc.get("schema") != SCHEMA:
        raise ValueError(
            f"{where}: schema {doc.get('schema')!r}, expected {SCHEMA!r}"
            " (a file written by `provision bench`/`up`, or `--json` of `provision report`'s reports)"
        )
    for key in REQUIRED_KEYS:
        if key not in doc:
            raise ValueError(f"{where}: missing key {key!r}")
    if not isinstance(doc["host"], str) or not doc["host"]:
        raise ValueError(f"{where}: host must be a non-empty string, got {doc['host']!r}")
    try:
        created = parse_time(doc["created"])
    except ValueError:
        raise ValueError(
            f"{where}: created must be an ISO 8601 time, got {doc['created']!r}"
        ) from None
    if created.tzinfo is None:
        raise ValueError(f"{where}: created {doc['created']!r} has no time zone (use UTC: +00:00)")
    for key in ("facts", "compat", "install", "bench"):
        if not isinstance(doc[key], dict):
            raise ValueError(f"{where}: {key} must be an object, got {type(doc[key]).__name__}")
    if doc["install"] and "python" not in doc["install"]:
        raise ValueError(f"{where}: install lacks 'python' (the managed environment's interpreter)")
    if not isinstance(doc["datasets"], list) or not all(
        isinstance(d, dict) for d in doc["datasets"]
    ):
        raise ValueError(f"{where}: datasets must be a list of objects")
    for dotted in _NUMBERS:
        value = get(doc, dotted)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"{where}: {dotted} must be a number or null, got {value!r}")
    price = doc.get("price_per_hour")
    if price is not None and price <= 0:
        raise ValueError(f"{where}: price_per_hour must be positive, got {price!r}")
    if not isinstance(doc["diagnosis"], list):
        raise ValueError(f"{where}: diagnosis must be a list")
    timings = doc.get("timings")
    if timings is not None and not (
        isinstance(timings, dict) and isinstance(timings.get("steps"), list)
    ):
        raise ValueError(f"{where}: timings must be an object with a steps list")
    for i, finding in enumerate(doc["diagnosis"]):
        if not isinstance(finding, dict):
            raise ValueError(f"{where}: diagnosis[{i}] must be an object")
        for key in FINDING_KEYS:
            if not isinstance(finding.get(key), str) or not finding[key]:
                raise ValueError(f"{where}: diagnosis[{i}] lacks {key!r} (a non-empty string)")
        if finding["severity"] not in SEVERITIES:
            raise ValueError(
                f"{where}: diagnosis[{i}].severity {finding['severity']!r} is not one of "
                + ", ".join(SEVERITIES)
            )


def load_report(path: str | Path) -> dict[str, Any]:
    """Read and validate one report file; ConfigError names the file (and line for bad JSON)."""
    from provision.errors import ConfigError

    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such report file") from None
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a directory; give the report's .json file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a text file; give the report's .json file") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    try:
        validate(doc, str(p))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return doc


def headline(doc: dict[str, Any]) -> dict[str, Any]:
    """The few numbers hosts are ranked and compared by.

    effective samples/s = min(training, loading): a host trains no faster than its slower half.
    samples per money = effective samples/s x 3600 / price_per_hour.
    """
    train = get(doc, "bench.amp.train_samples_per_s")
    loader = get(doc, "bench.dataloader.best_samples_per_s")
    measured = [x for x in (train, loader) if x]
    effective = min(measured) if measured else None
    price = doc.get("price_per_hour")
    per_money = effective * 3600 / price if effective and price else None
    gpus = get(doc, "facts.gpus") or []
    names = sorted({str(g.get("name") or "?") for g in gpus if isinstance(g, dict)})
    diagnosis = doc.get("diagnosis") or []
    return {
        "host": doc.get("host"),
        "created": doc.get("created"),
        "gpu": ", ".join(names) or "CPU",
        "gpu_count": len(gpus),
        "device": get(doc, "bench.amp.device") or get(doc, "bench.host.device"),
        "image_size": get(doc, "bench.amp.image_size"),
        "train_samples_per_s": train,
        "loader_samples_per_s": loader,
        "effective_samples_per_s": effective,
        "bottleneck": None
        if not (train and loader)
        else ("loader" if loader < train else "training"),
        "amp_speedup": get(doc, "bench.amp.speedup"),
        "amp_dtype": get(doc, "bench.amp.best_dtype"),
        "best_num_workers": get(doc, "bench.dataloader.best_num_workers"),
        "price_per_hour": price,
        "samples_per_money": per_money,
        "critical": sum(1 for f in diagnosis if f.get("severity") == "critical"),
        "warnings": sum(1 for f in diagnosis if f.get("severity") == "warn"),
    }


def write_report(doc: dict[str, Any], out_dir: str | Path) -> dict[str, str]:
    """Write JSON, Markdown and HTML side by side; return their paths."""
    from provision.report.render import render_html, render_markdown

    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    stamp = str(doc["created"]).replace(":", "").replace("+0000", "Z")
    base = out / f"{_safe(doc['host'])}-{_safe(stamp)}"
    paths = {
        "json": base.with_name(base.name + ".json"),
        "markdown": base.with_name(base.name + ".md"),
        "html": base.with_name(base.name + ".html"),
    }
    from provision.paths import write_atomic

    # each by temp file + rename: a crash never leaves a truncated JSON for `report --compare`
    write_atomic(paths["json"], strict_json.dumps(doc, indent=2, default=str, ensure_ascii=False) + "\n")
    write_atomic(paths["markdown"], render_markdown([doc]))
    write_atomic(paths["html"], render_html([doc]))
    return {k: str(v) for k, v in paths.items()}


def add_timings(paths: dict[str, str], timings: dict[str, Any]) -> None:
    """Put the run's timings into a report already written (the report step runs before the
    run ends, so only the caller knows them all) and render its Markdown and HTML again."""
    from provision.paths import write_atomic
    from provision.report.render import render_html, render_markdown

    doc = load_report(paths["json"])
    doc["timings"] = timings
    validate(doc, paths["json"])
    write_atomic(Path(paths["json"]), strict_json.dumps(doc, indent=2, default=str, ensure_ascii=False) + "\n")
    write_atomic(Path(paths["markdown"]), render_markdown([doc]))
    write_atomic(Path(paths["html"]), render_html([doc]))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name)) or "host"


def price_of(host: Any) -> float | None:
    """The inventory's price_per_hour, checked up front: a bad value is the user's to fix."""
    price = host.vars.get("price_per_hour")
    if price is None:
        return None
    try:
        value = float(price)
    except (TypeError, ValueError):
        value = -1.0
    if value <= 0:
        from provision.errors import ConfigError

        raise ConfigError(
            f"{host.name}: price_per_hour must be a positive number, got {price!r} (inventory var)"
        )
    return value
