"""The last all-reduce bandwidth measured between a set of hosts, reused for a while.

Measuring it before a distributed job starts torch once more on every host (about 6 s on the
2-core test fleet, more on a loaded one): the same hosts on the same network rarely change
between two launches of a job, so a result at most `REUSE_S` old is shown again, with its age.
The key is every host's SSH identity (login, address, port and host key: a re-rented address
comes with a new key) with its fabric address and interface, in rank order; a connection that
can't say who it is (local) is never reused.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from provision.paths import state_dir, write_atomic

REUSE_S = 6 * 3600.0  # `--fresh-allreduce` (max age 0) measures every time


def memo_key(identities: dict[str, str | None], fabric: Any) -> str | None:
    """A digest of who the hosts are and where they meet; None when one host is unknown."""
    parts = []
    for host in fabric.hosts:
        identity = identities.get(host)
        if not identity:
            return None
        parts.append([identity, fabric.addrs.get(host), fabric.ifaces.get(host)])
    raw = json.dumps({"hosts": parts, "network": fabric.network, "kind": fabric.kind}, sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _file(key: str):
    return state_dir() / "allreduce" / f"{key}.json"


def recall(key: str, max_age_s: float, now: float | None = None) -> dict[str, Any] | None:
    """The remembered result with `reused: {measured_at, age_s}` added, or None (none, too old,
    unreadable, not a successful measurement)."""
    if max_age_s <= 0:
        return None
    try:
        saved = json.loads(_file(key).read_text())
        measured_at = float(saved["measured_at"])
        result = dict(saved["result"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    age = (time.time() if now is None else now) - measured_at
    if not (0 <= age <= max_age_s) or result.get("status") != "ok":
        return None
    result["reused"] = {"measured_at": measured_at, "age_s": round(age, 1)}
    return result


def remember(key: str, result: dict[str, Any], now: float | None = None) -> None:
    """Keep a successful measurement (written whole or not at all)."""
    if result.get("status") != "ok":
        return
    clean = {k: v for k, v in result.items() if k != "reused"}
    payload = {"measured_at": time.time() if now is None else now, "result": clean}
    write_atomic(_file(key), json.dumps(payload, sort_keys=True))


def describe_age(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"
