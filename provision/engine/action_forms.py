"""Ansible's old-style task forms (parsing/mod_args.py `_normalize_old_style_args`), rewritten
to the module form the loader reads: `action: copy src=a dest=b`, `action: {module: copy,
src: a}` and `local_action:` (the same, delegated to localhost). Positions are kept."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from provision.engine.kv_text import split_words
from provision.engine.templating import is_template
from provision.yamlpos import Pos, YMap

OLD_STYLE = ("action", "local_action")


def _ymap(pos: Pos) -> YMap:
    out = YMap()
    out.pos, out.key_pos, out.value_pos = pos, {}, {}
    return out


def module_form(
    data: YMap, static: Callable[[str, Pos], str | None], error: Callable[[Pos, str], None]
) -> YMap:
    """The task with its `action:`/`local_action:` turned into `MODULE: ARGS`. `static` renders
    a templated module name as the play loads (role and play vars), or reports why not."""
    keys = [k for k in OLD_STYLE if k in data]
    if not keys:
        return data
    if len(keys) > 1:
        error(data.where(keys[1]), "action and local_action are mutually exclusive")
        return data
    key = keys[0]
    value = data[key]
    where = data.where(key, True)
    args: Any
    if isinstance(value, str):
        spans = split_words(value)
        if not spans:
            error(where, f"{key} needs a module name")
            return data
        name = value[spans[0][0] : spans[0][1]]
        rest = value[spans[0][1] :].strip()
        args = rest or None
    elif isinstance(value, Mapping) and isinstance(value.get("module"), str):
        spans = split_words(value["module"]) or [(0, 0)]
        name = value["module"][spans[0][0] : spans[0][1]]
        args = _ymap(where)
        for k, v in value.items():
            if k == "module":
                continue
            if k == "args" and isinstance(v, Mapping):  # Ansible merges a nested args: in
                args.update(v)
                continue
            args[k] = v
            if isinstance(value, YMap):
                args.key_pos[k], args.value_pos[k] = value.where(k), value.where(k, True)
        if spans[1:]:
            error(where, f"{key}: module: takes the module's name only; give its args as keys")
            return data
    else:
        error(where, f"{key} must be `MODULE ARGS` text or a mapping with module:")
        return data
    if is_template(name):
        rendered = static(name, where)
        if rendered is None:
            return data
        name = rendered
    out = _ymap(data.pos)
    for k, v in data.items():
        new = name if k == key else k
        out[new] = args if k == key else v
        out.key_pos[new] = data.where(k)
        out.value_pos[new] = data.where(k, True)
    if key == "local_action":
        out["delegate_to"] = "localhost"
        out.key_pos["delegate_to"] = out.value_pos["delegate_to"] = data.where(key)
    return out
