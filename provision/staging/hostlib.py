"""Give a host's Python py-lmdb when it lacks it, without needing a package index on the host.

The agent reports its Python tag (cp311-x86_64). If this controller's own lmdb was installed
from a manylinux wheel for the same tag, its package folder is zipped and uploaded; otherwise a
matching wheel is fetched once with `pip download` into the local state dir and uploaded. Either
lands as ~/.cache/provision/pylib/<tag>.zip, which the agent unpacks and imports
(provision/agent/datasets/deps.py). One upload per host, reused by every later stage.
"""

from __future__ import annotations

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

from provision.agent.datasets.deps import PYLIB, python_tag
from provision.connection.base import Connection
from provision.errors import HostError
from provision.paths import state_dir

log = logging.getLogger("provision.stage")
_TAG = re.compile(r"^cp(\d)(\d+)-([A-Za-z0-9_]+)$")


def _local_package_zip(tag: str) -> bytes | None:
    """This interpreter's lmdb package as a zip, when it is a manylinux wheel install for `tag`."""
    if tag != python_tag() or not sys.platform.startswith("linux"):
        return None
    try:
        dist = metadata.distribution("lmdb")
    except metadata.PackageNotFoundError:
        return None
    wheel = dist.read_text("WHEEL") or ""
    if "manylinux" not in wheel and "musllinux" not in wheel:
        return None  # built from source here: it may link against this machine's libraries
    import lmdb

    root = Path(lmdb.__file__).resolve().parent
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, "lmdb/" + path.relative_to(root).as_posix())
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
    remote = os.path.join(PYLIB, f"{tag}.zip")
    (put or connection.put)(package, remote, mode=0o644)
