"""Small helpers the fact sources share: read a file, run a program, hide credentials."""

import subprocess
import threading
from typing import Any, Callable, List, Optional, Tuple
from urllib.parse import urlsplit, urlunsplit


def read_text(path: str, limit: int = 1 << 20) -> Optional[str]:
    """The file's text (first `limit` bytes), or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def run(cmd: List[str], timeout: float = 5.0) -> Tuple[int, str]:
    """(exit code, stdout+stderr); 124 on timeout, 127 when the program cannot be started."""
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
