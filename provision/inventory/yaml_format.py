"""Ansible's YAML inventory format, and the JSON that `ansible-inventory --list` prints.

    all:
      vars: {data_dir: /data}
      hosts:
        solo: {ansible_host: 198.18.0.9}
      children:
        gpu:
          hosts:
            gpu[01:04]: {ansible_user: root}
          vars: {price_per_hour: 1.2}

Values keep their YAML types. Where Ansible only warns and skips (a group that isn't a mapping,
a key other than hosts/vars/children), we stop with file:line: a misspelt `host:` would
otherwise drop hosts without a word.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from provision.errors import ConfigError
from provision.inventory.ranges import RangeError, expand_host_range
from provision.inventory.targets import AddressError, split_host_port

if TYPE_CHECKING:
    from provision.inventory.loader import InventoryBuilder

_GROUP_KEYS = ("hosts", "vars", "children")


class _Map(dict):
    """A mapping that remembers the line of itself and of each key, for error messages."""

    line: int = 0
    key_lines: dict[Any, int]


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> _Map:
    loader.flatten_mapping(node)  # YAML merge keys (<<: *anchor)
    result = _Map()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping",
                node.start_mark,
                "a key can't be a list or mapping",
                key_node.start_mark,
            ) from None
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
    return result


def _construct_vault(loader: _Loader, node: yaml.Node) -> None:
    raise yaml.constructor.ConstructorError(
        None,
        None,
        "vault-encrypted values (!vault) are not supported: keep secrets in environment "
        "variables and name them with --password-env / --passphrase-env",
        node.start_mark,
    )


def _construct_unsafe(loader: _Loader, node: yaml.Node) -> Any:
    # Ansible's "don't template this" marker: the value itself is what matters here.
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return _construct_mapping(loader, node)  # type: ignore[arg-type]


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor("!vault", _construct_vault)
_Loader.add_constructor("!unsafe", _construct_unsafe)


def load_yaml(text: str, path: str) -> Any:
    """Parse YAML; a syntax error becomes ConfigError with path:line:col and a hint."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        what = exc.problem or "invalid YAML"
        if exc.context and exc.context_mark and exc.context_mark is not mark:
            what += f" ({exc.context} at line {exc.context_mark.line + 1})"
        hint = ""
        if "!vault" not in what:
            hint = "; check the indentation (spaces, not tabs) and the ': ' after each key"
        raise ConfigError(f"{where}: {what}{hint}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None


def plain(value: Any) -> Any:
    """Plain dicts/lists all the way down (vars end up in JSON and in templates)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {"dict": "mapping", "_Map": "mapping", "list": "list", "str": "string"}.get(
        type(value).__name__, type(value).__name__
    )


def parse_yaml(text: str, path: str, builder: InventoryBuilder) -> None:
    """Add one YAML (or ansible-inventory JSON) file to `builder`; errors name path:line."""
    data = load_yaml(text, path)
    if data is None:
        return  # an empty file is an empty inventory
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}:1: expected a mapping of groups at the top (all: {{hosts: ..., children: ..., "
            f"vars: ...}}), got a {_kind(data)}"
        )
    if isinstance(data.get("plugin"), str):
        raise ConfigError(
            f"{path}:{_line(data, 'plugin')}: this is an inventory plugin config "
            f"(plugin: {data['plugin']}); run `ansible-inventory -i {path} --list > inv.json` "
            "and pass inv.json instead"
        )
    if "_meta" in data:
        _parse_list_json(data, path, builder)
        return
    for group, group_data in data.items():
        _parse_group(group, group_data, path, _line(data, group), builder)


def _line(mapping: Any, key: Any) -> int:
    lines = getattr(mapping, "key_lines", None) or {}
    return lines.get(key, getattr(mapping, "line", 1) or 1)


def _group_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: group name {name!r} must be a non-empty string")
    return name


def _parse_group(name: Any, data: Any, path: str, line: int, builder: InventoryBuilder) -> str:
    where = f"{path}:{line}"
    group = _group_name(name, where)
    builder.add_group(group, where)
    if data is None:
        return group
    if not isinstance(data, dict):
        raise ConfigError(
            f"{where}: group {group!r} must be a mapping with hosts:, vars: and/or children:, "
            f"got a {_kind(data)}"
        )
    for key, value in data.items():
        key_where = f"{path}:{_line(data, key)}"
        if key not in _GROUP_KEYS:
            raise ConfigError(
                f"{key_where}: group {group!r} has unexpected key {key!r}; a group takes only "
                "hosts:, vars: and children: (host vars go under hosts: NAME:)"
            )
        if isinstance(value, str) and key != "vars":
            value = {value: None}  # Ansible allows `hosts: web1` for a single member
        if value is None:
            continue
        if not isinstance(value, dict):
            example = "NAME: {}" if key != "vars" else "key: value"
            raise ConfigError(
                f"{key_where}: {key}: of group {group!r} must be a mapping ({example} per entry), "
                f"got a {_kind(value)}"
            )
        if key == "vars":
            for var, var_value in value.items():
                builder.set_group_var(
                    group, str(var), plain(var_value), f"{path}:{_line(value, var)}"
                )
        elif key == "children":
            for child, child_data in value.items():
                child_line = _line(value, child)
                child_name = _parse_group(child, child_data, path, child_line, builder)
                builder.add_child(group, child_name, f"{path}:{child_line}")
        else:
            for pattern, host_vars in value.items():
                host_where = f"{path}:{_line(value, pattern)}"
                if host_vars is not None and not isinstance(host_vars, dict):
                    raise ConfigError(
                        f"{host_where}: host {pattern!r} in group {group!r} must map to its vars "
                        f"(a mapping, or nothing), got a {_kind(host_vars)}"
                    )
                _add_hosts(str(pattern), group, host_vars or {}, host_where, builder)
    return group


def _add_hosts(
    pattern: str, group: str, host_vars: dict, where: str, builder: InventoryBuilder
) -> None:
    try:
        host, port = split_host_port(pattern)
        names = expand_host_range(host)
    except (AddressError, RangeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    for name in names:
        builder.add_host(name, group, where, port=port)
        for key, value in host_vars.items():
            builder.set_host_var(name, str(key), plain(value))


def _parse_list_json(data: dict, path: str, builder: InventoryBuilder) -> None:
    """`ansible-inventory --list` output (or a dynamic inventory script's): hosts are lists."""
    meta = data.get("_meta") or {}
    hostvars = (meta.get("hostvars") or {}) if isinstance(meta, dict) else {}
    groups = [(name, value) for name, value in data.items() if name != "_meta"]
    for name, _ in groups:
        builder.add_group(
            _group_name(name, f"{path}:{_line(data, name)}"), f"{path}:{_line(data, name)}"
        )
    for name, value in groups:
        where = f"{path}:{_line(data, name)}"
        if isinstance(value, list):  # the oldest script format: group: [host, ...]
            value = {"hosts": value}
        if value is None:
            continue
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: group {name!r} must be a mapping, got a {_kind(value)}")
        for key in value:
            if key not in _GROUP_KEYS:
                raise ConfigError(f"{where}: group {name!r} has unexpected key {key!r}")
        for host in value.get("hosts") or []:
            _add_hosts(str(host), name, {}, where, builder)
        for child in value.get("children") or []:
            builder.add_child(name, _group_name(child, where), where)
        for var, var_value in (value.get("vars") or {}).items():
            builder.set_group_var(name, str(var), plain(var_value), where)
    if not isinstance(hostvars, dict):
        raise ConfigError(f"{path}: _meta.hostvars must be a mapping of host -> vars")
    for host, host_vars in hostvars.items():
        if str(host) not in builder.host_vars:
            builder.add_host(str(host), "all", f"{path}:{_line(hostvars, host)}")
        for key, value in (host_vars or {}).items():
            builder.set_host_var(str(host), str(key), plain(value))
