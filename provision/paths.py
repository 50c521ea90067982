"""Where bundled playbooks/templates and local state live."""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def bundle_dir(kind: str) -> Path:
    """`playbooks` or `templates`: the repo's top-level folder in a checkout, else the copy in the wheel."""
    checkout = _PACKAGE_DIR.parent / kind
    if checkout.is_dir():
        return checkout
    return _PACKAGE_DIR / "_bundled" / kind


def state_dir() -> Path:
    """Controller-side state: project known_hosts, report history, wheel cache."""
    base = os.environ.get("PROVISION_HOME") or os.path.join(
        os.environ.get("XDG_STATE_HOME", os.path.expanduser("~/.local/state")), "provision"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path
