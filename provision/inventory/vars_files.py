"""group_vars/ and host_vars/ beside an inventory or a playbook, found as Ansible finds them.

For a group or host NAME in a directory D, the first of D/NAME, D/NAME.yml, D/NAME.yaml,
D/NAME.json that exists is read; when it is a directory, every file in it (recursively, sorted,
skipping hidden files and `~` backups; no extension or one of those three) is read in order.
Later files replace earlier keys (Ansible's default `hash_behaviour = replace`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from provision.errors import ConfigError

EXTENSIONS = (".yml", ".yaml", ".json")


def _dir_files(path: Path) -> list[Path]:
    found: list[Path] = []
    for name in sorted(os.listdir(path)):
        if name.startswith(".") or name.endswith("~"):
            continue
        full = path / name
        ext = os.path.splitext(name)[1]
        if full.is_dir() and not ext:
            found.extend(_dir_files(full))
        elif full.is_file() and (not ext or ext in EXTENSIONS):
            found.append(full)
    return found


def find_vars_files(directory: Path, name: str) -> list[Path]:
    base = directory / name
    for candidate in (base, *(Path(f"{base}{ext}") for ext in EXTENSIONS)):
        if candidate.exists():
            return _dir_files(candidate) if candidate.is_dir() else [candidate]
    return []


def load_vars_file(path: Path) -> dict[str, Any]:
    from provision.yamlpos import (  # start-up time: PyYAML with positions only when a vars file is read
        display_path,
        load_yaml,
    )

    data = load_yaml(path)  # YAML syntax errors name file:line:col
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{display_path(path)}: a vars file must hold a mapping of name: value, "
            f"got {type(data).__name__}"
        )
    return dict(data)


class VarsDirs:
    """The vars of hosts and groups from `group_vars/` / `host_vars/` in some directories,
    each file read once."""

    def __init__(self, directories: list[Path]) -> None:
        self.directories = [d for d in directories if d.is_dir()]
        self._cache: dict[Path, dict[str, Any]] = {}

    def _read(self, path: Path) -> dict[str, Any]:
        if path not in self._cache:
            self._cache[path] = load_vars_file(path)
        return self._cache[path]

    def vars_for(self, kind: str, name: str) -> dict[str, Any]:
        """`kind` is group_vars or host_vars; the directories' files merged in order."""
        merged: dict[str, Any] = {}
        if not name or name.startswith(os.sep):  # Ansible skips chroot-like names too
            return merged
        for directory in self.directories:
            sub = directory / kind
            if sub.is_dir():
                for file in find_vars_files(sub, name):
                    merged.update(self._read(file))
        return merged
