"""Where known host keys live: the user's ssh file and provision's own (no paramiko here, so the
OpenSSH transport can name them without importing it; provision/connection/hostkeys.py)."""

from __future__ import annotations

import os
from pathlib import Path

from provision.paths import state_dir


def project_known_hosts() -> Path:
    override = os.environ.get("PROVISION_KNOWN_HOSTS")
    return Path(override) if override else state_dir() / "known_hosts"


def user_known_hosts() -> Path:
    override = os.environ.get("PROVISION_USER_KNOWN_HOSTS")  # tests isolate from the real file
    return Path(override) if override else Path(os.path.expanduser("~/.ssh/known_hosts"))
