"""Files + target strings -> the hosts a command runs on.

`load_inventory(files)` reads Ansible INI/YAML inventories into one Inventory (later files add
hosts and override vars, as with several `ansible -i`). `resolve_targets(targets, files, options)`
turns each command-line target into hosts: an inventory pattern when it names inventory hosts,
otherwise a target string (`user@host:port`, a pasted `ssh ...` command, an ~/.ssh/config alias).

Where a host's connection fields come from, highest first: command-line options (--user, --port,
--key), the target string or inventory vars (`ansible_host`, `ansible_port`, ...), ssh_config.

Vars precedence (as Ansible): `all` < parent group < child group < the host's own vars. Groups
at the same depth apply in order of `ansible_group_priority` (default 1; higher wins), then by
name (the alphabetically later name wins).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from provision.connection.base import ConnectOptions
from provision.errors import ConfigError
from provision.inventory.ini import parse_ini
from provision.inventory.model import LOCAL_NAMES, Host, Inventory
from provision.inventory.patterns import UnknownPatternError, select_hosts
from provision.inventory.script import is_script, parse_script
from provision.inventory.ssh_config import apply_ssh_config, is_alias
from provision.inventory.targets import AddressError, is_ip_address, parse_port, parse_target
from provision.inventory.vars_files import VarsDirs

SSH_CONNECTIONS = ("ssh", "paramiko", "paramiko_ssh", "smart")
_YAML_EXTENSIONS = (".yml", ".yaml", ".json")
# Ansible's INVENTORY_IGNORE_EXTS default: REJECT_EXTS + .orig .cfg .retry
INVENTORY_IGNORE_EXTS = (
    ".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".cfg", ".retry",
)


class InventoryBuilder:
    """Collects groups, hosts and vars from one or more files, then resolves them (`finish`)."""

    def __init__(self) -> None:
        self.groups: dict[str, list[str]] = {"all": [], "ungrouped": []}
        self.children: dict[str, list[str]] = {"all": ["ungrouped"], "ungrouped": []}
        self.group_vars: dict[str, dict[str, Any]] = {"all": {}, "ungrouped": {}}
        self.priority: dict[str, int] = {}
        self.host_vars: dict[str, dict[str, Any]] = {}
        self.host_origins: dict[str, str] = {}
        self.group_origins: dict[str, str] = {}
        self.sources: list[str] = []
        self._members: dict[str, set[str]] = {"all": set(), "ungrouped": set()}
        # group_vars/ + host_vars/ beside the inventory sources, then beside the playbook
        self.inventory_dirs = VarsDirs([])
        self.playbook_dirs = VarsDirs([])

    def add_group(self, name: str, origin: str) -> None:
        if name not in self.groups:
            self.groups[name] = []
            self._members[name] = set()
            self.children[name] = []
            self.group_vars[name] = {}
            self.group_origins[name] = origin

    def add_child(self, parent: str, child: str, origin: str) -> None:
        if child == "all":
            raise ConfigError(
                f"{origin}: group 'all' holds every host; it can't be inside {parent!r}"
            )
        if child == parent:
            raise ConfigError(f"{origin}: group {parent!r} can't contain itself")
        self.add_group(parent, origin)
        self.add_group(child, origin)
        if child not in self.children[parent]:
            self.children[parent].append(child)

    def add_host(self, name: str, group: str, origin: str, port: int | None = None) -> None:
        if not name:
            raise ConfigError(f"{origin}: empty host name")
        self.add_group(group, origin)
        if name not in self.host_vars:
            self.host_vars[name] = {}
            self.host_origins[name] = origin
        if name not in self._members[group]:
            self._members[group].add(name)
            self.groups[group].append(name)
        if port is not None:
            self.host_vars[name]["ansible_port"] = port

    def set_host_var(self, name: str, key: str, value: Any) -> None:
        self.host_vars[name][key] = value

    def set_group_var(self, group: str, key: str, value: Any, origin: str) -> None:
        self.add_group(group, origin)
        if key == "ansible_group_priority":
            # It orders sibling groups and, as in Ansible, never reaches a host's vars.
            try:
                value = self.priority[group] = int(value)
            except (TypeError, ValueError):
                raise ConfigError(
                    f"{origin}: ansible_group_priority of group {group!r} must be a whole number, "
                    f"got {value!r}"
                ) from None
        self.group_vars[group][key] = value

    # -- resolving ---------------------------------------------------------------------------
    def finish(self) -> Inventory:
        parents: dict[str, list[str]] = {g: [] for g in self.groups}
        for parent, kids in self.children.items():
            for kid in kids:
                parents[kid].append(parent)
        for group in self.groups:  # every group without a parent sits under `all`
            if group != "all" and not parents[group]:
                self.children["all"].append(group)
                parents[group].append("all")
        depth = self._depths()
        self._reconcile_ungrouped(parents)

        def ancestors(group: str) -> set[str]:
            seen: set[str] = set()
            stack = [group]
            while stack:
                g = stack.pop()
                if g not in seen:
                    seen.add(g)
                    stack.extend(parents[g])
            return seen

        member_of: dict[str, set[str]] = {h: {"all"} for h in self.host_vars}
        for group, members in self.groups.items():
            above = ancestors(group)
            for host in members:
                member_of[host] |= above

        # Vars from files beside the inventory (inv) and the playbook (play), per name.
        inv_group = {g: self.inventory_dirs.vars_for("group_vars", g) for g in self.groups}
        play_group = {g: self.playbook_dirs.vars_for("group_vars", g) for g in self.groups}
        inv_host = {h: self.inventory_dirs.vars_for("host_vars", h) for h in self.host_vars}
        play_host = {h: self.playbook_dirs.vars_for("host_vars", h) for h in self.host_vars}
        inventory = Inventory(
            groups={g: list(m) for g, m in self.groups.items()},
            children={g: list(k) for g, k in self.children.items()},
            group_vars={
                g: {**v, **inv_group[g], **play_group[g]} for g, v in self.group_vars.items()
            },
            host_vars={
                h: {**v, **inv_host[h], **play_host[h]} for h, v in self.host_vars.items()
            },
            host_origins=dict(self.host_origins),
            group_origins=dict(self.group_origins),
            sources=list(self.sources),
            implicit_host_vars={
                h: {**self.inventory_dirs.vars_for("host_vars", h),
                    **self.playbook_dirs.vars_for("host_vars", h)}
                for h in sorted(LOCAL_NAMES - set(self.host_vars))
            },
        )
        for name in self._host_order():
            groups = sorted(
                member_of[name] - {"all"}, key=lambda g: (depth[g], self.priority.get(g, 1), g)
            )
            # Ansible's VARIABLE_PRECEDENCE: inventory-file vars of `all` and the groups, then
            # group_vars/all beside the inventory and the playbook, then the groups' files.
            merged: dict[str, Any] = dict(self.group_vars["all"])
            for group in groups:
                merged.update(self.group_vars[group])
            merged.update(inv_group["all"])
            merged.update(play_group["all"])
            for group in groups:
                merged.update(inv_group[group])
            for group in groups:
                merged.update(play_group[group])
            merged.pop("ansible_group_priority", None)
            merged.update(self.host_vars[name])
            merged.update(inv_host[name])
            merged.update(play_host[name])
            names = sorted(g for g in member_of[name] if g != "all")
            inventory.hosts[name] = host_from_vars(name, merged, names, self.host_origins[name])
        return inventory

    def _depths(self) -> dict[str, int]:
        """Longest path from `all` for each group; a cycle is an error naming the groups."""
        depth: dict[str, int] = {}
        visiting: list[str] = []

        def walk(group: str, level: int) -> None:
            if group in visiting:
                loop = " -> ".join(visiting[visiting.index(group) :] + [group])
                raise ConfigError(
                    f"{self.group_origins.get(group, 'inventory')}: groups contain each other "
                    f"({loop}); remove one of these children entries"
                )
            if depth.get(group, -1) >= level:
                return
            depth[group] = level
            visiting.append(group)
            for kid in self.children[group]:
                walk(kid, level + 1)
            visiting.pop()

        walk("all", 0)
        for group in self.groups:
            if group not in depth:  # only a loop of groups with no way up to `all`
                walk(group, 1)
        return depth

    def _reconcile_ungrouped(self, parents: dict[str, list[str]]) -> None:
        # As Ansible: `ungrouped` holds exactly the hosts that are in no other group.
        in_group: set[str] = set()
        for group, members in self.groups.items():
            if group not in ("all", "ungrouped"):
                in_group.update(members)
        ungrouped = [h for h in self.groups["ungrouped"] if h not in in_group]
        listed = set(ungrouped)
        ungrouped += [h for h in self.host_vars if h not in in_group and h not in listed]
        self.groups["ungrouped"] = ungrouped

    def _host_order(self) -> list[str]:
        """Ansible's order for `all`: its own hosts, then each child group's, breadth first."""
        order: dict[str, None] = {}
        queue, seen = ["all"], set()
        while queue:
            group = queue.pop(0)
            if group in seen:
                continue
            seen.add(group)
            order.update(dict.fromkeys(self.groups[group]))
            queue.extend(self.children[group])
        order.update(dict.fromkeys(self.host_vars))  # never reached: every host is in a group
        return list(order)


def _first(merged: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if merged.get(key) not in (None, ""):
            return merged[key]
    return None


def _proxy_jump_from_args(text: Any) -> str | None:
    """`-J jump` or `-o ProxyJump=jump` inside ansible_ssh_common_args / _extra_args."""
    if not isinstance(text, str):
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    for i, word in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if word == "-J" and nxt:
            return nxt
        if word.startswith("-J") and len(word) > 2:
            return word[2:]
        option = nxt if word == "-o" else word[2:] if word.startswith("-o") else ""
        key, _, value = option.replace(" ", "=", 1).partition("=")
        if key.lower() == "proxyjump" and value:
            return value
    return None


def _interpreter(merged: dict[str, Any]) -> Any:
    """`ansible_python_interpreter`, its template (`{{ ansible_playbook_python }}`, ansible-test's
    inventories) rendered with the host's vars and the controller's Python, as Ansible does
    when it connects."""
    python = merged.get("ansible_python_interpreter")
    if not isinstance(python, str) or "{{" not in python or _RENDER[0] is None:
        return python  # as written: the connection reports the interpreter it can't find
    return _RENDER[0](python, {**merged, "ansible_playbook_python": sys.executable})


# How a template in the inventory is rendered: given by engine/templating.py when it loads (the
# inventory sits below the engine). Returns the text as written when it can't be rendered.
_RENDER: list[Callable[[str, dict[str, Any]], Any] | None] = [None]


def use_renderer(render: Callable[[str, dict[str, Any]], Any]) -> None:
    _RENDER[0] = render


def host_from_vars(name: str, merged: dict[str, Any], groups: list[str], origin: str) -> Host:
    """A Host with connection fields read from its (merged) ansible_* vars."""
    where = f"{origin}: host {name!r}"
    address = _first(merged, "ansible_host", "ansible_ssh_host")
    port_value = _first(merged, "ansible_port", "ansible_ssh_port")
    try:
        port = None if port_value is None else parse_port(port_value)
    except AddressError:
        raise ConfigError(
            f"{where}: ansible_port {port_value!r} is not a port number (use 1-65535)"
        ) from None
    user = _first(merged, "ansible_user", "ansible_ssh_user")
    key_file = _first(merged, "ansible_ssh_private_key_file", "ansible_private_key_file")
    connection = merged.get("ansible_connection")
    if connection is not None and connection not in ("local", *SSH_CONNECTIONS):
        raise ConfigError(
            f"{where}: ansible_connection={connection} is not supported; use ssh (the default) "
            "or local"
        )
    target = str(address) if address is not None else name
    if connection is None:
        local = target in LOCAL_NAMES and port is None and user is None
    else:
        local = connection == "local"
    jump = _proxy_jump_from_args(merged.get("ansible_ssh_common_args")) or _proxy_jump_from_args(
        merged.get("ansible_ssh_extra_args")
    )
    python = _interpreter(merged)
    return Host(
        name=name,
        address=target,
        port=port,
        user=None if user is None else str(user),
        key_file=None if key_file is None else str(key_file),
        proxy_jump=jump,
        python=None if python is None else str(python),
        local=local,
        groups=groups,
        vars=merged,
    )


# -- files -----------------------------------------------------------------------------------
def _looks_like_yaml(text: str) -> bool:
    """For files without a telling extension: YAML when it parses to a mapping of groups."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and all(
        v is None or isinstance(v, dict | list) for v in data.values()
    )


