"""The lookups that build lists from their terms, as ansible-core's plugins do (the `with_*`
loops use them): subelements, together, nested (community.general.cartesian), dict, sequence,
indexed_items, random_choice, flattened (community.general.flattened), inventory_hostnames.
Values and error texts follow plugins/lookup/*.py (playbooks and ansible-core's targets test
them)."""

from __future__ import annotations

import copy
import itertools
import random
import re
from collections.abc import Mapping
from typing import Any

from provision.engine.lookup_options import convert, lookup_error, parse_kv
from provision.errors import ConfigError
from provision.inventory.model import Host, Inventory
from provision.inventory.patterns import select_names

_SUBELEMENT_FLAGS = ("skip_missing",)


def subelements(terms: tuple[Any, ...]) -> list[Any]:
    """[(element, sub-element)] for each element's list at the dotted key; the list itself is
    taken out of the element (Ansible pops it); `skipped` elements and results are left out."""
    if not 2 <= len(terms) <= 3:
        raise lookup_error("subelements lookup expects a list of two or three items, ")
    if not isinstance(terms[0], (list, Mapping)) or not isinstance(terms[1], str):
        raise lookup_error(
            "subelements lookup expects a list of two or three items, first a dict or a list, "
            "second a string pointing to the subkey"
        )
    path = terms[1].split(".")
    if isinstance(terms[0], Mapping):
        if terms[0].get("skipped", False) is not False:
            return []
        elements = list(terms[0].values())
    else:
        elements = list(terms[0])
    flags = terms[2] if len(terms) == 3 else {}
    if not isinstance(flags, Mapping) or not all(k in _SUBELEMENT_FLAGS for k in flags):
        raise lookup_error(
            "subelements lookup expects a list of two or three items, the optional third item "
            f"must be a dict with flags {_SUBELEMENT_FLAGS}"
        )
    skip_missing = convert("subelements", "skip_missing", "bool", flags.get("skip_missing", False))
    out: list[Any] = []
    for original in elements:
        if not isinstance(original, Mapping):
            raise lookup_error(f"subelements lookup expects a dictionary, got '{original}'")
        if original.get("skipped", False) is not False:
            continue
        element = copy.deepcopy(dict(original))  # the popped list must not leave the variable
        value: Any = element
        sublist: list[Any] = []
        for index, key in enumerate(path):
            last = index == len(path) - 1
            if key not in value:
                if skip_missing:
                    continue
                raise lookup_error(f"could not find '{key}' key in iterated item '{value}'")
            if not last:
                if not isinstance(value[key], Mapping):
                    if skip_missing:
                        continue
                    raise lookup_error(
                        f"the key {key} should point to a dictionary, got '{value[key]}'"
                    )
                value = value[key]
            elif not isinstance(value[key], list):
                raise lookup_error(f"the key {key} should point to a list, got '{value[key]}'")
            else:
                sublist = value.pop(key)
        out.extend([element, sub] for sub in sublist)
    return out


def _lists(kind: str, terms: tuple[Any, ...]) -> list[list[Any]]:
    lists = []
    for term in terms:
        if not isinstance(term, (list, tuple)):
            raise lookup_error(f"{kind}: every term must be a list, got {term!r}")
        lists.append(list(term))
    return lists


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        for item in value:
            out.extend(_flatten(item))
        return out
    return [] if value is None else [value]


def _flatten_once(terms: tuple[Any, ...]) -> list[Any]:
    out: list[Any] = []
    for term in terms:
        out.extend(term if isinstance(term, list) else [term])
    return out


def together(terms: tuple[Any, ...]) -> list[Any]:
    if not terms:
        raise lookup_error("with_together requires at least one element in each list")
    try:
        return [_flatten_once(t) for t in itertools.zip_longest(*terms)]
    except TypeError as exc:
        raise lookup_error(f"together: {exc}") from None


# -- sequence ------------------------------------------------------------------------------
_NUM = "(0?x?[0-9a-f]+)"
_SHORTCUT = re.compile(f"^({_NUM}-)?{_NUM}(/{_NUM})?(:(.+))?$", re.IGNORECASE)
_SEQ_SPEC = {
    "start": ("integer", 1),
    "end": ("integer", None),
    "count": ("integer", None),
    "stride": ("integer", 1),
    "format": ("str", "%d"),
}


