"""Small helpers the fact sources share: read a file, list a folder, find or run a program,
hide credentials.

Cheap on purpose: `facts` runs in a fresh interpreter per call, and on a host without a GPU
everything it needs is a few dozen file reads. subprocess, threading and urllib.parse (together
with glob, shutil and re, which these helpers replace) cost more CPU to import than the reads
themselves, so each is imported only by the helper that needs it, when it is called.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing (and the re it imports) costs ~3 ms
    from typing import Any, Callable, List, Optional, Tuple


def read_text(path: str, limit: int = 1 << 20) -> Optional[str]:
    """The file's text (first `limit` bytes), or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def list_dir(directory: str, prefix: str = "", suffix: str = "") -> List[str]:
    """Sorted full paths of the entries named PREFIX*SUFFIX, as glob("DIR/PREFIX*SUFFIX") finds
    them (hidden entries left out); [] when the folder cannot be read."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(
        os.path.join(directory, name)
        for name in names
        if name.startswith(prefix)
        and name.endswith(suffix)
        and len(name) >= len(prefix) + len(suffix)
        and not name.startswith(".")
    )


def which(name: str, path: Optional[str] = None) -> Optional[str]:
    """shutil.which(name, path=path) for a plain program name: the first executable file of
    that name in PATH (`path`, else $PATH, else os.defpath)."""
    if path is None:
        path = os.environ.get("PATH", os.defpath)
    if not path:
        return None
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def run(cmd: List[str], timeout: float = 5.0) -> Tuple[int, str]:
    """(exit code, stdout+stderr); 124 on timeout, 127 when the program cannot be started."""
    import subprocess

    try:
        proc = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return 124, ""
    except OSError as exc:
        return 127, str(exc)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def call_with_timeout(func: Callable[[], Any], timeout: float) -> Tuple[bool, Any]:
    """(finished, result or exception). For calls that can block forever, such as statvfs on
    a dead NFS server: the call is left running in a daemon thread and reported as timed out."""
    import threading

    box: List[Any] = []

    def target() -> None:
        try:
            box.append(func())
        except Exception as exc:
            box.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if not box:
        return False, None
    return True, box[0]


def mask_url(url: Optional[str]) -> Optional[str]:
    """https://user:token@host/simple -> https://***@host/simple; other text unchanged."""
    if not url:
        return url
    if "@" not in url and "[" not in url and "]" not in url:
        return url.strip()  # no credentials, and nothing urlsplit could reject: skip importing it
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "***"
    if "@" not in parts.netloc:
        return url.strip()
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, "***@" + host, parts.path, parts.query, parts.fragment))


def parse_key_values(text: str, sep: str = "=") -> dict:
    """KEY=value lines (os-release style), quotes removed."""
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or sep not in line:
            continue
        key, _, value = line.partition(sep)
        values[key.strip()] = value.strip().strip("\"'")
    return values
