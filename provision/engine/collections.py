"""Ansible collections on the controller: where they are and what a collection-qualified name
(`devsec.hardening.os_hardening`) points at.

The search order is Ansible's: `collections/` beside the playbook, then COLLECTIONS_PATHS
(ANSIBLE_COLLECTIONS_PATH, the older ANSIBLE_COLLECTIONS_PATHS, ansible.cfg
`collections_path`/`collections_paths`; by default `~/.ansible/collections` and
`/usr/share/ansible/collections`), then the `ansible_collections` directories on the
controller's Python path (where `pip install ansible` puts them). Each place may be a directory
holding `ansible_collections/` or that directory itself. Nothing here imports Ansible: a
collection is files (roles/, plugins/modules/), read as files.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from functools import lru_cache
from pathlib import Path

from provision.config import AnsibleConfig

DEFAULT_PATHS = ("~/.ansible/collections", "/usr/share/ansible/collections")
_FQCN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_.]*$")


def is_fqcn(name: str) -> bool:
    """`namespace.collection.name` (the name may itself have dots: subdirectories)."""
    return bool(_FQCN.match(name))


def _roots_of(path: Path) -> Path:
    return path if path.name == "ansible_collections" else path / "ansible_collections"


@lru_cache(maxsize=4)
def _python_roots() -> tuple[Path, ...]:
    """`ansible_collections` on the controller's Python path (the `ansible` package's)."""
    found: list[Path] = []
    try:
        spec = importlib.util.find_spec("ansible_collections")  # finds; runs nothing of it
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        found.append(Path(location))
    for entry in sys.path:
        candidate = Path(entry or ".") / "ansible_collections"
        if candidate.is_dir() and candidate not in found:
            found.append(candidate)
    return tuple(found)


def collection_roots(playbook_dir: Path, config: AnsibleConfig) -> list[Path]:
    """Every `ansible_collections` directory to search, in Ansible's order."""
    roots: list[Path] = [_roots_of(playbook_dir / "collections")]
    # config.collections_path has ANSIBLE_COLLECTIONS_PATH(S) and ansible.cfg already
    paths = list(config.collections_path) or list(DEFAULT_PATHS)
    roots += [_roots_of(Path(p).expanduser()) for p in paths]
    roots += list(_python_roots())
    out: list[Path] = []
    for root in roots:
        if root not in out:
            out.append(root)
    return out


def split_fqcn(name: str) -> tuple[str, str, str]:
    namespace, collection, rest = name.split(".", 2)
    return namespace, collection, rest


def find_collection_role(name: str, roots: list[Path]) -> tuple[Path | None, list[Path]]:
    """The directory of role `ns.coll.role`, and the places looked at."""
    namespace, collection, role = split_fqcn(name)
    tried = []
    for root in roots:
        candidate = root / namespace / collection / "roles" / role
        tried.append(candidate)
        if candidate.is_dir():
            return candidate, tried
    return None, tried


def find_collection_plugin(name: str, kind: str, roots: list[Path]) -> Path | None:
    """The file of plugin `ns.coll.name` of `kind` (modules, lookup, filter), if installed."""
    namespace, collection, plugin = split_fqcn(name)
    for root in roots:
        candidate = (
            root / namespace / collection / "plugins" / kind / f"{plugin.replace('.', '/')}.py"
        )
        if candidate.is_file():
            return candidate
    return None
