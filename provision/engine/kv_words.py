"""Splitting `key=value` text into words as Ansible splits it: quotes and {{ }} / {% %} kept
together. Imports nothing of provision: the module args' parser (kv_text) and the lookups'
`k=v` terms (lookup_options) both use it."""

from __future__ import annotations


def split_words(text: str) -> list[tuple[int, int]]:
    """Spans of whitespace-separated words, keeping quotes and {{ }} / {% %} together."""
    spans: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        start = i
        quote: str | None = None
        depth = 0
        while i < n:
            c = text[i]
            if quote:
                if c == "\\" and quote == '"':
                    i += 2
                    continue
                if c == quote:
                    quote = None
            elif text.startswith(("{{", "{%", "{#"), i):
                depth += 1
                i += 2
                continue
            elif depth and text.startswith(("}}", "%}", "#}"), i):
                depth -= 1
                i += 2
                continue
            elif depth == 0 and c in "'\"":
                quote = c
            elif depth == 0 and c.isspace():
                break
            i += 1
        if quote:
            raise ValueError(f"unbalanced quote in {text!r}")
        spans.append((start, i))
    return spans
