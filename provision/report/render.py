"""Render report documents: console (rich), Markdown and self-contained HTML (templates/).

One `view` per document turns the raw sections into labelled rows with formatted numbers, so
the three outputs show the same figures; the templates only lay them out. Every part of the
bench layout comes from a registered section (provision/report/sections.py: the bench's own,
choose's prediction, a run's timings), and a section that owns documents (`provision train`'s)
renders them in its own layout. Depends on the schema, the registry and report's own parts only.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table

from provision.report import sections
from provision.report.formatting import SEVERITY_STYLE, comparison_rows, env, gib, markdown_env, num
from provision.report.schema import SCHEMA, headline, pct_delta
from provision.terminal import escape

__all__ = [  # with the names callers have always imported from here
    "SEVERITY_STYLE", "comparison_rows", "diagnosis_headline", "gib",
    "num", "pct_delta", "print_console", "rank", "rankings", "render_html", "render_markdown", "view",
]  # fmt: skip


# -- ranking -----------------------------------------------------------------------------------------


def rankings(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Hosts side by side: by effective samples/s, and by samples per unit of money for the hosts
    with a price_per_hour. Hosts without a figure go last. `note` says when the workloads differ
    (a GPU bench at 224 px against a CPU one at 32 px is no contest)."""
    heads = [headline(d) for d in docs]
    by_throughput = sorted(heads, key=lambda h: -(h["effective_samples_per_s"] or -1.0))
    priced = [h for h in heads if h["samples_per_money"]]
    by_money = sorted(priced, key=lambda h: -h["samples_per_money"])
    sizes = {h["image_size"] for h in heads if h["image_size"]}
    note = None
    if len(sizes) > 1:
        note = (
            "the hosts benchmarked different image sizes ("
            + ", ".join(f"{s} px" for s in sorted(sizes))
            + "): samples/s compare only within one size"
        )
    unpriced = [h["host"] for h in heads if not h["price_per_hour"]]
    return {
        "by_throughput": by_throughput,
        "by_money": by_money,
        "unpriced": unpriced if priced else [],
        "note": note,
    }


def rank(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The one ordering to show first: by money when every host has a price, else throughput."""
    r = rankings(docs)
    if r["by_money"] and not r["unpriced"]:
        return r["by_money"]
    return r["by_throughput"]


def diagnosis_headline(findings: list[dict[str, Any]]) -> str:
    """One console line: the most severe finding (they come sorted) and how many more."""
    if not findings:
        return "no findings"
    first = findings[0]
    more = len(findings) - 1
    return f"{first.get('severity')}: {first.get('title')}" + (f" (+{more} more)" if more else "")


# -- the per-document view -----------------------------------------------------------------------


def view(doc: dict[str, Any]) -> dict[str, Any]:
    """The document's rows, tables and notes from the registered sections (the bench's first,
    choose's prediction, the run's timings last): a table with no rows is not shown."""
    return {
        "host": doc["host"],
        "created": doc["created"],
        "headline": headline(doc),
        "overview": sections.overview(doc),
        "diagnosis": doc.get("diagnosis") or [],
        "tables": [t for t in sections.tables(doc) if t[2]],
        "not_measured": sections.not_measured(doc),
    }


# -- outputs -----------------------------------------------------------------------------------------


def _context(docs: list[dict[str, Any]], comparisons: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "docs": docs,
        "views": [view(d) for d in docs],
        "rankings": rankings(docs),
        "comparison": comparison_rows(comparisons or {}),
    }


def render_markdown(docs: list[dict[str, Any]], comparisons: dict[str, Any] | None = None) -> str:
    owner = sections.owner(docs)  # e.g. `provision train` reports: their own layout
    if owner is not None and owner.render_markdown is not None:
        return owner.render_markdown(docs, comparisons)
    return markdown_env().get_template("report.md.j2").render(**_context(docs, comparisons))


def render_html(docs: list[dict[str, Any]], comparisons: dict[str, Any] | None = None) -> str:
    owner = sections.owner(docs)
    if owner is not None and owner.render_html is not None:
        return owner.render_html(docs, comparisons)
    ctx = _context(docs, comparisons)
    ctx["charts"] = [sections.charts(d) for d in docs]
    return env().get_template("report.html.j2").render(**ctx)


def _table(title: str, header: list[str], rows: list[list[str]]) -> Table:
    t = Table(
        title=title, title_justify="left", title_style="bold", show_edge=False, pad_edge=False
    )
    for col in header:
        t.add_column(col)
    for row in rows:
        t.add_row(*(escape(cell) for cell in row))
    return t


def print_console(
    docs: list[dict[str, Any]],
    console: Console,
    comparisons: dict[str, Any] | None = None,
    detail: bool = False,
) -> None:
    """One panel per host (overview, findings; the section tables with `detail`), then the
    rankings and the comparison with the previous runs."""
    for doc in docs:
        v = view(doc)
        t = Table(show_header=False, box=None, pad_edge=False)
        t.add_column(style="bold cyan", no_wrap=True)
        t.add_column()
        for label, value in v["overview"]:
            t.add_row(escape(label), escape(value))
        parts: list[Any] = [t]
        for f in v["diagnosis"]:
            style = SEVERITY_STYLE.get(f["severity"], "")
            parts.append(
                f"[{style}]{escape(f['severity'].upper())}[/] [bold]{escape(f['title'])}[/]\n"
                f"   [dim]evidence:[/] {escape(f['evidence'])}\n   [dim]do:[/] {escape(f['recommendation'])}"
            )
        if not v["diagnosis"]:
            parts.append("[green]no findings: this server looks right[/]")
        if detail:
            parts += [_table(title, header, rows) for title, header, rows in v["tables"]]
        for name, reason in v["not_measured"]:
            parts.append(f"[dim]{escape(name)}: {escape(reason)}[/]")
        console.print(
            Panel(
                Group(*parts),
                title=f"[bold]{escape(doc['host'])}[/] · {escape(doc['created'])}",
                title_align="left",
            )
        )
    r = rankings(docs)
    if len(docs) > 1:
        table = Table(title="Ranking by effective samples/s", title_justify="left")
        for col in (
            "#",
            "host",
            "GPU",
            "effective samples/s",
            "train",
            "loader",
            "critical",
            "warn",
        ):
            table.add_column(col)
        for i, h in enumerate(r["by_throughput"], 1):
            table.add_row(
                str(i), escape(h["host"]), escape(h["gpu"]), num(h["effective_samples_per_s"]),
                num(h["train_samples_per_s"]), num(h["loader_samples_per_s"]),
                str(h["critical"]), str(h["warnings"]),
            )  # fmt: skip
        console.print(table)
    if r["by_money"] and len(docs) > 1:
        table = Table(
            title="Ranking by samples per unit of money (price_per_hour)", title_justify="left"
        )
        for col in ("#", "host", "price/hour", "effective samples/s", "samples per money"):
            table.add_column(col)
        for i, h in enumerate(r["by_money"], 1):
            table.add_row(
                str(i), escape(h["host"]), num(h["price_per_hour"]),
                num(h["effective_samples_per_s"]), num(h["samples_per_money"]),
            )  # fmt: skip
        console.print(table)
        if r["unpriced"]:
            console.print(f"[dim]no price_per_hour: {escape(', '.join(r['unpriced']))}[/]")
    if r["note"]:
        console.print(f"[yellow]note:[/] {escape(r['note'])}")
    rows = comparison_rows(comparisons or {})
    if rows:
        console.print(
            _table(
                "Compared with each host's previous run",
                ["host", "previous", "figure", "before", "now", "change"],
                rows,
            )
        )
