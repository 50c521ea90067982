"""The controller's memo of which agent bundles a host already has, so a warm run sends none.

Keyed by the connection's identity (login, address, port and the host's key: a re-rented
address has a new key, so a new rental is never mistaken for a known one) and by how the agent
runs there (become: root's home). One small file per host under the state dir, holding the
digests seen there. Only a guess: a host that lost its agent answers 97 and the call is repeated
with the bundle; a memo that is missing or unreadable costs the bundle's bytes, nothing else.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from provision.paths import state_dir


def _file(identity: str, mode: str) -> Path:
    key = hashlib.sha256(f"{identity}\0{mode}".encode()).hexdigest()[:24]
    return state_dir() / "agent" / "hosts" / key


def known(identity: str | None, mode: str) -> set[str]:
    """Digests this host is believed to have (empty when unknown)."""
    if identity is None:
        return set()
    try:
        return set(_file(identity, mode).read_text().split())
    except (OSError, UnicodeDecodeError):
        return set()


def remember(identity: str | None, mode: str, digest: str) -> None:
    """Add one digest (best effort: tmp + rename, so a reader never sees half a file)."""
    if identity is None:
        return
    path = _file(identity, mode)
    digests = sorted(known(identity, mode) | {digest})[-16:]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{id(digests)}")
        tmp.write_text("\n".join(digests) + "\n")
        os.replace(tmp, path)
    except OSError:
        pass


def forget(identity: str | None, mode: str, digest: str) -> None:
    """The host answered 'missing': this digest is not there any more."""
    if identity is None:
        return
    digests = known(identity, mode) - {digest}
    path = _file(identity, mode)
    try:
        if digests:
            tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{id(digests)}")
            tmp.write_text("\n".join(sorted(digests)) + "\n")
            os.replace(tmp, path)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass
