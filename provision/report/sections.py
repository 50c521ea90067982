"""The registry of report sections. Every kind of section is a provider registered from its own
package: the bench's overview, tables, charts and what was not measured (provision/bench/),
the choose check's `prediction` (provision/choose/), a playbook run's `timings`
(provision/engine/), `provision train`'s own layout (provision/train/), each by its
report_section.py. A provider contributes its part of a document being built, its rows, tables
and charts to the bench layout (in the order of `order`, then of registration), or a whole
layout of its own for the documents it owns, and the figures its documents are compared by in
the history.

report/ reads providers only through this registry, so it never imports the packages above it.
A package registers its provider when it is imported (its __init__): whoever builds or renders
documents imports the packages whose sections they carry (cli/report.py: every one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Doc = dict[str, Any]
Table = tuple[str, list[str], list[list[str]]]  # (title, header, rows): rows empty = not shown


@dataclass(frozen=True)
class Section:
    name: str
    # adds its part to a document being built: the part, or None for none
    contribute: Callable[[Doc], dict[str, Any] | None] | None = None
    # where its parts sit in the bench layout: lower first (the bench's own 10, choose's 50, timings 90)
    order: int = 50
    # its overview rows (label, value) and its "not measured" notes (what, why) in the bench layout
    overview: Callable[[Doc], list[tuple[str, str]]] | None = None
    not_measured: Callable[[Doc], list[tuple[str, str]]] | None = None
    # its table(s) in the bench layout (console, Markdown, HTML) and its charts (name -> SVG, '' = none)
    table: Callable[[Doc], Table] | None = None
    tables: Callable[[Doc], list[Table]] | None = None
    charts: Callable[[Doc], dict[str, str]] | None = None
    # the documents it owns get its own layout (all documents of one rendering must be its)
    owns: Callable[[Doc], bool] | None = None
    render_markdown: Callable[[list[Doc], dict[str, Any] | None], str] | None = None
    render_html: Callable[[list[Doc], dict[str, Any] | None], str] | None = None
    # what its documents are compared by in the history: headline figures and (label, key) pairs
    headline: Callable[[Doc], dict[str, Any]] | None = None
    compared: tuple[tuple[str, str], ...] = field(default_factory=tuple)


_SECTIONS: dict[str, Section] = {}


def register(section: Section) -> Section:
    """Register (or replace, on a re-import) the provider of one section."""
    _SECTIONS[section.name] = section
    return section


def registered() -> list[Section]:
    """The providers in layout order (`order`, then registration: sorted() is stable)."""
    return sorted(_SECTIONS.values(), key=lambda s: s.order)


def contribute(doc: Doc) -> None:
    """Each provider's part, set on `doc` under its name (a provider with nothing leaves it out)."""
    for section in registered():
        if section.contribute is not None and (part := section.contribute(doc)) is not None:
            doc[section.name] = part


def owner(docs: list[Doc]) -> Section | None:
    """The provider whose own layout renders these documents (every one of them is its)."""
    if not docs:
        return None
    for section in registered():
        if section.owns is not None and all(section.owns(d) for d in docs):
            return section
    return None


def owner_of(doc: Doc) -> Section | None:
    return owner([doc])


def overview(doc: Doc) -> list[tuple[str, str]]:
    return [row for s in registered() if s.overview is not None for row in s.overview(doc)]


def tables(doc: Doc) -> list[Table]:
    out: list[Table] = []
    for section in registered():
        if section.tables is not None:
            out += section.tables(doc)
        if section.table is not None:
            out.append(section.table(doc))
    return out


def not_measured(doc: Doc) -> list[tuple[str, str]]:
    return [row for s in registered() if s.not_measured is not None for row in s.not_measured(doc)]


def charts(doc: Doc) -> dict[str, str]:
    out: dict[str, str] = {}
    for section in registered():
        if section.charts is not None:
            out.update(section.charts(doc))
    return out
