"""A small language for the shape of a host's JSON reply, and its one validator (issue 29).

A shape says what the controller reads: types, ranges, finite numbers, lengths, enumerations.
Objects are open (keys no shape names pass unchecked: the controller does not read them) and
every named field may be absent or null (the agent's convention: null means "this host does not
say"), unless the object lists it as required; a list's items may not be null. A value that does not fit raises ShapeError with
the path of the field (`gpus[2].memory.total_mib`), what was expected and what came.

Declared shapes: provision/remote/replies.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

TEXT_MAX = 1 << 16  # one string field, in characters, unless a shape says otherwise
ITEMS_MAX = 1 << 16  # one list's items, unless a shape says otherwise


class ShapeError(ValueError):
    def __init__(self, path: str, expected: str, got: Any) -> None:
        self.path, self.expected = path or "reply", expected
        self.got = describe(got)
        super().__init__(f"{self.path} is {self.got}, expected {expected}")


def describe(value: Any) -> str:
    """What a value is, briefly and without its (host) text: `a str of 12 characters`, `NaN`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, (int, float)):
        return f"the number {value:.6g}" if isinstance(value, float) else f"the number {value}"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return f"an object of {len(value)} keys"
    return type(value).__name__


class Shape:
    expected = "a value"

    def check(self, value: Any, path: str) -> None:
        raise NotImplementedError


class AnyValue(Shape):
    def check(self, value: Any, path: str) -> None:
        pass


class Str(Shape):
    def __init__(self, max_len: int = TEXT_MAX) -> None:
        self.max_len = max_len
        self.expected = f"a string of at most {max_len} characters"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, str) or len(value) > self.max_len:
            raise ShapeError(path, self.expected, value)


class Num(Shape):
    """A finite number (an int or a float; not a boolean) in [lo, hi]."""

    def __init__(self, lo: float = -1e300, hi: float = 1e300, integer: bool = False) -> None:
        self.lo, self.hi, self.integer = lo, hi, integer
        kind = "an integer" if integer else "a finite number"
        self.expected = kind if (lo, hi) == (-1e300, 1e300) else f"{kind} in [{lo:g}, {hi:g}]"

    def check(self, value: Any, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int if self.integer else (int, float)):
            raise ShapeError(path, self.expected, value)
        if not (self.lo <= value <= self.hi):  # False for NaN too
            raise ShapeError(path, self.expected, value)


class Bool(Shape):
    expected = "true or false"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, bool):
            raise ShapeError(path, self.expected, value)


class Enum(Shape):
    def __init__(self, *values: str) -> None:
        self.values = frozenset(values)
        self.expected = "one of " + ", ".join(sorted(values))

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, str) or value not in self.values:
            raise ShapeError(path, self.expected, value)


class OneOf(Shape):
    def __init__(self, *shapes: Shape) -> None:
        self.shapes = shapes
        self.expected = " or ".join(s.expected for s in shapes)

    def check(self, value: Any, path: str) -> None:
        for shape in self.shapes:
            try:
                shape.check(value, path)
                return
            except ShapeError:
                continue
        raise ShapeError(path, self.expected, value)


class ListOf(Shape):
    def __init__(self, item: Shape, max_len: int = ITEMS_MAX) -> None:
        self.item, self.max_len = item, max_len
        self.expected = f"a list of at most {max_len} items"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, list) or len(value) > self.max_len:
            raise ShapeError(path, self.expected, value)
        if isinstance(self.item, AnyValue):
            return
        for i, item in enumerate(value):  # an item is never null: a list's readers iterate it
            self.item.check(item, f"{path}[{i}]")


class MapOf(Shape):
    """An object whose every value has one shape (keys are strings: JSON's own)."""

    def __init__(self, value: Shape, max_len: int = ITEMS_MAX) -> None:
        self.value, self.max_len = value, max_len
        self.expected = f"an object of at most {max_len} keys"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, dict) or len(value) > self.max_len:
            raise ShapeError(path, self.expected, value)
        for key, item in value.items():
            if item is not None:
                self.value.check(item, f"{path}.{key}" if path else str(key))


class Obj(Shape):
    """An object: the named fields' shapes (absent or null allowed unless `required`)."""

    expected = "an object"

    def __init__(self, fields: Mapping[str, Shape] | None = None, required: tuple[str, ...] = (),
                 **named: Shape) -> None:
        self.fields = {**(fields or {}), **named}
        self.required = required

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise ShapeError(path, self.expected, value)
        prefix = f"{path}." if path else ""
        for key in self.required:
            if value.get(key) is None:
                raise ShapeError(prefix + key, "present: " + self.fields[key].expected, value.get(key))
        for key, shape in self.fields.items():
            item = value.get(key)
            if item is not None:
                shape.check(item, prefix + key)
