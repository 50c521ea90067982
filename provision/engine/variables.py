"""Variable precedence: which value a name has for one host at one task.

Lowest to highest (documented in docs/playbooks.md, close to Ansible's order):

  1. role defaults            roles/NAME/defaults/main.yml (that role's first, then the play's
                              public roles': roles:/import_role, include_role with public)
  2. inventory group vars     `all` < parent group < child group (merged by the inventory loader)
  3. inventory host vars
  4. facts                    gather_facts / the `facts` module (provision_facts, ansible_*)
  5. play vars                `vars:`, then `vars_files:` (later files win), then the public
                              roles' vars/main.yml (unless ansible.cfg private_role_vars)
  6. role vars and params     roles/NAME/vars/main.yml, `- role: x` parameters (inside that role)
  7. block and task vars      outer block < inner block < import/include < the task's own `vars:`
  8. set_fact / register      per host, kept for the rest of the run
  9. loop variables           `item` (or loop_control.loop_var), index_var, ansible_loop
 10. extra vars               `-e` on the command line: always win
 11. magic variables          inventory_hostname, hostvars, groups, group_names, playbook_dir, …
                              (read-only, as in Ansible)
"""

from __future__ import annotations

import os
import sys
from collections import ChainMap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provision.engine.role_names import role_name_vars
from provision.engine.role_vars import role_layers
from provision.engine.templating import LazyVars, Templar
from provision.inventory.model import Host, Inventory
from provision.modules.facts_ansible import namespaced
from provision.taint import as_host_data

if TYPE_CHECKING:
    from provision.engine.playbook import Node, Play

PRECEDENCE = (
    "role defaults",
    "inventory group vars",
    "inventory host vars",
    "facts",
    "play vars / vars_files",
    "role vars and params",
    "block and task vars",
    "set_fact / register",
    "loop variables",
    "extra vars",
    "magic variables",
)


@dataclass
class HostVars:
    """What a host accumulates during a run: facts and set_fact/register values."""

    host: Host
    facts: dict[str, Any] = field(default_factory=dict)
    set_facts: dict[str, Any] = field(default_factory=dict)
    play_vars: Mapping[str, Any] = field(default_factory=dict)
    # the play's public roles, merged once per play: defaults (lowest) and vars (above play vars)
    role_defaults: Mapping[str, Any] = field(default_factory=dict)
    role_vars: Mapping[str, Any] = field(default_factory=dict)

    def expose_roles(self, roles: list[Any], reset: bool = False) -> None:
        defaults = {} if reset else dict(self.role_defaults)
        role_vars = {} if reset else dict(self.role_vars)
        for role in roles:
            defaults.update(role.defaults)
            role_vars.update(role.vars)
        self.role_defaults, self.role_vars = defaults, role_vars

    def add_facts(self, facts: Mapping[str, Any]) -> None:
        """Facts from `setup` or a module: each name as returned, and `ansible_facts` (the same
        without the `ansible_` prefix) rebuilt so both spellings stay in step."""
        self.facts.update(facts)
        self.facts["ansible_facts"] = as_host_data(namespaced(self.facts))  # the host's word: never a template


class HostVarsView(Mapping):
    """`hostvars`: every host's variables by name (host-level layers, no task context)."""

    def __init__(self, manager: VariableManager) -> None:
        self._manager = manager

    def __getitem__(self, name: str) -> Mapping[str, Any]:
        state = self._manager.hosts.get(name)
        if state is None:
            if name in self._manager.inventory.hosts:
                state = HostVars(self._manager.inventory.hosts[name])
            else:
                raise KeyError(name)

        return LazyVars(self._manager.host_layers(state), Templar())

    def __iter__(self) -> Iterator[str]:
        return iter(self._manager.inventory.hosts)

    def __len__(self) -> int:
        return len(self._manager.inventory.hosts)


