"""What `add_host` and `group_by` do to the run's inventory, as Ansible's InventoryManager
(add_dynamic_host / add_dynamic_group): each returns whether anything was new (`changed`).
Callers hold the runner's lock; hosts added here are seen by the following plays."""

from __future__ import annotations

from typing import Any

from provision.inventory.loader import host_from_vars
from provision.inventory.model import Host, Inventory


def _ensure_group(inventory: Inventory, group: str, parent: str = "all") -> bool:
    if group in inventory.groups:
        return False
    inventory.groups[group] = []
    inventory.children.setdefault(group, [])
    inventory.group_vars.setdefault(group, {})
    if group != "all":
        kids = inventory.children.setdefault(parent, [])
        if group not in kids:
            kids.append(group)
    return True


def _join(inventory: Inventory, host: Host, group: str) -> bool:
    members = inventory.groups.setdefault(group, [])
    if host.name in members:
        return False
    members.append(host.name)
    if group not in host.groups:
        host.groups.append(group)
        host.groups.sort()
    ungrouped = inventory.groups.get("ungrouped", [])
    if group not in ("all", "ungrouped") and host.name in ungrouped:
        ungrouped.remove(host.name)
        if "ungrouped" in host.groups:
            host.groups.remove("ungrouped")
    return True


def add_dynamic_host(inventory: Inventory, info: dict[str, Any]) -> bool:
    name = str(info["host_name"])
    new_vars = dict(info.get("host_vars") or {})
    groups = [str(g) for g in info.get("groups") or []]
    changed = False
    host = inventory.hosts.get(name)
    if host is None:
        merged = dict(inventory.group_vars.get("all", {}))
        for group in groups:
            merged.update(inventory.group_vars.get(group, {}))
        merged.update(new_vars)
        host = host_from_vars(name, merged, [], "add_host")
        inventory.hosts[name] = host
        inventory.host_vars[name] = dict(new_vars)
        inventory.groups.setdefault("all", []).append(name)
        changed = True
    else:
        combined = {**inventory.host_vars.get(name, {}), **new_vars}
        if combined != inventory.host_vars.get(name, {}):
            inventory.host_vars[name] = combined
            rebuilt = host_from_vars(name, {**host.vars, **new_vars}, host.groups, "add_host")
            host.vars = rebuilt.vars
            host.address, host.port, host.user = rebuilt.address, rebuilt.port, rebuilt.user
            host.key_file, host.python, host.local = rebuilt.key_file, rebuilt.python, rebuilt.local
            changed = True
    for group in groups:
        changed = _ensure_group(inventory, group) or changed
        changed = _join(inventory, host, group) or changed
    if not groups and not any(name in m for g, m in inventory.groups.items() if g != "all"):
        _ensure_group(inventory, "ungrouped")
        _join(inventory, host, "ungrouped")
    return changed


def add_dynamic_group(inventory: Inventory, host: Host, group: str, parents: list[str]) -> bool:
    changed = False
    for parent in parents:
        changed = _ensure_group(inventory, parent) or changed
    _ensure_group(inventory, group, parents[0] if parents else "all")
    for parent in parents:
        kids = inventory.children.setdefault(parent, [])
        if group not in kids:
            kids.append(group)
            changed = True
    if host.name not in inventory.hosts:
        inventory.hosts[host.name] = host  # the implicit localhost joins the inventory
    return _join(inventory, host, group) or changed


def refresh_groups(inventory: Inventory) -> dict[str, list[str]]:
    """The `groups` magic variable after a change."""
    groups = {name: inventory.group_hosts(name) for name in inventory.groups}
    groups["all"] = list(inventory.hosts)
    return groups
