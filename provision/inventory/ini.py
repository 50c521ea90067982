"""Ansible's INI inventory format.

    web1                                  hosts before any section are "ungrouped"
    [gpu]
    gpu[01:16] ansible_user=root          ranges; inline host vars
    box.example.com:2222 price_per_hour=1.2
    [gpu:vars]                            vars of a group
    data_dir=/data
    [fleet:children]                      groups inside a group (declared with their own [section])
    gpu

Values are typed as Ansible types them (in host lines AND in [group:vars], as ansible-core does
today): each value goes through Python's `ast.literal_eval`, so `1` is an int, `1.5` a float,
`True`/`False` booleans, `None` null, `[1, 2]` a list, `{'a': 1}` a dict, and anything that isn't a
Python literal stays a string -- `true`, `yes`, `hello`, `/data`. In host lines, shell-style quotes
group words and are removed first, so `x="1"` is the int 1 and `msg="a b"` the string `a b`; `#`
starts a comment there. In [group:vars] lines the text after the first `=` is taken whole.
"""

from __future__ import annotations

import ast
import re
import shlex
import warnings
from typing import TYPE_CHECKING, Any

from provision.errors import ConfigError
from provision.inventory.ranges import RangeError, expand_host_range
from provision.inventory.targets import AddressError, is_ip_address, split_host_port

if TYPE_CHECKING:
    from provision.inventory.loader import InventoryBuilder

_SECTION = re.compile(r"^\[([^:\]\s]+)(?::([^\]\s]*))?\]\s*(?:[#;].*)?$")


def parse_value(text: str) -> Any:
    """Ansible's typing of an INI value: a Python literal if it is one, else the string."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning for "\d" in a path
            return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def parse_host_line(line: str, where: str) -> tuple[list[str], int | None, dict[str, Any]]:
    """`gpu[01:04]:2222 ansible_user=root x=1` -> (names, port, vars)."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as exc:
        raise ConfigError(f"{where}: cannot read host line ({exc}); check the quotes") from None
    if not tokens:
        return [], None, {}
    pattern = tokens[0]
    if "=" in pattern:
        raise ConfigError(
            f"{where}: a host line starts with the host name, got {pattern!r}; put group "
            "variables under a [GROUP:vars] section"
        )
    try:
        host, port = split_host_port(pattern)
        names = expand_host_range(host)
    except (AddressError, RangeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    variables: dict[str, Any] = {}
    for token in tokens[1:]:
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ConfigError(
                f"{where}: expected key=value after the host name, got {token!r} "
                '(quote values that contain spaces: key="a b")'
            )
        variables[key] = parse_value(value)
    return names, port, variables


def parse_ini(text: str, path: str, builder: InventoryBuilder) -> None:
    """Add one INI file's groups, hosts and vars to `builder`; errors name path:line."""
    group, kind = "ungrouped", "hosts"
    # Groups referenced before they are declared, as Ansible allows: checked at the end.
    pending: dict[str, dict[str, Any]] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        where = f"{path}:{lineno}"
        match = _SECTION.match(line)
        if match:
            group, kind = match.group(1), match.group(2)
            kind = "hosts" if kind is None else kind
            if kind not in ("hosts", "children", "vars"):
                raise ConfigError(
                    f"{where}: section [{group}:{kind}] has unknown type {kind!r}; use [{group}], "
                    f"[{group}:vars] or [{group}:children]"
                )
            if group not in builder.groups:
                if kind == "vars" and group not in pending:
                    pending[group] = {"line": where, "kind": "vars", "parents": []}
                builder.add_group(group, where)
            if group in pending and kind != "vars":
                declared = pending.pop(group)
                for parent in declared["parents"]:
                    builder.add_child(parent, group, declared["line"])
            continue
        if line.startswith("[") and line.endswith("]") and not is_ip_address(line[1:-1]):
            raise ConfigError(
                f"{where}: bad section header {line!r}; write [group], [group:vars] or "
                "[group:children] with no spaces inside the brackets"
            )
        if kind == "hosts":
            names, port, variables = parse_host_line(line, where)
            for name in names:
                builder.add_host(name, group, where, port=port)
                for key, value in variables.items():
                    builder.set_host_var(name, key, value)
        elif kind == "vars":
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise ConfigError(
                    f"{where}: expected key=value in [{group}:vars], got {line!r} (host lines go "
                    f"under [{group}])"
                )
            builder.set_group_var(group, key.strip(), parse_value(value.strip()), where)
        else:  # children
            try:
                words = shlex.split(line, comments=True)
            except ValueError as exc:
                raise ConfigError(f"{where}: cannot read group name ({exc})") from None
            if len(words) != 1:
                raise ConfigError(
                    f"{where}: [{group}:children] lists one group name per line, got {line!r}"
                )
            child = words[0]
            if child in builder.groups:
                builder.add_child(group, child, where)
            elif child in pending:
                pending[child]["parents"].append(group)
            else:
                pending[child] = {"line": where, "kind": "children", "parents": [group]}
    for name, declared in pending.items():
        if declared["kind"] == "vars":
            raise ConfigError(
                f"{declared['line']}: [{name}:vars] is for a group that is never declared; add a "
                f"[{name}] section with its hosts (or [{name}:children])"
            )
        raise ConfigError(
            f"{declared['line']}: [{declared['parents'][0]}:children] names group {name!r}, which "
            f"is never declared; add a [{name}] section with its hosts, or fix the name"
        )
