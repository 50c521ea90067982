"""Markdown and HTML for `provision train` reports (documents with a `train` section): the run,
its findings, timelines (GPU utilization, CPU, data-wait share, batches/s), the loader and
epochs; and the before/after table of `provision report --compare`. The train section's own
layout, registered with the report's sections (provision/train/report_section.py)."""

from __future__ import annotations

from typing import Any

from provision.choose import report_view
from provision.report.charts import empty_chart, line_chart
from provision.report.formatting import comparison_rows, env, markdown_env
from provision.report.schema import SCHEMA
from provision.train.frameworks import user_site


def _points(xs: list[Any], ys: list[Any]) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in zip(xs, ys, strict=False) if x is not None and y is not None]


def train_charts(doc: dict[str, Any]) -> dict[str, str]:
    summary = (doc.get("train") or {}).get("summary") or {}
    tl = summary.get("timeline") or {}
    loader = tl.get("loader") or {}
    t = tl.get("t") or []
    gpu = _points(t, tl.get("gpu_util_pct") or [])
    reason = (summary.get("gpu") or {}).get("reason") or "no GPU samples"
    return {
        "utilization": line_chart(
            "utilization", "Utilization over the run",
            [("CPU busy %", _points(t, tl.get("cpu_pct") or []))] + ([("GPU util %", gpu)] if gpu else []),
            "seconds", "%", "no samples"),
        "gpu": "" if gpu else empty_chart("gpu", "GPU utilization", reason),
        "data_wait": line_chart(
            "data_wait", "Data-wait share of each interval",
            [("data wait", _points(loader.get("t") or [], loader.get("data_wait") or []))],
            "seconds", "share", "not instrumented (or no DataLoader)"),
        "throughput": line_chart(
            "throughput", "Throughput",
            [("batches/s", _points(loader.get("t") or [], loader.get("batches_per_s") or []))],
            "seconds", "batches/s", "not instrumented (or no DataLoader)"),
        "choose": report_view.chart(doc),
    }


LOADER_COLUMNS = ("role", "created at", "batch size", "num_workers", "pin_memory", "persistent_workers",
                  "dataset", "length", "epochs", "batches", "training batches", "data-wait share")


def _share(loader: dict[str, Any]) -> str:
    wait, step = float(loader.get("wait_s") or 0), float(loader.get("step_s") or 0)
    return f"{wait / (wait + step):.0%}" if wait + step > 0 else "—"


def view(doc: dict[str, Any]) -> dict[str, Any]:
    train = doc.get("train") or {}
    summary = train.get("summary") or {}
    prof = train.get("profile") or {}
    loader = summary.get("loader") or {}
    overview = [
        ("run", train.get("run_id")), ("state", train.get("state")), ("exit code", train.get("exit_code")),
        ("seconds", train.get("seconds")), ("command", " ".join(map(str, train.get("command") or []))),
        ("workdir", train.get("workdir")), ("log", train.get("log")),
        ("training steps", prof.get("steps")),
        ("training loader", user_site(loader, train.get("workdir")) if loader else None), ("data-wait share", prof.get("data_wait_fraction")),
        ("GPU util mean %", prof.get("gpu_util_mean")), ("CPU busy mean %", prof.get("cpu_util_mean")),
        ("num_workers", prof.get("num_workers")), ("AMP", prof.get("amp")),
        ("pin_memory", loader.get("pin_memory")), ("batch size", loader.get("batch_size")),
        ("device", summary.get("device")),
    ]
    epochs = [[e.get("epoch"), e.get("seconds"), e.get("batches")] for e in summary.get("epochs") or []]
    loaders = [[x.get("role"), user_site(x, train.get("workdir")) or "—", x.get("batch_size"), x.get("num_workers"), x.get("pin_memory"),
                x.get("persistent_workers"), f"{x.get('dataset')}{' (iterable)' if x.get('iterable') else ''}",
                "—" if x.get("dataset_len") is None else x.get("dataset_len"), x.get("epochs"), x.get("batches"),
                x.get("train_batches"), _share(x)]
               for x in summary.get("loaders") or []]
    gpus = [[g.get("index"), g.get("util_pct_mean"), g.get("memory_used_mb_max"), g.get("memory_total_mb"),
             g.get("power_w_mean"), ", ".join(sorted(g.get("throttle_reasons") or {})) or "—"]
            for g in (summary.get("gpu") or {}).get("per_gpu") or []]
    return {"host": doc.get("host"), "created": doc.get("created"),
            "overview": [(k, "—" if v is None else v) for k, v in overview],
            "diagnosis": doc.get("diagnosis") or [], "epochs": epochs, "gpus": gpus, "loaders": loaders,
            "tail": train.get("tail") or [],
            "prediction": report_view.rows(doc), "prediction_title": report_view.title(doc),
            "prediction_header": report_view.HEADER}


def context(docs: list[dict[str, Any]], comparisons: dict[str, Any] | None) -> dict[str, Any]:
    return {"schema": SCHEMA, "views": [view(d) for d in docs], "loader_columns": LOADER_COLUMNS, "charts": [train_charts(d) for d in docs],
            "comparison": comparison_rows(comparisons or {})}


def render_markdown(docs: list[dict[str, Any]], comparisons: dict[str, Any] | None = None) -> str:
    return markdown_env().get_template("train_report.md.j2").render(**context(docs, comparisons))


def render_html(docs: list[dict[str, Any]], comparisons: dict[str, Any] | None = None) -> str:
    return env().get_template("train_report.html.j2").render(**context(docs, comparisons))
