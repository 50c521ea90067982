"""A `with_first_found` loop's terms, rendered as Ansible renders them for that loop (its
first_found plugin invoked as `with_`): a name (or `files:` entry) whose template is undefined
is left out, not an error — `"{{ ansible_lsb.id }}-{{ v }}.yml"` on a host without lsb facts
is one candidate less. A term that is one variable holding a list or mapping is walked item
by item (Ansible's lazy containers), so one undefined item drops only itself."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jinja2

from provision.engine.templating import UndefinedVariableError, is_template

if TYPE_CHECKING:
    from provision.engine.templating import Templar

_ONE_VARIABLE = re.compile(r"^\s*\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}\s*$")
_DROP = object()


def _without_undefined(value: Any) -> Any:
    if isinstance(value, jinja2.Undefined):
        return _DROP
    if isinstance(value, Mapping):
        items = ((k, _without_undefined(v)) for k, v in value.items())
        return {k: v for k, v in items if v is not _DROP}
    if isinstance(value, (list, tuple)):
        kept = [v for v in map(_without_undefined, value) if v is not _DROP]
        return kept if isinstance(value, list) else tuple(kept)
    return value


def render_first_found_terms(templar: Templar, terms: Any, variables: Mapping[str, Any]) -> Any:
    """`terms` rendered (as controller paths: engine/host_paths.py), undefined parts left out."""
    lazy = templar.vars(variables)
    raw = lazy.raw()

    def render(value: Any, seen: frozenset[str]) -> Any:
        if isinstance(value, list):
            return [r for r in (render(v, seen) for v in value) if r is not _DROP]
        if isinstance(value, Mapping):
            pairs = ((k, render(v, seen)) for k, v in value.items())
            return {k: v for k, v in pairs if v is not _DROP}
        if not is_template(value):
            return value
        one = _ONE_VARIABLE.match(value)
        if one and one.group(1) not in seen and isinstance(raw.get(one.group(1)), (list, Mapping)):
            return render(raw[one.group(1)], seen | {one.group(1)})
        try:
            return _without_undefined(templar.render_path(value, lazy, "with_first_found"))
        except UndefinedVariableError:
            return _DROP

    out = render(terms, frozenset())
    return [] if out is _DROP else out
