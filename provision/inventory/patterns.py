"""Ansible host patterns: which inventory hosts a command runs on.

    all, *                 every host
    gpu                    a group (with its child groups) or a host
    gpu*, ~gpu0[1-4]       a glob, or a regex after ~ (matched from the start of the name)
    gpu:cpu, gpu,cpu       union
    gpu:&spot              intersection
    gpu:!gpu03             exclusion
    gpu[0], gpu[1:3], gpu[-1]   subscripts into a group's hosts (inclusive, as Ansible)

Terms are applied as Ansible applies them: unions first (in the order written), then the
intersections, then the exclusions; hosts keep inventory order. Unlike Ansible, which warns and
goes on, a term that matches no host or group is an error: a typo in `gpu:!gpu3` must not
quietly select a host the user meant to leave out.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import sys

from provision.errors import ConfigError
from provision.inventory.model import LOCAL_NAMES, Host, Inventory
from provision.inventory.targets import AddressError, split_host_port

_SUBSCRIPT = re.compile(r"^(.+)\[(?:(-?[0-9]+)|([0-9]+)([:-])([0-9]*))\]$")
_TERMS = re.compile(r"(?:[^\s:\[\]]|\[[^\]]*\])+")


class UnknownPatternError(ConfigError):
    """A pattern term that names no host or group in the inventory."""

    def __init__(self, message: str, term: str) -> None:
        super().__init__(message)
        self.term = term


def split_pattern(pattern: str) -> list[str]:
    """`a:b:&c:!d` or `a,b` -> terms; `host:22` and IPv6 addresses stay whole, as in Ansible."""
    text = pattern.strip()
    if "," in text:
        parts = text.split(",")
    else:
        try:
            split_host_port(text)
            parts = [text]
        except AddressError:
            parts = _TERMS.findall(text)
    return [p.strip() for p in parts if p.strip()]


def _order(terms: list[str]) -> list[str]:
    unions = [t for t in terms if t[0] not in "!&"]
    both = [t for t in terms if t[0] == "&"]
    minus = [t for t in terms if t[0] == "!"]
    return (unions or ["all"]) + both + minus


def _match_names(names: list[str], expr: str) -> list[str]:
    try:
        regex = re.compile(expr[1:] if expr.startswith("~") else fnmatch.translate(expr))
    except re.error as exc:
        raise ConfigError(f"bad host pattern {expr!r}: {exc}") from None
    return [n for n in names if regex.match(n)]


def _describe(inventory: Inventory) -> str:
    files = ", ".join(inventory.sources) or "none"
    groups = ", ".join(g for g in inventory.groups if g not in ("all", "ungrouped")) or "none"
    return f"inventory: {files}; known groups: {groups}"


def _implicit_localhost(inventory: Inventory, name: str) -> Host:
    # Ansible's implicit localhost: not in the inventory, runs locally, sees `all` vars, and its
    # ansible_python_interpreter is the controller's own Python (Ansible's sys.executable).
    return Host(
        name=name,
        address=name,
        local=True,
        vars={
            "ansible_python_interpreter": sys.executable,
            **inventory.group_vars.get("all", {}),
            **inventory.implicit_host_vars.get(name, {}),
        },
    )


def _match_term(inventory: Inventory, term: str, cache: dict[str, list[str]]) -> list[str]:
    """Host names for one term without its &/! prefix."""
    if term in cache:
        return cache[term]
    expr, subscript = term, None
    match = _SUBSCRIPT.match(term) if not term.startswith("~") else None
    if match:
        expr, index, start, _sep, end = match.groups()
        subscript = (int(index), None) if index is not None else (int(start), int(end or -1))
    matched_groups = _match_names(list(inventory.groups), expr)
    names: list[str] = []
    for group in matched_groups:
        names.extend(inventory.group_hosts(group))
    if not matched_groups or expr.startswith("~") or any(c in expr for c in ".?*["):
        # Ansible matches host names in the order they were defined, not in `all` order.
        defined = [h for h in inventory.host_vars if h in inventory.hosts] or list(inventory.hosts)
        names.extend(_match_names(defined, expr))
    names = list(dict.fromkeys(names))
    if not names and expr in LOCAL_NAMES:
        names = [expr]
    if not names and not matched_groups:
        raise UnknownPatternError(f"unknown host or group {expr!r} ({_describe(inventory)})", term)
    if subscript is not None:
        start_i, end_i = subscript
        try:
            if end_i is None:
                names = [names[start_i]]
            else:
                stop = len(names) - 1 if end_i == -1 else end_i
                if start_i >= len(names):
                    raise IndexError
                names = names[start_i : stop + 1]
        except IndexError:
            raise ConfigError(
                f"host pattern {term!r}: {expr!r} has {len(names)} host(s), numbered 0 to "
                f"{len(names) - 1}"
            ) from None
    cache[term] = names
    return names


def _read_limit_file(spec: str) -> str:
    path = os.path.expanduser(spec[1:])
    try:
        with open(path, encoding="utf-8") as f:
            names = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    except OSError as exc:
        raise ConfigError(f"limit file {path}: {exc.strerror}") from None
    if not names:
        raise ConfigError(f"limit file {path} lists no hosts")
    return ",".join(names)


def select_names(inventory: Inventory, pattern: str | list[str]) -> list[str]:
    """Names of the hosts a pattern selects, in Ansible's order."""
    raw = pattern if isinstance(pattern, list) else [pattern]
    terms = [t for p in raw for t in split_pattern(p)]
    if not terms:
        raise ConfigError("empty host pattern: use 'all', a group, a host, or a:b / a:&b / a:!b")
    cache: dict[str, list[str]] = {}
    selected: dict[str, None] = {}  # an ordered set: inventories can hold thousands of hosts
    for term in _order(terms):
        if term in inventory.hosts:
            selected.setdefault(term)
            continue
        if term[0] in "!&" and len(term) == 1:
            raise ConfigError(f"host pattern {term!r} needs a name after it, e.g. 'all:!gpu03'")
        names = _match_term(inventory, term.lstrip("!&") if term[0] in "!&" else term, cache)
        if term[0] == "!":
            drop = set(names)
            selected = {n: None for n in selected if n not in drop}
        elif term[0] == "&":
            keep = set(names)
            selected = {n: None for n in selected if n in keep}
        else:
            selected.update(dict.fromkeys(names))
    return list(selected)


def select_hosts(
    inventory: Inventory, pattern: str | list[str], limit: str | None = None
) -> list[Host]:
    """The hosts a pattern selects (Ansible semantics), narrowed by `limit` (-l) when given.

    `limit` is a pattern too, or `@FILE` with one host per line, as with `ansible -l @retry`.
    Returned hosts are copies: callers may override fields without touching the inventory.
    """
    names = select_names(inventory, pattern)
    if limit:
        spec = _read_limit_file(limit) if limit.startswith("@") else limit
        allowed = set(select_names(inventory, spec))
        names = [n for n in names if n in allowed]
    hosts = []
    for name in names:
        host = inventory.hosts.get(name) or _implicit_localhost(inventory, name)
        hosts.append(dataclasses.replace(host, groups=list(host.groups), vars=dict(host.vars)))
    return hosts