def _sequence_one(term: str, kwargs: Mapping[str, Any]) -> list[str]:
    raw: dict[str, Any] = {k: kwargs.get(k, default) for k, (_t, default) in _SEQ_SPEC.items()}
    short = _SHORTCUT.match(term)
    if short:
        _, start, end, _, stride, _, fmt = short.groups()
        given = {"start": start, "end": end, "stride": stride, "format": fmt}
        raw.update({k: v for k, v in given.items() if v is not None})
    else:
        words: dict[str, Any] = parse_kv(term)
        for name in _SEQ_SPEC:
            value = words.pop(name, None)
            if value is not None:
                raw[name] = value
        if words:
            raise lookup_error(f"unrecognized arguments to with_sequence: {list(words)}")
    opt = {k: convert("sequence", k, _SEQ_SPEC[k][0], v) for k, v in raw.items()}
    start, end, count, stride, fmt = (opt[k] for k in ("start", "end", "count", "stride", "format"))
    if count is None and end is None:
        raise lookup_error("must specify count or end in with_sequence")
    if count is not None and end is not None:
        raise lookup_error("can't specify both count and end in with_sequence")
    if count is not None:
        if count == 0:
            return []
        end = start + count * stride - 1  # Ansible's arithmetic, negative strides included
    if stride > 0 and end < start:
        raise lookup_error("to count backwards make stride negative")
    if stride < 0 and end > start:
        raise lookup_error("to count forward don't make stride negative")
    if stride == 0:
        return []
    if fmt.count("%") != 1:
        raise lookup_error(f"bad formatting string: {fmt}")
    out = []
    for number in range(start, end + (1 if stride >= 0 else -1), stride):
        try:
            out.append(fmt % number)
        except (ValueError, TypeError):
            raise lookup_error(f"problem formatting {number!r} with {fmt!r}") from None
    return out


def sequence(terms: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[str]:
    """`start=1 end=10 stride=2 format=x%02d`, `count=4`, or the short `[start-]end[/stride][:fmt]`;
    keyword arguments are the defaults of every term (and alone make one sequence)."""
    if kwargs and not terms:
        terms = ("",)
    out: list[str] = []
    for term in terms:
        out.extend(_sequence_one(str(term), kwargs))
    return out


def inventory_hostnames(variables: Mapping[str, Any], terms: tuple[Any, ...]) -> list[str]:
    """The hosts the pattern(s) select among the play's `groups` (none when one is unknown)."""
    groups = variables.get("groups")
    if not isinstance(groups, Mapping):
        return []
    names: dict[str, None] = {}
    for members in groups.values():
        names.update(dict.fromkeys(members))
    inventory = Inventory(
        hosts={name: Host(name=name) for name in names},
        groups={"all": [], **{g: list(m) for g, m in groups.items() if g != "all"}},
    )
    patterns = [str(t) for t in _flatten(list(terms))]
    try:
        return select_names(inventory, patterns)
    except ConfigError:
        return []


def list_lookup(kind: str, terms: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[Any] | None:
    """The values of list lookup `kind`; None when `kind` is not one of these."""
    if kind == "subelements":
        return subelements(terms)
    if kind == "together":
        return together(terms)
    if kind == "nested":
        lists = _lists(kind, terms)
        return [list(t) for t in itertools.product(*lists)] if lists else []
    if kind == "indexed_items":
        return [[i, v] for i, v in enumerate(_flatten_once(terms))]
    if kind == "random_choice":
        items = list(terms)
        return [random.choice(items)] if items else []
    if kind == "flattened":
        return _flatten(list(terms))
    if kind == "sequence":
        return sequence(terms, kwargs)
    if kind == "items":
        return _flatten_once(terms)
    if kind == "list":
        return list(terms)
    if kind == "dict":
        out: list[Any] = []
        for term in terms:
            if not isinstance(term, Mapping):
                raise lookup_error(f"dict: needs a mapping, got {type(term).__name__}")
            out.extend({"key": k, "value": v} for k, v in term.items())
        return out
    return None
