"""`provision inventory`: show the hosts a target resolves to, with their connection and vars.

    provision inventory -i hosts.ini                 table of every host (stderr)
    provision inventory -i hosts.ini 'gpu:!gpu03'    only what the pattern selects
    provision inventory "ssh -p 41234 root@region-3.autodl.com"
    provision inventory -i hosts.ini --json          `ansible-inventory --list` shape on stdout
    provision inventory -i hosts.ini --graph         the group tree

Secrets never show: vars the one rule in provision/secrets.py calls secret (ansible_password,
ansible_become_pass, *_token, *_key, api_key…) and URL passwords print as ********.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from provision.cli.common import connect_options, console, emit_json
from provision.inventory.loader import load_inventory, resolve_targets
from provision.inventory.model import Host, Inventory
from provision.secrets import mask_tree

describe = "Show the hosts and vars a target or inventory resolves to"

# Shown in their own columns, so left out of the vars column.
_CONNECTION_VARS = {
    "ansible_host",
    "ansible_ssh_host",
    "ansible_port",
    "ansible_ssh_port",
    "ansible_user",
    "ansible_ssh_user",
    "ansible_ssh_private_key_file",
    "ansible_private_key_file",
    "ansible_python_interpreter",
    "ansible_connection",
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="inventory pattern (all, group, host, a:b, a:&b, a:!b) or target string "
        '(user@host:port, ssh://..., a pasted "ssh -p PORT user@host"); default: all',
    )
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--list", action="store_true", help="every host with its vars (the default)")
    shape.add_argument("--graph", action="store_true", help="the tree of groups and hosts")
    parser.add_argument(
        "--export",
        action="store_true",
        help="with --json: group vars under each group and only each host's own "
        "vars in _meta.hostvars (as ansible-inventory --export)",
    )
    parser.add_argument(
        "--playbook-dir",
        metavar="DIR",
        help="also read group_vars/ and host_vars/ beside this playbook directory "
        "(as ansible-inventory --playbook-dir)",
    )
    parser.add_argument(
        "-l",
        "--limit",
        metavar="PATTERN",
        help="further limit the selected hosts to this pattern (or @FILE)",
    )


def run(args: argparse.Namespace) -> int:
    options = connect_options(args)
    play_dir = args.playbook_dir
    hosts = resolve_targets(
        args.targets, args.inventory, options, limit=args.limit, playbook_dir=play_dir
    )
    inventory = load_inventory(args.inventory, play_dir) if args.inventory else None
    if args.graph:
        tree = graph_lines(inventory, hosts)
        if args.json:
            emit_json({"graph": tree})
        else:
            console.print("\n".join(tree), markup=False, highlight=False)
        return 0
    if args.json:
        emit_json(ansible_list(inventory, hosts, export=args.export))
        return 0
    console.print(hosts_table(hosts))
    return 0


# -- secrets ---------------------------------------------------------------------------------
def mask_secrets(value: Any) -> Any:
    """Vars as shown: the one secret rule (provision.secrets) masks names and URL passwords."""
    return mask_tree(value)


# -- JSON ------------------------------------------------------------------------------------
def effective_vars(host: Host, base: dict[str, Any]) -> dict[str, Any]:
    """`base` plus the ansible_* vars that say how we will really connect, where they differ
    (command-line options and ssh_config resolution change the connection, not the vars)."""
    out = dict(base)
    merged = host.vars
    if host.address and host.address != (merged.get("ansible_host") or host.name):
        out["ansible_host"] = host.address
    fields = {
        "ansible_port": host.port,
        "ansible_user": host.user,
        "ansible_ssh_private_key_file": host.key_file,
        "ansible_python_interpreter": host.python,
    }
    for key, value in fields.items():
        if value is not None and merged.get(key) != value:
            out[key] = value
    if host.local and merged.get("ansible_connection") != "local":
        out["ansible_connection"] = "local"
    elif not host.local and merged.get("ansible_connection") == "local":
        out["ansible_connection"] = "ssh"
    if host.proxy_jump and not merged.get("ansible_ssh_common_args"):
        out["ansible_ssh_common_args"] = f"-o ProxyJump={host.proxy_jump}"
    return out


def ansible_list(inventory: Inventory | None, hosts: list[Host], export: bool = False) -> dict:
    """`ansible-inventory --list` (or `--list --export`) for the selected hosts.

    Hosts from target strings, not in the inventory, are listed under `ungrouped`.
    """
    selected = {h.name for h in hosts}
    in_inventory = {h.name for h in hosts if inventory is not None and h.name in inventory.hosts}
    extra = [h.name for h in hosts if h.name not in in_inventory]
    groups = inventory.groups if inventory is not None else {"all": [], "ungrouped": []}
    children = inventory.children if inventory is not None else {"all": ["ungrouped"]}
    group_vars = inventory.group_vars if inventory is not None else {}
    result: dict[str, Any] = {}
    seen: set[str] = set()

    def format_group(name: str) -> None:
        entry: dict[str, Any] = {}
        if name != "all":
            members = [h for h in groups.get(name, []) if h in selected]
            if name == "ungrouped":
                members += [h for h in extra if h not in members]
            entry["hosts"] = members
        entry["children"] = list(children.get(name, []))
        result[name] = entry
        for kid in entry["children"]:
            if kid not in seen:
                seen.add(kid)
                format_group(kid)
        if export:
            entry["vars"] = mask_secrets(group_vars.get(name, {}))
            if entry["vars"].get("ansible_group_priority") == 1:  # the default: Ansible omits it
                del entry["vars"]["ansible_group_priority"]
        for key in [k for k, v in entry.items() if not v]:
            del entry[key]
        if not entry:
            del result[name]

    format_group("all")
    hostvars: dict[str, Any] = {}
    for host in hosts:
        own = (
            inventory.host_vars.get(host.name, {})
            if inventory is not None and export
            else host.vars
        )
        values = mask_secrets(effective_vars(host, own))
        if values:
            hostvars[host.name] = values
    return {"_meta": {"hostvars": hostvars}, **result}


# -- human output ----------------------------------------------------------------------------
def graph_lines(inventory: Inventory | None, hosts: list[Host]) -> list[str]:
    """`ansible-inventory --graph`: child groups first, then hosts, in inventory order."""
    selected = {h.name for h in hosts}
    in_inventory = {h.name for h in hosts if inventory is not None and h.name in inventory.hosts}
    extra = [h.name for h in hosts if h.name not in in_inventory]
    groups = inventory.groups if inventory is not None else {}
    children = inventory.children if inventory is not None else {"all": ["ungrouped"]}
    lines = ["@all:"]

    def walk(name: str, depth: int) -> None:
        indent = "  |" * depth
        lines.append(f"{indent}--@{name}:")
        for kid in children.get(name, []):
            walk(kid, depth + 1)
        members = [h for h in groups.get(name, []) if h in selected]
        if name == "ungrouped":
            members += [h for h in extra if h not in members]
        lines.extend(f"{indent}  |--{h}" for h in members)

    for kid in children.get("all", []):
        walk(kid, 1)
    return lines


def _short(value: Any, limit: int = 40) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def hosts_table(hosts: list[Host]) -> Table:
    rows = []
    for host in hosts:
        connect = "local" if host.local else host.display
        if host.proxy_jump and not host.local:
            connect += f" via {host.proxy_jump}"
        shown = mask_secrets({k: v for k, v in host.vars.items() if k not in _CONNECTION_VARS})
        rows.append(
            {
                "host": host.name,
                "connect": connect,
                "groups": ", ".join(host.groups),
                "python": host.python or "",
                "key": host.key_file or "",
                "vars": "\n".join(f"{k}={_short(v)}" for k, v in shown.items()),
            }
        )
    table = Table(title=f"{len(hosts)} host(s)", title_justify="left")
    # Columns empty for every host only take width from the ones that say something.
    columns = (
        [c for c in rows[0] if c in ("host", "connect") or any(r[c] for r in rows)] if rows else []
    )
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(row[c] for c in columns))
    return table
