"""Host-derived path segments are never paths (beyond Ansible; docs/threat-model.md).

A role's `include_vars: "{{ ansible_os_family }}.yml"` joins a host's word into a controller
path. A host whose /etc/os-release says `ID=../../x` (or an absolute path) would pick any file on
the controller — one it handed over with `fetch`, say, whose `{{ lookup('pipe', …) }}` then runs.
So while a controller path is rendered (include_vars, vars_files, template/copy src,
include_tasks, with_first_found, fetch dest: `controller_path()`), every `{{ }}` whose value is
host data, or was computed from host data (provision/taint.py marks it where it enters), must be one
plain path segment: no `/`, no `..`, no NUL, not absolute. The project's own text around it may
hold slashes; `{{ playbook_dir }}/vars/{{ ansible_distribution }}.yml` is fine, a distribution
named `../../x` is refused with the variable's name and value.

How it knows: while a controller path is rendered, every value a template reaches — a variable
(`_JinjaVars`), an attribute or item (`x.stdout`, `ansible_facts['distribution']`: the
environments' getattr/getitem) and each `{{ }}`'s value — is seen by `noted()`: a host's string
(`HostStr`, provision/taint.py) must be a plain segment there and then, whatever the template goes
on to do with it. A host string a filter changed and `set_fact` stored is template output, no
longer the host's word: that chain is not followed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from provision.errors import TemplateError
from provision.taint import HostStr

__all__ = ["HostPathError", "active", "controller_path", "noted", "segment_problem"]

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
    try:
        yield
    finally:
        _state.what = outer


def active() -> bool:
    return getattr(_state, "what", None) is not None


def noted(name: Any, value: Any) -> None:
    """A template reached `value` (as variable, attribute or item `name`): a host's string must
    be a plain path segment."""
    if type(value) is HostStr:
        problem = segment_problem(value)
        if problem:
            raise HostPathError(
                f"{_state.what}: host data {name} = {str(value)!r} {problem}: a host's value may be "
                "one segment of a controller path, never a path (docs/threat-model.md)")
