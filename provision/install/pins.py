"""The grammar of a locked package: lock files and pip reports are data, never pip arguments.

A lock file's entries (and a host's `pip --report`, which `provision lock HOST` copies into one)
end up in a requirements file the controller's own `pip download` reads (`--relay`) and the
host's `pip install --require-hashes` reads. A requirements line is a small language: `name @
https://…` is a direct reference pip builds from source even under `--only-binary=:all:`, `-e`,
`-r`, `--index-url` are options, `; marker` is code of a kind. So each field must be the plain
thing it names, checked here and nowhere else:

- name: a PEP 508 project name (letters, digits, `.`, `-`, `_`; starts and ends alnum);
- version: one PEP 440 version (a pin: no operator, no `*`, no spaces; local `+cpu` allowed);
- sha256: 64 lowercase hex digits;
- filename: one file name (no `/`, no `..`, no NUL); the relay takes only `.whl` files.

A value that breaks the grammar is refused with the field and the value (shown as a Python
literal, so a newline or an escape in it is visible).
"""

from __future__ import annotations

import re

from packaging.version import VERSION_PATTERN

__all__ = ["pin_problem", "filename_problem", "wheel_problem"]

_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
_VERSION = re.compile(VERSION_PATTERN, re.VERBOSE | re.IGNORECASE)
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _shown(value: object) -> str:
    text = repr(str(value))
    return text if len(text) <= 120 else text[:117] + "…'"


def pin_problem(name: object, version: object, sha256: object | None = None) -> str | None:
    """Why (name, version[, sha256]) is not a plain pinned package; None when it is."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return (f"name {_shown(name)} is not a package name (letters, digits, '.', '-', '_'; "
                "no URL, path, option, marker or direct reference)")
    if not isinstance(version, str) or not _VERSION.fullmatch(version) or version != version.strip():
        return f"{name}: version {_shown(version)} is not one PEP 440 version (a pin, no operator or option)"
    if sha256 is not None and (not isinstance(sha256, str) or not _SHA256.fullmatch(sha256)):
        return f"{name}: sha256 {_shown(sha256)} is not 64 lowercase hex digits"
    return None


def filename_problem(filename: object) -> str | None:
    """Why `filename` is not one plain file name; None when it is (or empty: the field is optional)."""
    if filename in ("", None):
        return None
    if (not isinstance(filename, str) or "/" in filename or "\\" in filename or "\x00" in filename
            or filename in (".", "..") or filename.startswith(".") or any(c < " " for c in filename)):
        return f"filename {_shown(filename)} is not one plain file name"
    return None


def wheel_problem(filename: str) -> str | None:
    """Why the relay will not take `filename`: it downloads built wheels only, never sources."""
    return filename_problem(filename) or (
        None if filename.endswith(".whl") else f"{_shown(filename)} is not a wheel (the relay ships only .whl files)")
