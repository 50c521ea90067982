"""`provision report FILE...`: re-render saved reports, rank hosts, compare with history.

    provision report provision-reports/                 newest report per host in the folder
    provision report a.json b.json --html cmp.html      one page, hosts side by side
    provision report provision-reports/ --compare       each host against its previous run
    provision report r/ -i hosts.ini                    price_per_hour from the inventory

Every report read is also recorded in the local history (once: same content is not stored
twice), so `--compare` finds the previous run even for files copied from another machine.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

from provision.cli.common import EXIT_OK, console, emit_json
from provision.errors import ConfigError
from provision.paths import write_atomic
from provision.report import history
from provision.report.document import load_report
from provision.report.history import utc
from provision.report.render import print_console, rankings, render_html, render_markdown
from provision.terminal import console as text_console
from provision.terminal import markup, text

describe = "re-render saved reports; rank hosts by throughput and by samples per unit of money"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="report JSON files (from bench/up --out), or folders: the newest report per host",
    )
    parser.add_argument("--html", metavar="OUT", help="write one self-contained HTML page")
    parser.add_argument("--markdown", metavar="OUT", help="write Markdown")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="show each host's previous run from the local history, with the change in %%",
    )
    parser.add_argument(
        "--no-history",
        dest="record",
        action="store_false",
        help="do not record the reports read in the local history",
    )


def collect_reports(paths: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(reports to show, every report read): files as given; for a folder, the newest report
    of each host in it is shown and the older ones are only read (into the history)."""
    shown: list[dict[str, Any]] = []
    read: list[dict[str, Any]] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            newest: dict[str, dict[str, Any]] = {}
            for file in sorted(path.glob("*.json")):
                doc = load_report(file)
                read.append(doc)
                if doc["host"] not in newest or utc(doc["created"]) > utc(
                    newest[doc["host"]]["created"]
                ):
                    newest[doc["host"]] = doc
            if not newest:
                raise ConfigError(f"{path}: no report .json files in this folder")
            shown.extend(sorted(newest.values(), key=lambda d: d["host"]))
        else:
            shown.append(load_report(path))
            read.append(shown[-1])
    return shown, read


def apply_prices(docs: list[dict[str, Any]], inventory_files: list[str]) -> list[dict[str, Any]]:
    """Copies of the reports with price_per_hour from the inventory's host vars, where set."""
    if not inventory_files:
        return docs
    from provision.inventory.loader import load_inventory

    inventory = load_inventory(inventory_files)
    priced = []
    for doc in docs:
        host = inventory.hosts.get(doc["host"])
        value = host.vars.get("price_per_hour") if host else None
        if value is None:
            priced.append(doc)
            continue
        try:
            price = float(value)
        except (TypeError, ValueError):
            price = -1.0
        if not price > 0:
            origin = inventory.host_origins.get(doc["host"], ", ".join(inventory_files))
            raise ConfigError(
                f"{origin}: host {doc['host']}: price_per_hour={value!r} is not a positive number"
            )
        doc = copy.deepcopy(doc)
        doc["price_per_hour"] = price
        priced.append(doc)
    return priced


def run(args: argparse.Namespace) -> int:
    # every section a report may carry registers when its package is imported (the bench's,
    # choose's prediction, a run's timings, train's layout and compared figures); start-up
    # time: only here
    import provision.bench  # noqa: F401
    import provision.choose  # noqa: F401
    import provision.engine  # noqa: F401
    import provision.train  # noqa: F401

    docs, read = collect_reports(args.files)
    if args.record:
        for doc in read:
            history.record(doc)
    comparisons: dict[str, Any] = {}
    if args.compare:
        for doc in docs:
            found = history.compare(doc)
            if found is not None:
                comparisons[doc["host"]] = found
    docs = apply_prices(docs, args.inventory)
    if args.html:
        write_atomic(Path(args.html).expanduser(), render_html(docs, comparisons))
        console.print(text(f"HTML report: {args.html}"))
    if args.markdown:
        write_atomic(Path(args.markdown).expanduser(), render_markdown(docs, comparisons))
        console.print(text(f"Markdown report: {args.markdown}"))
    if args.json:
        document: dict[str, Any] = {"ranking": rankings(docs), "reports": docs}
        if args.compare:
            document["compare"] = {d["host"]: comparisons.get(d["host"]) for d in docs}
        emit_json(document)
        return EXIT_OK
    # the report is this command's output: stdout (`> report.txt`, `| less`); notes stay on stderr
    print_console(docs, text_console(highlight=False, soft_wrap=True), comparisons, detail=bool(args.verbose))
    if args.compare:
        missing = [d["host"] for d in docs if d["host"] not in comparisons]
        if missing:
            console.print(markup("[dim]no earlier run in the history for: {}[/]", ", ".join(missing)))
    return EXIT_OK
