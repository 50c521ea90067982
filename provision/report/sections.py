"""The registry of report sections. A kind of section that lives outside report/ — the choose
check's `prediction`, `provision train`'s `train` — is a provider registered from its own package
(provision/choose/report_section.py, provision/train/report_section.py). It contributes its part
of a document being built, its table and charts to the bench layout, or a whole layout of its own
for the documents it owns, and the figures its documents are compared by in the history.

report/ reads providers only through this registry, so it never imports the packages above it.
A package registers its provider when it is imported (its __init__), so whoever builds or renders
documents with that section has imported it already.
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
    # its table in the bench layout (console, Markdown, HTML) and its charts (name -> SVG, '' = none)
    table: Callable[[Doc], Table] | None = None
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
    return list(_SECTIONS.values())


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


def tables(doc: Doc) -> list[Table]:
    return [s.table(doc) for s in registered() if s.table is not None]


def charts(doc: Doc) -> dict[str, str]:
    out: dict[str, str] = {}
    for section in registered():
        if section.charts is not None:
            out.update(section.charts(doc))
    return out
