"""How report figures are shown, in every output: numbers as people read them, the Jinja2
environment of the Markdown and HTML templates (host text made visible, never an escape
sequence), severity styles, and the before/after rows of `provision report --compare`. Shared
by the bench layout (render.py) and the layouts sections bring (e.g. provision/train/render.py).
"""

from __future__ import annotations

from typing import Any

import jinja2
from markupsafe import Markup

from provision.paths import bundle_dir
from provision.terminal import MdText, md, md_code, md_fence, visible

SEVERITY_STYLE = {"critical": "bold red", "warn": "yellow", "info": "cyan"}


def num(value: Any, digits: int = 3) -> str:
    """A figure as people read it: 3 significant digits, thousands separated, "—" if missing."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 10**digits:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    return str(value)


def gib(nbytes: Any) -> str:
    return "—" if not isinstance(nbytes, (int, float)) else f"{nbytes / 2**30:.1f} GiB"


def comparison_rows(comparisons: dict[str, dict[str, Any]]) -> list[list[str]]:
    """[host, previous run, figure, before, now, change %] from history.compare results."""
    rows = []
    for host, c in comparisons.items():
        for figure, f in c["figures"].items():
            delta = f["change_pct"]
            rows.append(
                [
                    host,
                    str(c["previous"]["created"]),
                    figure,
                    num(f["before"]),
                    num(f["now"]),
                    "—" if delta is None else f"{delta:+.1f}%",
                ]
            )
    return rows


def env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(bundle_dir("templates"))),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default=False),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_shown,  # every value a report shows: a host's text carries no escape sequence
    )
    env.filters["num"] = num
    return env


def markdown_env() -> jinja2.Environment:
    """The Markdown templates' environment: every value is host text unless provision made it as
    Markdown (MdText) — escaped by provision/terminal.py's `md`, like HTML's autoescape."""
    md_env = env()
    md_env.finalize = lambda value: value if isinstance(value, MdText) else md(value)
    md_env.filters.update(md=md, code=md_code, fence=md_fence, join=_md_join)
    return md_env


def _md_join(values: Any, separator: str = "") -> MdText:
    return MdText(separator.join(md(v) for v in values))


def _shown(value: Any) -> Any:
    if isinstance(value, str) and not isinstance(value, Markup):  # Markup: our own SVG charts
        return visible(value)
    return value
