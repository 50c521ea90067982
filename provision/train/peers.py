"""Which hosts of a distributed run the controller may connect to (issue 20).

A run's `state.json` on a host lists the other hosts of its job (`distributed.hosts`), and
`provision stop` / `attach` must reach all of them. But that file is the host's to write: a
compromised rental could list any machine, and the controller would connect there with the user's
keys and passwords. So a name a host reports becomes a connection target only when the user
already named it (a host of the inventory, an explicit `Host` alias of the ssh_config, the target
on the command line) or when this controller started the run on it (its own record, written by
`provision train --distributed` under provision.paths.state_dir()/runs/). Any other peer is
refused and named, never connected to.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from provision.errors import HostError
from provision.inventory.loader import load_inventory
from provision.inventory.model import Host
from provision.inventory.ssh_config import is_alias
from provision.parallel import HostOutcome
from provision.paths import state_dir, write_atomic

RECORD_DIR = "runs"
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass
class Peers:
    accepted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def refusal(self, host: str, run_id: str) -> str:
        """The message for the refused peers (empty when none)."""
        if not self.refused:
            return ""
        return (f"{host}: run {run_id}'s state.json on the host lists peer(s) "
                f"{', '.join(repr(p) for p in self.refused)} that are neither in your inventory or "
                "ssh_config nor in this controller's record of the run: not connecting to them "
                "(a host's word is not a connection target; add them to your inventory to include them)")


def _record_path(run_id: str) -> Path | None:
    if not _SAFE_ID.match(run_id):  # the id names a file: nothing outside runs/ is ever read
        return None
    return state_dir() / RECORD_DIR / f"{run_id}.json"


def record_run(run_id: str, hosts: list[str]) -> None:
    """Remember the hosts this controller started `run_id` on (0600: it names the user's hosts)."""
    path = _record_path(run_id)
    if path is None:
        return
    write_atomic(path, json.dumps({"run_id": run_id, "hosts": list(hosts)}) + "\n", mode=0o600)


def recorded_hosts(run_id: str) -> list[str]:
    """The hosts of this controller's own record of `run_id` ([] when it has none)."""
    path = _record_path(run_id)
    if path is None:
        return []
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    hosts = doc.get("hosts") if isinstance(doc, dict) else None
    return [h for h in hosts if isinstance(h, str)] if isinstance(hosts, list) else []


def vet_peers(run_id: str, named: str, listed: object, inventory_files: list[str],
              ssh_config: str | None) -> Peers:
    """Split the peers a host listed into those the user or this controller already knows and
    the rest. `named`: the target the user gave (always trusted; not repeated in the result)."""
    names = [p for p in listed if isinstance(p, str)] if isinstance(listed, list) else []
    known_inventory: set[str] = set()
    if inventory_files:
        known_inventory = set(load_inventory(inventory_files).hosts)
    record = recorded_hosts(run_id)
    ours = set(record)
    out = Peers()
    for peer in dict.fromkeys(names):  # each once, in the host's order
        if peer == named:
            continue
        if peer in known_inventory or peer in ours or _user_alias(peer, ssh_config):
            out.accepted.append(peer)
        else:
            out.refused.append(peer)
    return out


def _user_alias(peer: str, ssh_config: str | None) -> bool:
    """An explicit `Host NAME` of the user's ssh_config (not a wildcard entry matching anything)."""
    # a pattern or an option-looking word is never an alias the user wrote for this host
    if not peer or peer.startswith("-") or any(c in peer for c in "*?!,% \t\n") or os.sep in peer:
        return False
    try:
        return bool(is_alias(peer, ssh_config))
    except (OSError, ValueError):
        return False


def refused_outcomes(peers: Peers, host: str, run_id: str) -> dict[str, object]:
    """{peer: a failed HostOutcome} for each refused peer, so the output and the exit code say so."""
    message = peers.refusal(host, run_id)
    return {p: HostOutcome(Host(name=p), error=HostError(p, "refused: " + message)) for p in peers.refused}
