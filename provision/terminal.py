"""The one way host text reaches a person: as text, never as rich markup, never as Markdown or
HTML, never as control or escape sequences.

A host's hostname, GPU names, log lines, command output, error text and file contents can hold
`[bold red]…[/]`, `[link=…]`, `[/x]` (a MarkupError), ANSI CSI/OSC sequences (`\\x1b[2J`,
`\\x1b]8;;URL\\x1b\\\\`, a retitled window), `\\r` and backspaces that overwrite what provision
printed, bidi overrides that reorder it, `<img onerror=…>` for a Markdown renderer, or a line of
three backticks that closes a fence.

- `visible()`: every C0/C1 control except `\\n` and `\\t`, DEL and the bidi controls shown as
  escapes (`\\x1b`, `\\u202e`); `\\r\\n` is a newline. The CLI's console (`console()`) applies it
  to every string it renders, so a call site that forgets cannot emit a control sequence.
- `text(value)`: a host value as a rich `Text` (table cells, progress descriptions, panels);
  `add_row(table, *cells)`: a table row whose str cells are text.
- `markup(template, *values)`: provision's own markup with `{}` fields filled by host values
  as literal text: the values never pass through rich's markup parser.
- `escape()`: rich's markup escaping, for the few places that must hand rich a markup string.
- `md()`, `md_code()`, `md_fence()`: host text in Markdown: HTML and Markdown syntax escaped,
  code spans and fences longer than any backtick run inside.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

__all__ = ["MdText", "add_row", "console", "escape", "markup", "md", "md_code", "md_fence", "text", "visible"]

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _show(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: Any) -> str:
    """`text` with every control character but newline and tab made visible."""
    text = text if isinstance(text, str) else str(text)
    if not _CONTROLS.search(text):
        return text
    return _CONTROLS.sub(_show, text.replace("\r\n", "\n"))


_LONE_BRACKET = re.compile(r"(\\+)\[(?![a-z#/@][^[]*?\])")


def escape(text: Any) -> str:
    """Host text to put inside a rich markup string: controls visible, markup escaped."""
    from rich.markup import escape as markup_escape

    # rich escapes only a `[` that looks like a tag, yet its renderer turns every `\[` of plain
    # text into `[`: one more backslash before any other `[` keeps the backslashes the host sent
    return _LONE_BRACKET.sub(r"\\\1[", markup_escape(visible(text)))


def console(**options: Any) -> Console:
    """A rich Console that shows every string it renders through `visible()`."""
    from rich.console import Console

    class _TextConsole(Console):
        def render_str(self, text: str, **kw: Any) -> Any:
            return super().render_str(visible(text), **kw)

    options.setdefault("emoji", False)  # `:smile:` in a host's line stays text
    return _TextConsole(**options)


def text(value: Any, style: str = "") -> Text:
    """A host value as a rich Text: shown literally, controls visible (a Text passes as it is)."""
    from rich.text import Text

    if isinstance(value, Text):
        return value
    return Text(visible(value), style=style)


def add_row(table: Any, *cells: Any, **options: Any) -> None:
    """`table.add_row` with every cell as text (`text()`): a str cell is never markup. A cell that
    is already a renderable (Text, a table) is kept; None stays an empty cell."""
    table.add_row(*(c if c is None or (not isinstance(c, str) and hasattr(c, "__rich_console__"))
                    else text(c) for c in cells), **options)


# field placeholders while a template is parsed: private-use characters provision never prints
_FIELD = 0xF0000
_FIELDS = re.compile("[\U000F0000-\U000F00FF]")


def markup(template: str, *values: Any, **named: Any) -> Text:
    """`template` (provision's own rich markup, `str.format` fields) with each field a host value
    as literal text (a Text value keeps its style). The template is parsed with a placeholder per field; each placeholder is then
    replaced by its value, styled as the markup around it says. `{}` only, no format specs."""
    import string

    from rich.text import Text

    order: list[Any] = []
    pieces: list[str] = []
    auto = 0
    for literal, field, spec, conversion in string.Formatter().parse(template):
        pieces.append(literal)
        if field is None:
            continue
        if spec or conversion:
            raise ValueError(f"markup(): no format spec or conversion in fields ({template!r})")
        if field == "":
            value, auto = values[auto], auto + 1
        elif field.isdigit():
            value = values[int(field)]
        else:
            value = named[field]
        pieces.append(chr(_FIELD + len(order)))
        order.append(value)
    if auto and auto != len(values):  # a value with no field would vanish from the message
        raise ValueError(f"markup(): {len(values)} values for {auto} fields in {template!r}")
    parsed = Text.from_markup("".join(pieces), emoji=False)
    if not order:
        return parsed
    out = Text(style=parsed.style, justify=parsed.justify, end=parsed.end)
    at = 0
    for m in _FIELDS.finditer(parsed.plain):
        out.append_text(parsed[at:m.start()])
        piece = text(order[ord(m.group()) - _FIELD]).copy()  # a Text value keeps its own style
        for span in parsed.spans:
            if span.start <= m.start() < span.end:
                piece.stylize(span.style)
        out.append_text(piece)
        at = m.end()
    out.append_text(parsed[at:])
    return out


# -- Markdown --------------------------------------------------------------------------------------


class MdText(str):
    """Markdown provision made (a table row, a fenced block): a renderer passes it on as it is."""


# CommonMark's backslash escapes; `<`, `>`, `&` as entities (raw HTML and autolinks need them).
# A backslash is escaped only before punctuation (elsewhere it is literal: `\\x1b` stays as is),
# an underscore only where it could open or close emphasis (not inside `num_workers`).
_MD_SPECIAL = re.compile(r"\\(?=[!-/:-@\[-`{-~])|[`*\[\]|~$]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_MD_ENTITY = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def md(value: Any) -> MdText:
    """Host text as Markdown inline text (a table cell, a list item, a heading): it renders as the
    very characters it holds: no HTML, no link, no emphasis, no table cell boundary, one line."""
    if isinstance(value, MdText):
        return value
    shown = visible(value).replace("\r", " ").replace("\n", " ")
    shown = _MD_SPECIAL.sub(lambda m: "\\" + m.group(), shown)
    shown = "".join(_MD_ENTITY.get(c, c) for c in shown)
    # at a line's start: a heading, a list item, a setext underline, an ordered list
    shown = re.sub(r"^([#+=-])(?=[#=-]*(\s|$))", r"\\\1", shown)
    return MdText(re.sub(r"^(\d+)([.)])(?=\s|$)", r"\1\\\2", shown))


def _longest_run(body: str, char: str = "`") -> int:
    runs = re.findall(re.escape(char) + "+", body)
    return max((len(r) for r in runs), default=0)


def md_code(value: Any) -> MdText:
    """Host text as an inline code span, delimited by more backticks than any run inside."""
    body = visible(value).replace("\n", " ")
    tick = "`" * (_longest_run(body) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return MdText(f"{tick}{pad}{body}{pad}{tick}")


def md_fence(lines: Any) -> MdText:
    """Host lines as a fenced code block: a fence longer than any backtick run in them (at least
    three), so no line can close it."""
    body = "\n".join(visible(line) for line in lines) if not isinstance(lines, str) else visible(lines)
    fence = "`" * max(3, _longest_run(body) + 1)
    return MdText(f"{fence}text\n{body}\n{fence}")
