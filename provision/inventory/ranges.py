"""Host ranges as Ansible writes them: `gpu[01:16]`, `node[a:f]`, `198.18.0.[14:18]`, `[1:10:2]`.

Rules (same as Ansible's inventory plugins):
- `[begin:end]` is inclusive; `[begin:end:step]` takes every step-th value.
- A begin with a leading zero (`01`) pads every value to its width; begin and end must then be
  written with the same width (`[01:16]`, not `[01:9]`).
- An empty begin means 0 (`[:3]` is 0..3). An empty end is an error.
- Letters range over a..z then A..Z (`[a:f]`, one letter each side).
- Several ranges in one name multiply out, left range outermost: `r[1:2]n[a:b]`.
"""

from __future__ import annotations

import re
import string

_RANGE = re.compile(r"\[([^\[\]]*)\]")


class RangeError(ValueError):
    """A malformed `[x:y]` range; the caller adds file:line."""


def has_range(pattern: str) -> bool:
    return _RANGE.search(pattern) is not None


def expand_host_range(pattern: str) -> list[str]:
    """All names a host pattern stands for, in order; a name without brackets is itself."""
    match = _RANGE.search(pattern)
    if match is None:
        if "[" in pattern or "]" in pattern:
            raise RangeError(f"unbalanced '[' or ']' in host pattern {pattern!r}")
        return [pattern]
    head, body, tail = pattern[: match.start()], match.group(1), pattern[match.end() :]
    names: list[str] = []
    for value in _range_values(body, pattern):
        names.extend(expand_host_range(head + value + tail))
    return names


def _range_values(body: str, pattern: str) -> list[str]:
    bounds = body.split(":")
    if len(bounds) not in (2, 3):
        raise RangeError(
            f"bad range [{body}] in {pattern!r}: write [begin:end] or [begin:end:step], "
            "e.g. gpu[01:16] or node[a:f]"
        )
    begin, end = bounds[0].strip(), bounds[1].strip()
    step_text = bounds[2].strip() if len(bounds) == 3 else "1"
    if not end:
        raise RangeError(f"bad range [{body}] in {pattern!r}: the end value is missing")
    if not step_text.isdigit() or int(step_text) < 1:
        raise RangeError(
            f"bad range [{body}] in {pattern!r}: step {step_text!r} must be a whole number >= 1"
        )
    step = int(step_text)
    begin = begin or "0"

    if begin.isdigit() and end.isdigit():
        width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
        if width and len(end) != width:
            raise RangeError(
                f"bad range [{body}] in {pattern!r}: a zero-padded range needs begin and end of "
                f"the same width (e.g. [{begin}:{end.zfill(width)}])"
            )
        first, last = int(begin), int(end)
        if first > last:
            raise RangeError(
                f"bad range [{body}] in {pattern!r}: begin {first} is after end {last}"
            )
        return [str(n).zfill(width) for n in range(first, last + 1, step)]

    letters = string.ascii_letters
    if len(begin) == 1 and len(end) == 1 and begin in letters and end in letters:
        first, last = letters.index(begin), letters.index(end)
        if first > last:
            raise RangeError(f"bad range [{body}] in {pattern!r}: {begin!r} comes after {end!r}")
        return list(letters[first : last + 1 : step])

    raise RangeError(
        f"bad range [{body}] in {pattern!r}: use numbers ([1:8], [01:16]) or single letters "
        "([a:f]) on both sides"
    )
