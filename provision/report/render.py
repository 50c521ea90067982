"""Render report documents: console (rich), Markdown and self-contained HTML (templates/)."""

from __future__ import annotations

from typing import Any

import jinja2
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table

from provision.paths import bundle_dir
from provision.report import charts
from provision.report.document import get, headline

SEVERITY_STYLE = {"critical": "bold red", "warn": "yellow", "info": "cyan"}


def rank(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hosts ranked by samples per unit of money when every host has a price, else by throughput."""
    heads = [headline(d) for d in docs]
    by_money = all(h["samples_per_money"] for h in heads) and len(heads) > 0
    key = "samples_per_money" if by_money else "effective_samples_per_s"
    return sorted(heads, key=lambda h: -(h[key] or 0))


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(bundle_dir("templates"))),
        autoescape=lambda name: bool(name and name.endswith(".html.j2")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.globals["get"] = get
    return env


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:,.0f}"
    return str(value)


def _charts(doc: dict[str, Any]) -> dict[str, str]:
    curve = get(doc, "bench.dataloader.curve") or []
    amp_models = get(doc, "bench.amp.models") or {}
    amp_labels, amp_values = [], []
    for name, m in amp_models.items():
        for dtype, run in (m.get("runs") or {}).items():
            if run.get("samples_per_s"):
                amp_labels.append(f"{name} {dtype}")
                amp_values.append(float(run["samples_per_s"]))
    peak_labels, peak_values = [], []
    for g in get(doc, "bench.compute.per_gpu") or []:
        for dtype, pct in (g.get("pct_of_peak") or {}).items():
            if pct is not None:
                peak_labels.append(f"{g.get('index', '')}:{dtype}")
                peak_values.append(float(pct))
    return {
        "num_workers": charts.line_chart(
            "DataLoader samples/s by num_workers",
            [p["num_workers"] for p in curve if p.get("samples_per_s") is not None],
            [p["samples_per_s"] for p in curve if p.get("samples_per_s") is not None],
            "num_workers", "samples/s"),
        "amp": charts.bar_chart("Training samples/s: fp32 vs AMP", amp_labels, amp_values),
        "peak": charts.bar_chart("Matmul % of dense peak", peak_labels, peak_values, "%"),
    }


def render_markdown(docs: list[dict[str, Any]]) -> str:
    return _env().get_template("report.md.j2").render(docs=docs, ranking=rank(docs))


def render_html(docs: list[dict[str, Any]]) -> str:
    return _env().get_template("report.html.j2").render(
        docs=docs, ranking=rank(docs), charts={d["host"]: _charts(d) for d in docs})


def print_console(docs: list[dict[str, Any]], console: Console) -> None:
    for doc in docs:
        h = headline(doc)
        t = Table(show_header=False, box=None, pad_edge=False)
        t.add_column(style="bold cyan")
        t.add_column()
        t.add_row("GPU", f"{h['gpu']} ×{h['gpu_count']}" if h["gpu_count"] else "none (CPU)")
        t.add_row("Training", f"{_num(h['train_samples_per_s'])} samples/s · AMP speedup {_num(h['amp_speedup'])}×")
        t.add_row("DataLoader", f"{_num(h['loader_samples_per_s'])} samples/s at num_workers={_num(h['best_num_workers'])}")
        install = doc.get("install") or {}
        if install.get("python"):
            t.add_row("Environment", f"{install.get('python')} · torch {install.get('torch', '?')}")
        for ds in doc.get("datasets") or []:
            t.add_row("Dataset", f"{ds.get('path')} · {ds.get('count')} samples")
        findings = [
            f"[{SEVERITY_STYLE.get(f['severity'], '')}]{f['severity'].upper()}[/] {f['title']}\n"
            f"   [dim]evidence:[/] {f['evidence']}\n   [dim]do:[/] {f['recommendation']}"
            for f in doc.get("diagnosis") or []
        ]
        body = Group(t, *(findings or ["[green]no findings: this server looks right[/]"]))
        console.print(Panel(body, title=f"[bold]{doc['host']}[/] report", title_align="left"))
    if len(docs) > 1:
        table = Table(title="Ranking")
        for col in ("#", "host", "GPU", "samples/s", "samples per money", "critical", "warn"):
            table.add_column(col)
        for i, h in enumerate(rank(docs), 1):
            table.add_row(str(i), str(h["host"]), h["gpu"], _num(h["effective_samples_per_s"]),
                          _num(h["samples_per_money"]), str(h["critical"]), str(h["warnings"]))
        console.print(table)
