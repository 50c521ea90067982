"""Fault detection and stop times against the SSH test fleet: prints the table that
docs/threat-model.md ("Faults") quotes.

    sudo python3 benchmarks/fault_bench.py                 # short keepalives + the defaults
    sudo python3 benchmarks/fault_bench.py --no-defaults   # skip the ~1 min default-keepalive rows
    sudo python3 benchmarks/fault_bench.py --repeats 5

Rows (each measured `--repeats` times, median and min-max printed):
- link cut mid-command: SIGINT-free detection, from `ip link set eth0 down` inside the host's
  namespace to UnreachableError, for keepalive interval x count settings;
- sshd session killed mid-stream: SIGKILL of the connection's sshd to UnreachableError;
- command timeout: from the deadline to the result with the remote process group gone;
- Ctrl-C: the `provision run` CLI with one host hung (link down mid-task) and one busy: from
  SIGINT to exit 130.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "fleet")]

from fleet import Fleet  # noqa: E402

from provision.connection.base import ConnectOptions  # noqa: E402
from provision.connection.ssh import SSHConnection  # noqa: E402
from provision.errors import UnreachableError  # noqa: E402

_PROCS = r"""me=$(readlink /proc/self/ns/net); for d in /proc/[0-9]*; do
[ "$(readlink "$d/ns/net" 2>/dev/null)" = "$me" ] || continue
printf '%s %s\n' "${d#/proc/}" "$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)"; done"""


def procs(fleet: Fleet, host, needle: str) -> list[tuple[int, str]]:
    out = fleet.ns_exec(host, _PROCS, check=False).stdout
    rows = []
    for line in out.splitlines():
        pid, _, args = line.partition(" ")
        if needle in args and pid.isdigit() and "readlink" not in args:
            rows.append((int(pid), args))
    return rows


def wait_for(check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise RuntimeError("timed out waiting")


def _reachable(address: str) -> bool:
    import socket

    try:
        socket.create_connection((address, 22), timeout=1).close()
        return True
    except OSError:
        return False


def opts(cfg: str, interval: float, count: int) -> ConnectOptions:
    return ConnectOptions(known_hosts="off", ssh_config=cfg, connect_timeout=5,
                          keepalive=interval, keepalive_count=count)


def link_cut(fleet: Fleet, cfg: str, interval: float, count: int) -> float:
    host = fleet.hosts[0]
    with SSHConnection(host.as_host(), opts(cfg, interval, count)) as conn:
        conn.run("true")
        cut: list[float] = []

        def pull() -> None:
            wait_for(lambda: procs(fleet, host, "sleep 300.5"))
            fleet.link_down(host)
            cut.append(time.monotonic())

        t = threading.Thread(target=pull)
        t.start()
        try:
            conn.run("sleep 300.5")
        except UnreachableError:
            took = time.monotonic() - cut[0]
        else:
            raise RuntimeError("the cut went unnoticed")
        finally:
            t.join()
            fleet.link_up(host)
            # the bridge's neighbour entry failed while the link was down: wait until it answers
            wait_for(lambda: _reachable(host.address))
    return took


def sshd_killed(fleet: Fleet, cfg: str) -> float:
    host = fleet.hosts[0]
    with SSHConnection(host.as_host(), opts(cfg, 15, 3)) as conn:
        conn.run("true")
        killed: list[float] = []

        def kill() -> None:
            wait_for(lambda: procs(fleet, host, "sleep 300.6"))
            out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(host.sshd.pid)],
                                 capture_output=True, text=True).stdout
            killed.append(time.monotonic())
            for pid in out.split():
                os.kill(int(pid), signal.SIGKILL)

        t = threading.Thread(target=kill)
        t.start()
        try:
            conn.run("sleep 300.6")
        except UnreachableError:
            took = time.monotonic() - killed[0]
        finally:
            t.join()
    return took


def command_timeout(fleet: Fleet, cfg: str) -> float:
    host = fleet.hosts[1]
    with SSHConnection(host.as_host(), opts(cfg, 15, 3)) as conn:
        start = time.monotonic()
        result = conn.run("sleep 300.7 & sleep 301.7", timeout=1)
        assert result.exit_code == 124
        wait_for(lambda: not [p for p in procs(fleet, host, "300.7") if p[1].startswith("sleep")])
        return time.monotonic() - start - 1.0


def ctrl_c_run(fleet: Fleet, cfg: str, workdir: Path) -> float:
    good, hung = fleet.hosts[:2]
    inventory = workdir / "hosts.ini"
    inventory.write_text("[gpus]\n" + "".join(
        f"{h.name} ansible_host={h.address} ansible_user=root ansible_ssh_private_key_file={h.key_file}\n"
        for h in (good, hung)))
    playbook = workdir / "site.yml"
    playbook.write_text("- hosts: gpus\n  gather_facts: false\n  tasks:\n    - command: sleep 300.8\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "provision", "run", str(playbook), "-i", str(inventory),
         "--ssh-config", cfg, "--known-hosts", "off", "--keepalive", "30"],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: procs(fleet, good, "sleep 300.8") and procs(fleet, hung, "sleep 300.8"), 60)
        fleet.link_down(hung)
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
        took = time.monotonic() - sent
        assert code == 130, code
    finally:
        if proc.poll() is None:
            proc.kill()
        fleet.link_up(hung)
        for pid, args in procs(fleet, hung, "sleep 300.8"):  # by pid: the process list is shared
            if args.startswith("sleep"):
                os.kill(pid, signal.SIGKILL)
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-defaults", action="store_true", help="skip the 15 s x 3 link-cut row")
    args = parser.parse_args()
    cfg = tempfile.mktemp(prefix="pv-ssh-config-")
    Path(cfg).write_text("")
    rows: list[tuple[str, list[float]]] = []
    with Fleet(2) as fleet, tempfile.TemporaryDirectory() as tmp:
        settings = [(0.5, 2), (2.0, 3)] + ([] if args.no_defaults else [(15.0, 3)])
        for interval, count in settings:
            reps = args.repeats if interval < 5 else 1
            rows.append((f"link cut mid-command, keepalive {interval:g}s x {count}",
                         [link_cut(fleet, cfg, interval, count) for _ in range(reps)]))
        rows.append(("sshd session killed mid-command", [sshd_killed(fleet, cfg) for _ in range(args.repeats)]))
        rows.append(("command timeout -> remote group gone (after the deadline)",
                     [command_timeout(fleet, cfg) for _ in range(args.repeats)]))
        rows.append(("Ctrl-C `provision run`, 1 host hung + 1 busy -> exit 130",
                     [ctrl_c_run(fleet, cfg, Path(tmp)) for _ in range(args.repeats)]))
    width = max(len(name) for name, _ in rows)
    print(f"{'fault':<{width}}  {'median':>8}  {'min-max':>13}  n")
    for name, values in rows:
        print(f"{name:<{width}}  {statistics.median(values):>7.2f}s  "
              f"{min(values):>5.2f}-{max(values):<5.2f}s  {len(values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