class VariableManager:
    """Builds the variable view for (host, task). Shared by host threads; per-host data lives in
    each host's own HostVars, which only that host's thread writes."""

    def __init__(
        self,
        inventory: Inventory,
        extra_vars: Mapping[str, Any],
        playbook_dir: Path,
        check_mode: bool = False,
        diff: bool = False,
    ) -> None:
        self.inventory = inventory
        self.extra_vars = dict(extra_vars)
        self.playbook_dir = playbook_dir
        self.hosts: dict[str, HostVars] = {}
        self.check_mode = check_mode
        self.diff = diff
        self.groups = {name: inventory.group_hosts(name) for name in inventory.groups}
        self.groups.setdefault("all", list(inventory.hosts))
        self.hostvars = HostVarsView(self)
        self.play_hosts: list[str] = []
        self.play_roles: list[Any] = []  # Ansible's play.roles (engine/role_names.py)
        self.role_names: dict[str, Any] = role_name_vars([])

    def set_play_roles(self, roles: list[Any]) -> None:
        """The play's roles: at its start, then each include_role that runs (once per role)."""
        self.play_roles = list(roles)
        self.role_names = role_name_vars(self.play_roles)

    def add_play_roles(self, roles: list[Any]) -> None:
        new = [r for r in roles if all(r is not known for known in self.play_roles)]
        if new:
            self.set_play_roles([*self.play_roles, *new])

    def state(self, host: Host) -> HostVars:
        if host.name not in self.hosts:
            self.hosts[host.name] = HostVars(host)
        return self.hosts[host.name]

    def magic(self, host: Host) -> dict[str, Any]:
        return {
            "inventory_hostname": host.name,
            "inventory_hostname_short": host.name.split(".")[0],
            "hostvars": self.hostvars,
            "groups": self.groups,
            "group_names": sorted(g for g in host.groups if g not in ("all", "ungrouped")),
            "playbook_dir": str(self.playbook_dir),
            "ansible_playbook_python": sys.executable,  # the controller's Python (Ansible's)
            "ansible_check_mode": self.check_mode,
            "ansible_diff_mode": self.diff,
            "ansible_play_hosts": list(self.play_hosts),
            "ansible_play_batch": list(self.play_hosts),
            "ansible_play_hosts_all": list(self.play_hosts),
            **self.role_names,
        }

    def host_layers(self, state: HostVars) -> ChainMap:
        """Host-level view (what `hostvars[name]` shows): no task, role or loop layers."""
        return ChainMap(
            self.magic(state.host),
            self.extra_vars,
            state.set_facts,
            state.role_vars,
            dict(state.play_vars),
            state.facts,
            state.host.vars,
            state.role_defaults,
            _connection_default(state.host),
        )

    def task_vars(
        self,
        state: HostVars,
        node: Node | None = None,
        loop_vars: Mapping[str, Any] | None = None,
        play: Play | None = None,
    ) -> ChainMap:
        """All layers for one task on one host, highest first."""
        layers: list[Mapping[str, Any]] = [self.magic(state.host), self.extra_vars]
        if loop_vars:
            layers.append(loop_vars)
        layers.append(state.set_facts)
        if node is not None:
            layers.extend(reversed(node.vars))  # innermost (the task's own) first
            if node.role is not None:
                params, role_vars, _ = role_layers(node.role)  # its dependency chain's too
                layers.append(params)
                layers.append(role_vars)
                layers.insert(0, node.role.magic)
            layers.insert(0, search_path(node))
        if state.role_vars:
            layers.append(state.role_vars)
        layers.append(state.play_vars)
        layers.append(state.facts)
        layers.append(state.host.vars)
        if node is not None and node.role is not None:
            layers.append(role_layers(node.role)[2])
        if state.role_defaults:
            layers.append(state.role_defaults)
        layers.append(_connection_default(state.host))
        return ChainMap(*layers)


def search_path(node: Node) -> dict[str, list[str]]:
    """Ansible's `ansible_search_path` for a task: its role's directory, then the directory of
    the file the task is written in (where lookups and `first_found` look for relative names)."""
    cached = node.__dict__.get("_search_path")
    if cached is None:
        paths = [str(node.role.path)] if node.role is not None else []
        task_dir = os.path.dirname(os.path.abspath(node.pos.file))
        if os.path.isdir(task_dir) and task_dir not in paths:
            paths.append(task_dir)
        cached = node.__dict__["_search_path"] = {"ansible_search_path": paths}
    return cached


def _connection_default(host: Host) -> dict[str, str]:
    """`ansible_connection` and `ansible_host` as Ansible defines them for every task when
    nothing sets them (its PlayContext.update_vars; roles test `ansible_connection not in
    ['container', 'docker']`); the inventory's values win."""
    return {
        "ansible_connection": "local" if host.local else "ssh",
        "ansible_host": host.connect_address,
    }
