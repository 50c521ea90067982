"""Per-play set-up done once on the controller: `serial` batches and `vars_prompt` values.

`serial` is the one place hosts wait for each other by design: batch k+1 starts when batch k
is done (Ansible's behaviour); inside a batch hosts still run free. `vars_prompt` never blocks
CI: a value comes from `-e NAME=...`, else the environment variable PROVISION_PROMPT_<NAME>,
else a terminal prompt when stdin is one, else the entry's `default`; with none of those it
is an error naming the prompt and its file:line:col.
"""

from __future__ import annotations

import getpass
import math
import os
import sys
from collections.abc import Mapping
from typing import Any

from provision.errors import ConfigError
from provision.inventory.model import Host


def _batch_size(entry: Any, total: int, where: str) -> int:
    text = str(entry).strip()
    try:
        if text.endswith("%"):
            size = math.floor(total * float(text[:-1]) / 100.0)
            return max(1, size)
        size = int(text)
    except ValueError:
        raise ConfigError(f"{where}: serial {entry!r} is not a batch size") from None
    return total if size <= 0 else size


def batches(hosts: list[Host], serial: Any, where: str) -> list[list[Host]]:
    """Ansible's batching: each list entry is the next batch's size, the last one repeats."""
    if serial is None or not hosts:
        return [hosts]
    sizes = [
        _batch_size(e, len(hosts), where)
        for e in (serial if isinstance(serial, list) else [serial])
    ]
    out: list[list[Host]] = []
    start = 0
    i = 0
    while start < len(hosts):
        size = sizes[min(i, len(sizes) - 1)]
        out.append(hosts[start : start + size])
        start += size
        i += 1
    return out


def env_name(var: str) -> str:
    return "PROVISION_PROMPT_" + var.upper()


def prompt_values(prompts: list[dict[str, Any]], extra_vars: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for entry in prompts:
        name = entry["name"]
        if name in extra_vars:
            continue  # Ansible: -e answers the prompt
        if env_name(name) in os.environ:
            values[name] = os.environ[env_name(name)]
            continue
        if sys.stdin is not None and sys.stdin.isatty():
            text = str(entry.get("prompt") or name) + ": "
            private = entry.get("private", True)
            answer = getpass.getpass(text) if private else input(text)
            values[name] = answer if answer or "default" not in entry else entry["default"]
            continue
        if "default" in entry:
            values[name] = entry["default"]
            continue
        raise ConfigError(
            f"{entry.get('_pos', 'vars_prompt')}: vars_prompt {name!r} has no value and there is "
            f"no terminal to ask on: pass -e {name}=... or set {env_name(name)}"
        )
    return values
