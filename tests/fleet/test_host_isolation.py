"""What root does on a fleet host stays on that host: its device nodes and its /etc/hosts are its
own (tests/fleet/hostfs.py), never this machine's. A CIS role's `chmod o-w /dev/null` on a twin
once changed this machine's /dev/null through a bind mount of /dev."""

from __future__ import annotations

import os
import subprocess

import pytest
from fleet import FleetHost


def _ssh(host: FleetHost, command: str) -> subprocess.CompletedProcess:
    """As a role would: root over the host's real sshd."""
    return subprocess.run(
        ["ssh", "-F", "/dev/null", "-i", host.key_file, "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-p", str(host.port),
         f"root@{host.address}", command],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["plain", "ownroot"])
def test_root_on_a_host_leaves_this_machines_dev_null_and_etc_hosts(make_fleet, kind: str) -> None:
    fleet = make_fleet(1, kinds=kind)
    host = fleet.hosts[0]
    mine = os.stat("/dev/null")
    hosts_before = open("/etc/hosts").read()
    # checked before anything is changed: on a host sharing this machine's inodes the chmod
    # below would damage this machine (so a fleet without its own nodes fails here, harmlessly)
    seen = _ssh(host, "stat -c '%d:%i %t:%T' /dev/null /etc/hosts")
    assert seen.returncode == 0, seen.stderr
    null_id, hosts_id = (line.split()[0] for line in seen.stdout.splitlines())
    assert null_id != f"{mine.st_dev}:{mine.st_ino}", "the host's /dev/null is this machine's"
    etc = os.stat("/etc/hosts")
    assert hosts_id != f"{etc.st_dev}:{etc.st_ino}", "the host's /etc/hosts is this machine's"
    assert seen.stdout.split()[1] == "1:3", "the host's /dev/null is not the null device"

    changed = _ssh(host, "chmod o-w /dev/null && echo '203.0.113.9 cis-probe' >> /etc/hosts && "
                         "stat -c %a /dev/null && grep -c cis-probe /etc/hosts && "
                         "echo gone > /dev/null && head -c 4 /dev/zero | wc -c")  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.split() == ["664", "1", "4"], changed.stdout  # it ran, on the host
    after = os.stat("/dev/null")
    assert after.st_mode == mine.st_mode and (after.st_uid, after.st_gid) == (mine.st_uid, mine.st_gid)
    assert open("/etc/hosts").read() == hosts_before
    # a second host's nodes are its own too: unchanged by the first's chmod
    other = make_fleet(1, kinds=kind).hosts[0]
    assert _ssh(other, "stat -c %a /dev/null").stdout.strip() == "666"


def test_a_host_gets_a_terminal_and_shared_memory_of_its_own(make_fleet) -> None:
    """sshd's ptys come from the host's own devpts instance; /dev/shm is its own tmpfs."""
    host = make_fleet(1).hosts[0]
    proc = subprocess.run(
        ["ssh", "-tt", "-F", "/dev/null", "-i", host.key_file, "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", f"root@{host.address}",
         "tty; touch /dev/shm/probe-$$ && ls /dev/shm | wc -l"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    lines = proc.stdout.split()
    assert proc.returncode == 0 and lines[0].startswith("/dev/pts/"), (proc.stdout, proc.stderr)
    assert lines[1] == "1", "the host's /dev/shm is shared with this machine or other hosts"
    assert not any(n.startswith("probe-") for n in os.listdir("/dev/shm"))