def ignored_in_directory(name: str) -> bool:
    """Ansible's rule for the entries of an inventory directory: hidden files, group_vars/,
    host_vars/, vars_plugins/ and INVENTORY_IGNORE_EXTS (~ .orig .bak .cfg .retry .md ...)."""
    if name.startswith(".") or name in ("host_vars", "group_vars", "vars_plugins"):
        return True
    return name.endswith(INVENTORY_IGNORE_EXTS)


def _source_files(path: str) -> list[str]:
    """The files an inventory source stands for: itself, or a directory's files (sorted,
    recursively)."""
    full = os.path.expanduser(path)
    if not os.path.isdir(full):
        return [path]
    found: list[str] = []
    for name in sorted(os.listdir(full)):
        if not ignored_in_directory(name):
            found.extend(_source_files(os.path.join(path, name)))
    return found


def _parse_file(path: str, builder: InventoryBuilder) -> None:
    full = os.path.expanduser(path)
    if is_script(full):
        parse_script(full, builder)
        return
    try:
        with open(full, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigError(f"inventory file {path} not found (-i)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"inventory file {path}: cannot read it ({exc})") from None
    lowered = full.lower()
    if lowered.endswith(_YAML_EXTENSIONS) or (
        not lowered.endswith((".ini", ".cfg")) and _looks_like_yaml(text)
    ):
        from provision.inventory.yaml_format import parse_yaml  # PyYAML: ~40 ms of a start-up

        parse_yaml(text, path, builder)
    else:
        parse_ini(text, path, builder)


def load_inventory(files: list[str], playbook_dir: str | None = None) -> Inventory:
    """One Inventory from INI/YAML files, executable scripts and directories of them, in
    order (format by extension, else by content), with the group_vars/ and host_vars/ found
    beside each source and beside `playbook_dir`."""
    builder = InventoryBuilder()
    vars_dirs: list[Path] = []
    for path in files:
        full = os.path.expanduser(path)
        if not os.path.exists(full):
            raise ConfigError(f"inventory file {path} not found (-i)")
        builder.sources.append(path)
        for file in _source_files(path):
            _parse_file(file, builder)
        vars_dirs.append(Path(full if os.path.isdir(full) else os.path.dirname(full) or "."))
    builder.inventory_dirs = VarsDirs(vars_dirs)
    if playbook_dir is not None:
        builder.playbook_dirs = VarsDirs([Path(playbook_dir)])
    return builder.finish()


# -- targets ---------------------------------------------------------------------------------
def _explicit_target(text: str) -> bool:
    """Written as a target string, never as an inventory pattern."""
    stripped = text.strip()
    return (
        "@" in stripped
        or any(c.isspace() for c in stripped)
        or stripped.lower().startswith("ssh://")
    )


def _could_be_address(text: str, ssh_config: str | None) -> bool:
    """A name outside the inventory that still plainly means a machine."""
    if text in LOCAL_NAMES or is_ip_address(text) or is_alias(text, ssh_config):
        return True
    if any(c in text for c in "*?[]~!&,"):
        return False
    try:
        host = parse_target(text)
    except ConfigError:
        return False
    return host.port is not None or "." in (host.address or "")


def _with_overrides(host: Host, options: ConnectOptions, from_target: bool) -> Host:
    if from_target and host.local and (options.user or options.port):
        host = dataclasses.replace(host, local=False)  # `localhost --port 2222`: SSH to loopback
    if host.local:
        return host
    host = apply_ssh_config(host, options.ssh_config)
    return dataclasses.replace(
        host,
        user=options.user or host.user,
        port=options.port if options.port is not None else host.port,
        key_file=options.key_file or host.key_file,
    )


def resolve_targets(
    targets: list[str],
    inventory_files: list[str],
    options: ConnectOptions,
    limit: str | None = None,
    playbook_dir: str | None = None,
) -> list[Host]:
    """The hosts to work on, each once, in the order the targets name them.

    No targets with an inventory means `all`. A target is an inventory pattern when it matches
    one; otherwise it must read as a machine (user@host, host:port, an IP, a dotted name, an
    ssh_config alias, a pasted ssh command) -- a bare word that is none of these is reported
    as an unknown host or group rather than sent to DNS.
    """
    inventory = load_inventory(inventory_files, playbook_dir) if inventory_files else None
    if not targets:
        if inventory is None:
            raise ConfigError(
                "no hosts given: name a target (user@host:port, an ssh command in quotes, an "
                "~/.ssh/config alias, localhost) or an inventory with -i FILE"
            )
        targets = ["all"]
    found: list[tuple[Host, bool]] = []
    for target in targets:
        if inventory is not None and not _explicit_target(target):
            try:
                hosts = select_hosts(inventory, target)
            except UnknownPatternError:
                if not _could_be_address(target, options.ssh_config):
                    raise
            else:
                if not hosts:
                    raise ConfigError(f"host pattern {target!r} selects no hosts")
                found.extend((h, False) for h in hosts)
                continue
        found.append((parse_target(target), True))

    if limit:
        if inventory is None:
            raise ConfigError("--limit needs an inventory (-i FILE) to select from")
        allowed = {h.name for h in select_hosts(inventory, "all", limit=limit)}
        found = [(h, t) for h, t in found if h.name in allowed]
        if not found:
            raise ConfigError(f"--limit {limit!r} leaves no hosts to work on")

    result: list[Host] = []
    names: set[str] = set()
    identities: set[tuple[Any, ...]] = set()
    for host, from_target in found:
        host = _with_overrides(host, options, from_target)
        identity = (host.user, host.connect_address, host.port, host.local)
        if host.name in names or (from_target and identity in identities):
            continue  # the same machine named twice (a group and one of its hosts, ...)
        names.add(host.name)
        identities.add(identity)
        result.append(host)
    return result
