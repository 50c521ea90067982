"""The `comment` filter: text wrapped as a comment block of a file format (Ansible's builtin,
behaviour as documented and as ansible-playbook renders it; tests/unit/test_engine_corpus_gaps.py).

Layout: `beginning` line, `prefix` line × prefix_count, each text line after `decoration`, then
`postfix` line × postfix_count, `end` line. `prefix`/`postfix` default to the decoration without
its trailing blanks; a line holding only the decoration loses its trailing blanks too."""

from __future__ import annotations

from typing import Any

from jinja2.exceptions import FilterArgumentError

_STYLES: dict[str, dict[str, str]] = {
    "plain": {"decoration": "# "},
    "erlang": {"decoration": "% "},
    "c": {"decoration": "// "},
    "cblock": {"beginning": "/*", "decoration": " * ", "end": " */"},
    "xml": {"beginning": "<!--", "decoration": " - ", "end": "-->"},
}


def comment(text: Any, style: str = "plain", **options: Any) -> str:
    if style not in _STYLES:
        raise FilterArgumentError(f"comment: unknown style {style!r} (one of {', '.join(_STYLES)})")
    opts: dict[str, Any] = {**_STYLES[style], **options}
    decoration = str(opts.get("decoration", ""))
    nl = str(opts.get("newline", "\n"))
    frame = decoration.rstrip()
    prefix, postfix = str(opts.get("prefix", frame)), str(opts.get("postfix", frame))
    out = ""
    if opts.get("beginning"):
        out += f"{opts['beginning']}{nl}"
    if prefix:
        out += (nl if prefix == nl else prefix + nl) * int(opts.get("prefix_count", 1))
    body = decoration + str(text).replace(nl, nl + decoration)
    out += body.replace(decoration + nl, decoration.rstrip() + nl)
    out += "".join(nl + postfix for _ in range(int(opts.get("postfix_count", 1))))
    if opts.get("end"):
        out += f"{nl}{opts['end']}"
    return out
