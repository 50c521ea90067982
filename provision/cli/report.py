"""`provision report FILE...`: re-render saved reports, rank hosts, compare with history."""

from __future__ import annotations

import argparse
from pathlib import Path

from provision.cli.common import console, emit_json
from provision.report import history
from provision.report.document import headline, load_report
from provision.report.render import print_console, rank, render_html, render_markdown

describe = "re-render saved reports; rank hosts by throughput and by samples per unit of money"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="report JSON files (from bench/up --out)")
    parser.add_argument("--html", metavar="OUT", help="write one self-contained HTML page")
    parser.add_argument("--markdown", metavar="OUT", help="write Markdown")
    parser.add_argument("--compare", action="store_true",
                        help="rank hosts side by side and show each host's previous run from the history")


def run(args: argparse.Namespace) -> int:
    docs = [load_report(f) for f in args.files]
    if args.html:
        Path(args.html).write_text(render_html(docs), encoding="utf-8")
        console.print(f"HTML report: {args.html}")
    if args.markdown:
        Path(args.markdown).write_text(render_markdown(docs), encoding="utf-8")
        console.print(f"Markdown report: {args.markdown}")
    previous = {}
    if args.compare:
        for doc in docs:
            prev = history.previous(doc["host"], doc["created"])
            if prev:
                previous[doc["host"]] = headline(prev)
    if args.json:
        emit_json({"ranking": rank(docs), "previous": previous, "reports": docs})
        return 0
    print_console(docs, console)
    for host, head in previous.items():
        console.print(f"[dim]{host}: previous run {head['effective_samples_per_s']} samples/s[/]")
    return 0
