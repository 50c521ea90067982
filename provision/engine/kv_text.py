"""`key=value` task text (`copy: src=a dest="b c"`), split as Ansible splits it."""

from __future__ import annotations

import re
from typing import Any

from provision.engine.kv_words import split_words
from provision.engine.playbook_model import RAW_PARAMS
from provision.modules.base import (
    Module,
)

_KV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
# a key that is a template (`set_fact: "{{ item }}=moo"`), rendered when the task runs: Ansible
# splits at the first `=`, so the key's expression holds none
_TEMPLATE_KEY = re.compile(r"^([^=]*\{\{[^=]*\}\}[^=]*)=(.*)$", re.DOTALL)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def _unquote(value: str) -> str:
    """Strip one pair of quotes; in "double quotes" \\n, \\t, \\" … are escapes (as in Ansible)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        if value[0] == '"':
            return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), inner)
        return inner
    return value


def parse_kv(text: str, module: Module) -> dict[str, Any]:
    """`src=a dest="b c" mode=0644` -> dict. For free-form modules (command, shell) only the
    module's own keys are pulled out; the rest of the text, untouched, is the free form."""
    spans = split_words(text)
    args: dict[str, Any] = {}
    if module.free_form:
        keep: list[tuple[int, int]] = []
        for start, end in spans:
            match = _KV.match(text[start:end])
            if match and match.group(1) in module.free_form_keys:
                args[match.group(1)] = _unquote(match.group(2))
            else:
                keep.append((start, end))
        if keep:
            args[module.free_form] = text[keep[0][0] : keep[-1][1]]
            # words pulled out from the middle leave the rest joined as written around them
            removed = [
                (s, e) for s, e in spans if (s, e) not in keep and keep[0][0] < s < keep[-1][1]
            ]
            if removed:
                pieces, cursor = [], keep[0][0]
                for s, e in removed:
                    pieces.append(text[cursor:s].rstrip())
                    cursor = e
                pieces.append(text[cursor : keep[-1][1]].lstrip())
                args[module.free_form] = " ".join(p for p in pieces if p)
        return args
    raw: list[tuple[int, int]] = []
    for start, end in spans:
        word = text[start:end]
        match = _KV.match(word) or _TEMPLATE_KEY.match(word)
        if not match:
            raw.append((start, end))  # Ansible's `_raw_params`: judged when the task runs
            continue
        args[match.group(1)] = _unquote(match.group(2))
    if raw:
        args[RAW_PARAMS] = " ".join(text[s:e] for s, e in raw)
    return args
