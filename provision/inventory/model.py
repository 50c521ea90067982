"""The resolved picture of hosts and groups every command works from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass
class Host:
    """One target. `name` is what the user calls it; `address` is what we connect to.

    Connection fields are resolved from (highest first) command-line options, inventory host
    vars (`ansible_host`, `ansible_port`, ...), group vars, ssh_config.
    """

    name: str
    address: str | None = None
    port: int | None = None
    user: str | None = None
    key_file: str | None = None
    proxy_jump: str | None = None
    python: str | None = None  # ansible_python_interpreter
    local: bool = False  # `localhost` runs without SSH unless ansible_connection says otherwise
    groups: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict)

    @property
    def connect_address(self) -> str:
        return self.address or self.name

    @property
    def display(self) -> str:
        """user@addr:port as ssh shows it, for messages."""
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port and self.port != 22 else ""
        address = self.connect_address
        if port and ":" in address:  # IPv6: brackets keep the port apart
            address = f"[{address}]"
        return f"{user}{address}{port}"


@dataclass
class Inventory:
    hosts: dict[str, Host] = field(default_factory=dict)
    # group name -> direct member host names; children expanded by `group_hosts`
    groups: dict[str, list[str]] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    group_vars: dict[str, dict[str, Any]] = field(default_factory=dict)
    # host name -> the vars written on the host itself (Host.vars holds the merged result),
    # in the order the hosts were first defined (`hosts` is in Ansible's `all` order instead)
    host_vars: dict[str, dict[str, Any]] = field(default_factory=dict)
    # "file:line" where each host / group was first defined, for error messages
    host_origins: dict[str, str] = field(default_factory=dict)
    group_origins: dict[str, str] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)  # the inventory files, in load order
    # host_vars/ files of the implicit localhost (a local name not in the inventory), by name
    implicit_host_vars: dict[str, dict[str, Any]] = field(default_factory=dict)

    def group_hosts(self, group: str) -> list[str]:
        """All hosts in a group, its children included, in inventory order."""
        if group == "all":
            return list(self.hosts)
        seen: dict[str, None] = {}  # ordered set: big groups (gpu[0001:9999]) stay linear
        stack = [group]
        visited: set[str] = set()
        while stack:
            g = stack.pop(0)
            if g in visited:
                continue
            visited.add(g)
            seen.update(dict.fromkeys(self.groups.get(g, [])))
            stack.extend(self.children.get(g, []))
        return list(seen)
