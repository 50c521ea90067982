"""Executable inventory scripts: `SCRIPT --list` prints JSON groups (and `_meta.hostvars`).

As Ansible's `script` inventory plugin: a group is `{"hosts": [...], "vars": {...},
"children": [...]}` (a bare list is its hosts; a mapping without any of those keys is one host
named after the group, with those vars). Without `_meta.hostvars`, `SCRIPT --host NAME` is asked
for each host. Every run is bounded by a timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from provision.errors import ConfigError

TIMEOUT_S = 60.0


def is_script(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _run(path: str, args: list[str]) -> Any:
    shown = " ".join([path, *args])
    try:
        proc = subprocess.run(
            [path, *args],
            capture_output=True,
            timeout=TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"inventory script {shown} did not finish within {TIMEOUT_S:g}s; make it faster"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"inventory script {path} could not be run ({exc}); check its #! line"
        ) from None
    stderr = proc.stderr.decode("utf-8", "replace").strip()
    if proc.returncode != 0:
        raise ConfigError(
            f"inventory script {shown} exited with {proc.returncode}: {stderr[-500:] or 'no message'}"
        )
    text = proc.stdout.decode("utf-8", "replace")
    if args[0] == "--host" and not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"inventory script {shown}: its output is not JSON ({exc})") from None


def parse_script(path: str, builder: Any) -> None:
    """Add the groups, hosts and vars `path --list` reports to an InventoryBuilder."""
    data = _run(path, ["--list"])
    if not isinstance(data, dict):
        raise ConfigError(
            f"inventory script {path} --list: expected a JSON object of groups, "
            f"got {type(data).__name__}"
        )
    hostvars: dict[str, Any] | None = None
    hosts: list[str] = []
    for group, gdata in data.items():
        if group == "_meta":
            hostvars = gdata.get("hostvars") if isinstance(gdata, dict) else None
            if not isinstance(hostvars, dict):
                raise ConfigError(f"inventory script {path}: _meta.hostvars must be an object")
            continue
        builder.add_group(group, path)
        if not isinstance(gdata, dict):
            gdata = {"hosts": gdata}
        elif not any(k in gdata for k in ("hosts", "vars", "children")):
            gdata = {"hosts": [group], "vars": gdata}
        members = gdata.get("hosts", [])
        if not isinstance(members, list):
            raise ConfigError(f"inventory script {path}: {group}.hosts must be a list")
        for name in members:
            builder.add_host(str(name), group, path)
            if name not in hosts:
                hosts.append(str(name))
        group_vars = gdata.get("vars", {})
        if not isinstance(group_vars, dict):
            raise ConfigError(f"inventory script {path}: {group}.vars must be an object")
        for key, value in group_vars.items():
            builder.set_group_var(group, key, value, path)
        for child in gdata.get("children", []) or []:
            builder.add_child(group, str(child), path)
    for name in hosts:
        got = hostvars.get(name, {}) if hostvars is not None else _run(path, ["--host", name])
        if not isinstance(got, dict):
            raise ConfigError(f"inventory script {path}: vars of host {name} must be an object")
        for key, value in got.items():
            builder.set_host_var(name, key, value)
