#!/usr/bin/env python3
"""The control plane at a distance: a user-space delay proxy in front of every fleet host's
sshd (this kernel has no netem), which also COUNTS the round trips per host.

Every tool reaches host i through 127.0.0.1:PORT_i, where the proxy holds each byte RTT/2 in each
direction, and a TCP connect costs one RTT. A round trip, as the proxy counts it: the connect,
then every time the host answers after the controller sent something since the host's last
answer (a client that writes several messages without waiting pays one). Per run it prints the
wall time and the round trips per host (median over hosts), for:

  provision        `provision run --persist 0`: a connection per run, a session per task (before)
  provision-kept   `provision run` (kept connections, the CLI default): the first run of a round
                   starts the masters, the no-change run right after reuses them
  provision-exec   `provision run --executor` with kept connections: one request per task
  pyinfra          pyinfra 3.x, the same 5 steps (benchmarks/run_bench.py's deploy)

Each round: every tool's first run (the directory and file absent on every host, and no kept
master: `provision disconnect` before it) then its no-change run; the order rotates per round.

    sudo python3 benchmarks/latency_bench.py --hosts 32 --rtt 0 50 100 --repeat 5
    sudo python3 benchmarks/latency_bench.py --hosts 2 --rtt 50 --repeat 1     # smoke

Needs root (the fleet). pyinfra is found as run_bench.py finds it; missing, it is skipped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fleet"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from delay_proxy import DelayProxy  # noqa: E402  (tests/fleet: the round-trip tests count with it too)
from run_bench import command_for, find_tool, reset_hosts, verify, write_files  # noqa: E402

TOOLS = ("provision", "provision-kept", "provision-exec", "pyinfra")


def proxied(fleet, proxy: DelayProxy) -> SimpleNamespace:
    """The fleet as the tools see it: every host at 127.0.0.1:its proxy port."""
    hosts = [SimpleNamespace(name=h.name, address="127.0.0.1", port=proxy.ports[h.name], user=h.user,
                             key_file=h.key_file, sshd=h.sshd) for h in fleet.hosts]  # fmt: skip
    original = {h.name: h for h in fleet.hosts}

    def write_inventory(path: Path) -> Path:
        lines = ["[gpus]"] + [
            f"{h.name} ansible_host={h.address} ansible_port={h.port} ansible_user={h.user} "
            f"ansible_ssh_private_key_file={h.key_file}"
            for h in hosts
        ]
        Path(path).write_text("\n".join(lines) + "\n")
        return Path(path)

    def ns_exec(host, command: str, **kwargs):
        return fleet.ns_exec(original[host.name], command, **kwargs)

    return SimpleNamespace(hosts=hosts, write_inventory=write_inventory, ns_exec=ns_exec)


def command(tool: str, work: Path, n: int, paths: dict[str, str | None]) -> tuple[list[str], dict[str, str]]:
    if tool == "pyinfra":
        return command_for("pyinfra", work, n, paths)  # type: ignore[arg-type]
    cmd, env = command_for("provision", work, n, paths)  # type: ignore[arg-type]
    env["PROVISION_SSH_PERSIST_DIR"] = str(work / "kept")
    extra = {"provision": ["--persist", "0"], "provision-kept": [], "provision-exec": ["--executor"]}[tool]
    return cmd + extra, env


def disconnect(work: Path) -> None:
    env = {**os.environ, "PROVISION_SSH_PERSIST_DIR": str(work / "kept"), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "provision", "disconnect"], env=env, capture_output=True, timeout=120)


def one_run(cmd: list[str], env: dict[str, str], work: Path, proxy: DelayProxy) -> tuple[float, int, int]:
    proxy.reset()
    start = time.perf_counter()
    with open(work / "log.txt", "ab") as log:
        code = subprocess.run(cmd, env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=900).returncode  # fmt: skip
    seconds = time.perf_counter() - start
    return seconds, code, int(statistics.median(proxy.trips.values()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--rtt", type=float, nargs="+", default=[0.0, 50.0, 100.0], metavar="MS")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tools", default=",".join(TOOLS))
    args = parser.parse_args()
    from fleet import Fleet

    paths = {"pyinfra": find_tool("pyinfra", "PYINFRA"), "ansible-playbook": None}
    tools = [t for t in args.tools.split(",") if t]
    if "pyinfra" in tools and paths["pyinfra"] is None:
        print("pyinfra not found: skipped", file=sys.stderr)
        tools.remove("pyinfra")
    fleet = Fleet(args.hosts).start()
    rows = []
    try:
        for rtt in args.rtt:
            proxy = DelayProxy({h.name: (h.address, h.port) for h in fleet.hosts}, rtt)
            view = proxied(fleet, proxy)
            work = Path(tempfile.mkdtemp(prefix=f"provision-latency-{int(rtt)}-"))
            write_files(work, view, args.hosts)
            results: dict[str, list[tuple[float, int, float, int, int]]] = {t: [] for t in tools}
            for round_no in range(args.repeat):
                order = tools[round_no % len(tools):] + tools[: round_no % len(tools)]
                for tool in order:
                    reset_hosts(view)
                    disconnect(work)
                    cmd, env = command(tool, work, args.hosts, paths)
                    first, code1, trips1 = one_run(cmd, env, work, proxy)
                    ok = verify(view)
                    second, code2, trips2 = one_run(cmd, env, work, proxy)
                    results[tool].append((first, trips1, second, trips2, max(code1, code2, 0 if ok else 1)))
                    print(f"rtt {rtt:g} ms round {round_no + 1} {tool}: first {first:.2f}s ({trips1} trips/host), "
                          f"no-change {second:.2f}s ({trips2} trips/host), exit {code1}/{code2}", file=sys.stderr)  # fmt: skip
            disconnect(work)
            for tool, runs in results.items():
                rows.append((rtt, tool, *(statistics.median(r[i] for r in runs) for i in range(4)),
                             max(r[4] for r in runs)))  # fmt: skip
    finally:
        fleet.stop()
    print("| RTT | hosts | tool | first run | trips/host | no-change | trips/host | vs pyinfra (first / no-change) | exit |")
    print("|---|---|---|---|---|---|---|---|---|")
    anchor = {r[0]: r for r in rows if r[1] == "pyinfra"}
    for rtt, tool, first, t1, second, t2, code in rows:
        ratio = "-"
        if rtt in anchor and tool != "pyinfra":
            ratio = f"{first / anchor[rtt][2]:.2f}x / {second / anchor[rtt][4]:.2f}x"
        print(f"| {rtt:g} ms | {args.hosts} | {tool} | {first:.2f} s | {t1:g} | {second:.2f} s | {t2:g} | {ratio} | {code} |")
    return 0 if all(r[-1] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
