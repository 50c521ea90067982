"""Give a host's Python py-lmdb (required) or zstandard (optional: compressed stage streams)
when it lacks them, without needing a package index on the host.

The agent reports its Python tag (cp311-x86_64). If this controller's own package was installed
from a manylinux wheel for the same tag, its package folder is zipped and uploaded; otherwise a
matching wheel is fetched once with `pip download` into the local state dir and uploaded. Either
lands as ~/.cache/provision/pylib/<tag>.zip (lmdb) or <tag>-zstandard.zip, which the agent
unpacks and imports (provision/agent/datasets/deps.py). One upload per host, reused by every
later stage.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import platform
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from provision.agent.datasets.deps import python_tag, shipped_zip
from provision.connection.base import Connection
from provision.errors import HostError
from provision.paths import state_dir

log = logging.getLogger("provision.stage")
_TAG = re.compile(r"^cp(\d)(\d+)-([A-Za-z0-9_]+)$")


# what a package needs on the host: zstandard's CFFI backend (12 MB) is for PyPy, CPython
# imports backend_c
_PACKAGES = {"lmdb": ("lmdb", None), "zstandard": ("zstandard", ("__init__.py", "backend_c."))}


def _wheel_files(tag: str, dist_name: str) -> tuple[Path, list[Path]] | None:
    """(package folder, the files to ship) of this interpreter's `dist_name`, when it is a
    manylinux wheel install for `tag`; else None."""
    if tag != python_tag() or not sys.platform.startswith("linux"):
        return None
    try:
        wheel = metadata.distribution(dist_name).read_text("WHEEL") or ""
    except metadata.PackageNotFoundError:
        return None
    if "manylinux" not in wheel and "musllinux" not in wheel:
        return None  # built from source here: it may link against this machine's libraries
    module_name, keep = _PACKAGES[dist_name]
    try:
        root = Path(__import__(module_name).__file__).resolve().parent
    except Exception:
        return None
    files = [p for p in sorted(root.rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts and (not keep or p.name.startswith(keep))]
    return (root, files) if files else None


def _local_package_zip(tag: str, dist_name: str = "lmdb") -> bytes | None:
    """This interpreter's package as a zip, when it is a manylinux wheel install for `tag`."""
    found = _wheel_files(tag, dist_name)
    if found is None:
        return None
    root, files = found
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            zf.write(path, f"{root.name}/" + path.relative_to(root).as_posix())
    return buf.getvalue()


def _downloaded_wheel(tag: str, timeout: float = 120.0) -> bytes | None:
    """A manylinux lmdb wheel for `tag` from the package index (cached under the state dir)."""
    m = _TAG.match(tag)
    if not m:
        return None
    major, minor, machine = m.group(1), m.group(2), m.group(3)
    cache = state_dir() / "wheels" / tag
    found = sorted(cache.glob("lmdb-*.whl")) if cache.is_dir() else []
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        spec = "lmdb>=1.4,<2" if (int(major), int(minor)) < (3, 9) else "lmdb>=1.4"
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            f"{major}.{minor}",
            "--implementation",
            "cp",
            "-d",
            str(cache),
        ]
        for plat in (
            f"manylinux2014_{machine}",
            f"manylinux_2_17_{machine}",
            f"manylinux_2_28_{machine}",
        ):
            cmd += ["--platform", plat]
        cmd.append(spec)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.info("pip download of lmdb for %s failed: %s", tag, exc)
            return None
        if proc.returncode != 0:
            log.info("pip download of lmdb for %s failed: %s", tag, proc.stderr.strip()[-500:])
            return None
        found = sorted(cache.glob("lmdb-*.whl"))
    return found[-1].read_bytes() if found else None


def lmdb_package_for(tag: str) -> bytes | None:
    return _local_package_zip(tag) or _downloaded_wheel(tag)


def ship_lmdb(connection: Connection, status: dict, put: Callable[..., None] | None = None) -> None:
    """Upload py-lmdb for the host's Python; HostError naming the fix when impossible. `put`:
    the agent's (Agent.put), so that under become it lands in root's home, where the agent looks."""
    py = status.get("python") or {}
    tag = py.get("tag", "")
    host = connection.host.name
    package = lmdb_package_for(tag)
    if package is None:
        raise HostError(
            host,
            f"py-lmdb is not importable by {py.get('executable', 'python3')} (Python {py.get('version')}, "
            f"{tag}) and no matching wheel could be found here (this machine is "
            f"{python_tag()}, {platform.platform()}). Install it on the host: "
            f"`{py.get('executable', 'python3')} -m pip install lmdb`, then rerun.",
        )
    log.info("%s: shipping py-lmdb for %s (%d bytes)", host, tag, len(package))
    remote = shipped_zip("lmdb", tag)
    (put or connection.put)(package, remote, mode=0o644)


@functools.lru_cache(maxsize=8)
def zstandard_package_size(tag: str) -> int | None:
    """Bytes of what ship_zstandard would unpack on the host (its upload is ~1/4 of it, zipped);
    None where nothing here matches the host's Python. Nothing is built; asked at every window
    of a stream until it decides, so kept per process."""
    found = _wheel_files(tag, "zstandard")
    return sum(p.stat().st_size for p in found[1]) if found else None


def zstandard_package_for(tag: str) -> bytes | None:
    """zstandard for the host's Python: this controller's own copy where the tags match (an
    optional speed-up is not worth a pip download), zipped once and kept in the state dir."""
    try:
        version = metadata.version("zstandard")
    except metadata.PackageNotFoundError:
        return None
    kept = state_dir() / "wheels" / python_tag() / f"zstandard-{version}-local.zip"
    if tag == python_tag() and kept.is_file():
        return kept.read_bytes()
    package = _local_package_zip(tag, "zstandard")
    if package is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_name(kept.name + f".tmp-{os.getpid()}")
        tmp.write_bytes(package)
        tmp.replace(kept)
    return package


def ship_zstandard(connection: Connection, tag: str, put: Callable[..., None] | None = None) -> bool:
    """Upload zstandard for the host's Python (tag); False where none matches here."""
    if not _TAG.match(tag):  # the host's word: it names a path here and there
        return False
    package = zstandard_package_for(tag)
    if package is None:
        return False
    log.info("%s: shipping zstandard for %s (%d bytes)", connection.host.name, tag, len(package))
    (put or connection.put)(package, shipped_zip("zstandard", tag), mode=0o644)
    return True
