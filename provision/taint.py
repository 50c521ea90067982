"""Host data is data: the mark that keeps it from ever being rendered as a template.

Ansible's "unsafe" model. What a host sends (facts, registered results: stdout, stderr,
stdout_lines, slurp contents…) and what a template produces (set_fact values, loop items) is
marked with `as_data` once, where it enters the variable store (provision/engine/task_exec.py:
a module's result and facts; host_play.py: gathered facts). The one rule that decides what is a
template is `templating.is_template`: only a plain `str` holding `{{`, `{%` or `{#` — what the
project's own files and `-e` load as. A marked value is a `str`/`dict`/`list` subclass, so
filters, tests, JSON and the modules see an ordinary value; whatever a template computes from it
is a new plain value, which is never stored without being marked again, and never re-rendered
(as in ansible-core 2.19: a template's output is not a template).

Marking is one walk of a result when it arrives; a marked container is taken whole (no walk)
when it is looked up, stored again or marked again.

What a host itself said (gathered facts, a connected module's result) is marked more narrowly,
as `HostStr`/`HostDict`/`HostList` (`as_host_data`): data that is also the host's word, which
the controller-path rule (engine/host_paths.py) keeps from choosing a controller file.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["DataDict", "DataList", "DataStr", "HostDict", "HostList", "HostStr", "as_data",
           "as_host_data", "is_data", "is_host_data"]


class DataStr(str):
    """A string that came from a host or out of a template: text, never a template."""

    __slots__ = ()


class DataDict(dict):
    """A mapping whose keys and values (at any depth) are data."""

    __slots__ = ()


class DataList(list):
    """A list whose items (at any depth) are data."""

    __slots__ = ()


class HostStr(DataStr):
    """Data a host said (a fact, a module's output): never a template, never a path."""

    __slots__ = ()


class HostDict(DataDict):
    __slots__ = ()


class HostList(DataList):
    __slots__ = ()


_HOST_TYPES = (HostStr, HostDict, HostList)
_DATA_TYPES = (DataStr, DataDict, DataList, *_HOST_TYPES)


def is_data(value: Any) -> bool:
    return type(value) in _DATA_TYPES


def is_host_data(value: Any) -> bool:
    return type(value) in _HOST_TYPES


def as_host_data(value: Any) -> Any:
    """`value` marked as what a host said: every string in it (keys too, at any depth)."""
    kind = type(value)
    if kind in _HOST_TYPES:
        return value
    if isinstance(value, str):
        return HostStr(value)
    if isinstance(value, dict):
        return HostDict((as_host_data(k), as_host_data(v)) for k, v in value.items())
    if isinstance(value, list):
        return HostList(as_host_data(v) for v in value)
    if kind is tuple:
        return tuple(as_host_data(v) for v in value)
    return value


def as_data(value: Any) -> Any:
    """`value` with every plain string in it (keys too, at any depth) marked as data.

    Already-marked values come back as they are; other `str` subclasses (`quote`'s output,
    Markup) are not templates either and keep their type."""
    kind = type(value)
    if kind is str:
        return DataStr(value)
    if kind in _DATA_TYPES:
        return value
    if isinstance(value, dict):
        return DataDict((as_data(k), as_data(v)) for k, v in value.items())
    if isinstance(value, list):
        return DataList(as_data(v) for v in value)
    if kind is tuple:
        return tuple(as_data(v) for v in value)
    return value


# PyYAML's safe dumper looks types up exactly: marked values dump as the plain ones
yaml.SafeDumper.add_representer(DataStr, yaml.SafeDumper.represent_str)
yaml.SafeDumper.add_representer(DataDict, yaml.SafeDumper.represent_dict)
yaml.SafeDumper.add_representer(DataList, yaml.SafeDumper.represent_list)
yaml.SafeDumper.add_representer(HostStr, yaml.SafeDumper.represent_str)
yaml.SafeDumper.add_representer(HostDict, yaml.SafeDumper.represent_dict)
yaml.SafeDumper.add_representer(HostList, yaml.SafeDumper.represent_list)
