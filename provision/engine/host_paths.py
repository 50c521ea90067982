"""Host-derived path segments are never paths (beyond Ansible; docs/threat-model.md).

A role's `include_vars: "{{ ansible_os_family }}.yml"` joins a host's word into a controller
path. A host whose /etc/os-release says `ID=../../x` (or an absolute path) would pick any file on
the controller — one it handed over with `fetch`, say, whose `{{ lookup('pipe', …) }}` then runs.
So while a controller path is rendered (include_vars, vars_files, template/copy src,
include_tasks, with_first_found, fetch dest: `controller_path()`), every `{{ }}` whose value is
host data, or was computed from host data (engine/taint.py marks it where it enters), must be one
plain path segment: no `/`, no `..`, no NUL, not absolute. The project's own text around it may
hold slashes; `{{ playbook_dir }}/vars/{{ ansible_distribution }}.yml` is fine, a distribution
named `../../x` is refused with the variable's name and value.

How it knows: while a controller path is rendered, every variable a template looks up is seen
(`noted()`): a host's string (`HostStr`, engine/taint.py) is checked there and then, wherever
it is used; a host's mapping or list (`ansible_facts`, a registered result) is noted in the
template evaluation's frame (`Templar._run`), and the `{{ }}`'s value made from it is checked as
it is finalized (`check()`), as is any `{{ }}` whose value is a host's string itself.
A host string a filter changed and `set_fact` stored is template output, no longer the host's
word: that chain is not followed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from provision.engine.taint import HostStr, is_host_data
from provision.errors import TemplateError

__all__ = ["HostPathError", "active", "check", "controller_path", "frame", "noted", "segment_problem"]

_state = threading.local()


class HostPathError(TemplateError):
    """A host-derived value is not one plain path segment."""


def segment_problem(value: str) -> str | None:
    """Why `value` cannot be one segment of a controller path; None when it can."""
    if "\x00" in value:
        return "holds a NUL"
    if value.startswith(("/", "~")):
        return "is an absolute path"
    if "/" in value:
        return "holds '/'"
    if ".." in value:
        return "holds '..'"
    if value == ".":
        return "is '.'"
    return None


@contextlib.contextmanager
def controller_path(what: str) -> Iterator[None]:
    """Render a controller path inside this: `what` names it in errors ("include_vars file")."""
    outer = getattr(_state, "what", None)
    _state.what = what
    if outer is None:
        _state.frames = []
    try:
        yield
    finally:
        _state.what = outer


def active() -> bool:
    return getattr(_state, "what", None) is not None


@contextlib.contextmanager
def frame() -> Iterator[None]:
    """One template evaluation's own list of host-data variables it looked up."""
    frames: list[list[str]] = _state.frames
    frames.append([])
    try:
        yield
    finally:
        frames.pop()


def _refuse(source: str, text: str, problem: str) -> None:
    raise HostPathError(
        f"{_state.what}: host data {source} = {text!r} {problem}: a host's value may be one "
        "segment of a controller path, never a path (docs/threat-model.md)")


def noted(name: str, value: Any) -> None:
    """A template looked up variable `name`. A host's string must be a plain segment; a host's
    mapping or list is remembered, and what the `{{ }}` makes of it checked (`check`)."""
    if type(value) is HostStr:
        problem = segment_problem(value)
        if problem:
            _refuse(name, value, problem)
    elif is_host_data(value) and _state.frames:
        _state.frames[-1].append(name)


def check(value: Any) -> None:
    """A `{{ }}`'s value in a controller path: a host's string (`ansible_facts.distribution`), or
    what was computed from a host's mapping, must be a plain segment."""
    frames = _state.frames
    names = frames[-1] if frames else []
    if frames:
        frames[-1] = []
    if not names and not is_host_data(value):
        return
    for text in value if isinstance(value, (list, tuple)) else (value,):
        if isinstance(text, str):
            problem = segment_problem(text)
            if problem:
                _refuse(", ".join(dict.fromkeys(names)) or "(a host's value)", text, problem)
