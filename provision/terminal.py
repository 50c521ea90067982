"""Host text reaches the user's terminal as text: never as rich markup, never as control or
escape sequences.

A host's log lines, command output, error text and names can hold `[bold red]…[/]`,
`[link=…]`, ANSI CSI/OSC sequences (`\\x1b[2J`, `\\x1b]8;;URL\\x1b\\\\`, a retitled window),
`\\r` and backspaces that overwrite what provision printed, or bidi overrides that reorder it.
`visible()` is the one rule for what may reach the terminal: every C0/C1 control except `\\n`
and `\\t`, DEL and the bidi controls are shown as escapes (`\\x1b`, `\\u202e`); `\\r\\n` is a
newline. `escape()` adds rich's markup escaping, for text put inside a markup string. The CLI's
console (`console()`) applies `visible()` to every string it renders (print, out, table cells),
so a call site that forgets still cannot emit a control sequence; `escape()` is what keeps
markup out, at each place host text joins provision's own markup.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["console", "escape", "visible"]

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


def escape(text: Any) -> str:
    """Host text to put inside a rich markup string: controls visible, markup escaped."""
    from rich.markup import escape as markup_escape

    return markup_escape(visible(text))


def console(**options: Any) -> Console:
    """A rich Console that shows every string it renders through `visible()`."""
    from rich.console import Console

    class _TextConsole(Console):
        def render_str(self, text: str, **kw: Any) -> Any:
            return super().render_str(visible(text), **kw)

    options.setdefault("emoji", False)  # `:smile:` in a host's line stays text
    return _TextConsole(**options)
