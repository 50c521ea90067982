"""What a playbook-running command (`provision run`, `provision up`) shares: `-e` extra vars and
the run's inventory from -i files and targets.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from typing import Any

from provision.errors import ConfigError


def parse_extra_vars(values: list[str]) -> dict[str, Any]:
    """`-e` values, merged left to right: k=v words, @file (YAML/JSON), or an inline mapping."""
    # start-up time: the engine (Jinja2, PyYAML) loads only for a command that runs a playbook
    from provision.engine.playbook import split_words
    from provision.yamlpos import load_yaml, loads

    merged: dict[str, Any] = {}
    for raw in values:
        text = raw.strip()
        if not text:
            continue
        if text.startswith("@"):
            data = load_yaml(text[1:])
            if data is None:
                continue
            if not isinstance(data, dict):
                raise ConfigError(f"-e {text}: the file must hold a mapping of name: value")
            merged.update(data)
        elif text[0] in "{[":
            try:
                data = json.loads(text)
            except ValueError:
                data = loads(text, "-e")
            if not isinstance(data, dict):
                raise ConfigError(f'-e {text!r}: expected a mapping like \'{{"name": "value"}}\'')
            merged.update(data)
        else:
            try:
                spans = split_words(text)
            except ValueError as exc:
                raise ConfigError(f"-e {text!r}: {exc}") from None
            for start, end in spans:
                word = text[start:end]
                key, sep, value = word.partition("=")
                if not sep or not key.isidentifier():
                    raise ConfigError(
                        f"-e {text!r}: expected name=value, @file or a mapping; got {word!r}"
                    )
                if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                    value = value[1:-1]
                merged[key] = value
    return merged


def playbook_inventory(args: argparse.Namespace, options: Any) -> tuple[Any, str | None]:
    """The run's inventory and limit: the files' hosts, narrowed (and extended) by targets."""
    # start-up time: the inventory loaders (PyYAML) load only for a command that runs a playbook
    from provision.inventory.loader import load_inventory, resolve_targets
    from provision.inventory.model import Inventory

    # group_vars/ and host_vars/ beside the playbook count too (Ansible's play-adjacent vars)
    playbook = getattr(args, "playbook", None)  # `provision up` runs a built-in one
    play_dir = os.path.dirname(os.path.abspath(playbook)) if playbook else None
    inventory = load_inventory(args.inventory, play_dir) if args.inventory else Inventory()
    inventory.groups.setdefault("all", list(inventory.hosts))
    if not args.targets:
        if not args.inventory:
            return inventory, args.limit  # implicit localhost only
        if options.user or options.port or options.key_file:
            for name, host in inventory.hosts.items():
                inventory.hosts[name] = dataclasses.replace(
                    host,
                    user=options.user or host.user,
                    port=options.port or host.port,
                    key_file=options.key_file or host.key_file,
                )
        return inventory, args.limit
    hosts = resolve_targets(
        args.targets, args.inventory, options, limit=args.limit, playbook_dir=play_dir
    )
    wanted = {h.name for h in hosts}
    run_inv = Inventory()
    for host in hosts:
        run_inv.hosts[host.name] = host
    for group, members in inventory.groups.items():
        run_inv.groups[group] = [m for m in members if m in wanted]
    run_inv.children = {g: list(c) for g, c in inventory.children.items()}
    run_inv.group_vars = inventory.group_vars
    run_inv.groups["all"] = [h.name for h in hosts]
    ungrouped = run_inv.groups.setdefault("ungrouped", [])
    for host in hosts:
        if host.name not in inventory.hosts and host.name not in ungrouped:
            ungrouped.append(host.name)
    return run_inv, None
