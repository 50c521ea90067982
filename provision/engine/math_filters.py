"""Ansible's mathstuff filters (ansible.builtin: plugins/filter/mathstuff.py and
module_utils/common/text/formatters.py), to its specification: set theory (`unique` with Jinja's
`case_sensitive`/`attribute`, `union`, `intersect`, `difference`, `symmetric_difference`),
`log`/`pow`/`root`, `product`/`permutations`/`combinations`, `human_readable`,
`human_to_bytes` and `rekey_on_member`, with Ansible's error texts (playbooks test them).

One difference on purpose: where Ansible builds a `set` (whose order of strings changes with
each run's hash seed) the set filters keep the inputs' order — one of the orders Ansible may give.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import jinja2
from jinja2.filters import do_unique


def _fail(message: str) -> jinja2.TemplateRuntimeError:
    return jinja2.TemplateRuntimeError(message)


@jinja2.pass_environment
def unique(
    env: jinja2.Environment, a: Any, case_sensitive: bool | None = None, attribute: Any = None
) -> list[Any]:
    """Jinja's `unique` (case-insensitive unless `case_sensitive=True`); on a TypeError (an
    unhashable item) Ansible's own, which refuses Jinja's parameters."""
    try:
        return list(do_unique(env, a, case_sensitive=bool(case_sensitive), attribute=attribute))
    except Exception as exc:
        if case_sensitive is False or attribute:
            raise _fail(
                "Jinja2's unique filter failed and we cannot fall back to Ansible's version as "
                "it does not support the parameters supplied."
            ) from exc
    out: list[Any] = []
    try:
        for item in a:
            if item not in out:
                out.append(item)
    except TypeError as exc:
        raise _fail(str(exc)) from None
    return out


def _members(a: Any) -> list[Any]:
    try:
        return list(a)
    except TypeError as exc:
        raise _fail(str(exc)) from None


def _distinct(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def union(a: Any, b: Any) -> list[Any]:
    return _distinct(_members(a) + _members(b))


def intersect(a: Any, b: Any) -> list[Any]:
    right = _members(b)
    return _distinct([x for x in _members(a) if x in right])


def difference(a: Any, b: Any) -> list[Any]:
    right = _members(b)
    return _distinct([x for x in _members(a) if x not in right])


def symmetric_difference(a: Any, b: Any) -> list[Any]:
    both = intersect(a, b)
    return [x for x in union(a, b) if x not in both]


def logarithm(x: Any, base: Any = math.e) -> float:
    try:
        return math.log10(x) if base == 10 else math.log(x, base)
    except TypeError:
        raise _fail("log() can only be used on numbers") from None


def power(x: Any, y: Any) -> float:
    try:
        return math.pow(x, y)
    except TypeError:
        raise _fail("pow() can only be used on numbers") from None


def inversepower(x: Any, base: Any = 2) -> float:
    try:
        return math.sqrt(x) if base == 2 else math.pow(x, 1.0 / float(base))
    except (ValueError, TypeError):
        raise _fail("root() can only be used on numbers") from None


SIZE_RANGES = {
    "Y": 1 << 80, "Z": 1 << 70, "E": 1 << 60, "P": 1 << 50, "T": 1 << 40,
    "G": 1 << 30, "M": 1 << 20, "K": 1 << 10, "B": 1,
}  # fmt: skip
_UNIT_NAMES = {
    "B": ("byte", "bit"), "K": ("kilobyte", "kilobit"), "M": ("megabyte", "megabit"),
    "G": ("gigabyte", "gigabit"), "T": ("terabyte", "terabit"), "P": ("petabyte", "petabit"),
    "E": ("exabyte", "exabit"), "Z": ("zetabyte", "zetabit"), "Y": ("yottabyte", "yottabit"),
}  # fmt: skip
_HUMAN = re.compile(r"^([0-9]*\.?[0-9]+)(?:\s*([A-Za-z]+))?\s*$")


def bytes_to_human(size: Any, isbits: bool = False, unit: str | None = None) -> str:
    """`10240` -> `10.00 KB` (`Bytes`/`bits` below a kilo), or in the given `unit`."""
    base = "bits" if isbits else "Bytes"
    suffix, limit = "B", 1
    for suffix, limit in sorted(SIZE_RANGES.items(), key=lambda item: -item[1]):
        if (unit is None and size >= limit) or (unit is not None and unit.upper() == suffix):
            break
    return f"{size / limit:.2f} {suffix + base[0] if limit != 1 else base}"


def human_to_bytes_value(number: Any, default_unit: str | None = None, isbits: bool = False) -> int:
    """`'10.00 KB'` -> 10240; `Kb` (bits) only with `isbits`, `KB` only without; a bare
    number (in `default_unit`, if given) rounds to an integer. ValueError when not one."""
    match = _HUMAN.search(str(number))
    if match is None:
        raise ValueError(f"human_to_bytes() can't interpret following string: {number}")
    num = float(match.group(1))
    unit = match.group(2) or default_unit
    if unit is None:
        return int(round(num))
    key = unit[0].upper()
    if key not in SIZE_RANGES:
        raise ValueError(
            f"human_to_bytes() failed to convert {number} (unit = {unit}). "
            f"The suffix must be one of {', '.join(SIZE_RANGES)}"
        )
    unit_class, class_name = ("b", "bit") if isbits else ("B", "byte")
    if len(unit) > 1:
        expect = f"expect {key}{unit_class} or {key}"
        if key == "B":
            expect = f"expect {unit_class} or {class_name}"
        word = _UNIT_NAMES[key][1 if isbits else 0]
        short = (key if key != "B" else "") + unit_class
        if unit.lower() != word and unit != short:
            raise ValueError(
                f"human_to_bytes() failed to convert {number}. Value is not a valid string ({expect})"
            )
    return int(round(num * SIZE_RANGES[key]))


def human_readable(size: Any, isbits: bool = False, unit: str | None = None) -> str:
    try:
        return bytes_to_human(size, isbits, unit)
    except TypeError:
        raise _fail("human_readable() failed on bad input") from None
    except Exception:
        raise _fail("human_readable() can't interpret the input") from None


def human_to_bytes(size: Any, default_unit: str | None = None, isbits: bool = False) -> int:
    try:
        return human_to_bytes_value(size, default_unit, isbits)
    except TypeError:
        raise _fail("human_to_bytes() failed on bad input") from None
    except Exception as exc:
        raise _fail(f"human_to_bytes() can't interpret the input: {exc}") from None


def rekey_on_member(data: Any, key: Any, duplicates: str = "error") -> dict[Any, Any]:
    """A dict (or list) of dicts as a dict keyed on each one's member `key`."""
    if duplicates not in ("error", "overwrite"):
        raise _fail(f"duplicates parameter to rekey_on_member has unknown value {duplicates!r}")
    if isinstance(data, Mapping):
        items: Iterable[Any] = data.values()
    elif isinstance(data, Iterable) and not isinstance(data, (str, bytes)):
        items = data
    else:
        raise _fail("Type is not a valid list, set, or dict")
    out: dict[Any, Any] = {}
    for item in items:
        if not isinstance(item, Mapping):
            raise _fail("List item is not a valid dict")
        try:
            member = item[key]
        except KeyError:
            raise _fail(f"Key {key!r} was not found.") from None
        if out.get(member) and duplicates == "error":
            raise _fail(f"Key {member!r} is not unique, cannot convert to dict.")
        out[member] = item
    return out


MATH_FILTERS: dict[str, Any] = {
    "log": logarithm,
    "pow": power,
    "root": inversepower,
    "unique": unique,
    "intersect": intersect,
    "difference": difference,
    "symmetric_difference": symmetric_difference,
    "union": union,
    "product": itertools.product,
    "permutations": itertools.permutations,
    "combinations": itertools.combinations,
    "human_readable": human_readable,
    "human_to_bytes": human_to_bytes,
    "rekey_on_member": rekey_on_member,
}
