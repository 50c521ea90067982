#!/usr/bin/env python3
"""Where the CPU of one host goes, per operation: the floor under the control-plane ratios.

On this machine the fleet's hosts run on the controller's own cores, so a run over N hosts cannot
take less than (controller CPU + hosts CPU) / cores. This measures both per operation on ONE
fleet host, so the floor at N hosts can be read off and compared with pyinfra's:

    connect + close                       sshd's connection: re-exec, key exchange, auth
    connect + 1 / 5 x `true`              each framed command: sshd's session, login shell, frame
    connect + `python3 -c pass`           an interpreter start on the host
    connect + agent ping / facts          provision's agent: its bootstrap, imports, gathering
    provision facts (CLI) / pyinfra 4 facts (CLI)
    provision run / pyinfra, the 5 steps of run_bench.py, no-change run

Each round runs every operation --calls times (order rotating round by round); the table gives
per-call medians over rounds with min-max. Host CPU is read from the host's sshd listener
(utime + stime + reaped children) once every session of the batch has been reaped, so a session
still winding down after a tool exits is not counted in the next batch.

    sudo python3 benchmarks/host_cost.py                  # 5 rounds x 10 calls
    sudo python3 benchmarks/host_cost.py --rounds 7 --calls 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests" / "fleet"), str(ROOT)]

import facts_bench  # noqa: E402
import run_bench  # noqa: E402
from fleet import Fleet  # noqa: E402

SETTLE_S = 10.0  # bound on waiting for the host's sessions to be reaped


def session_pids(sshd_pid: int) -> list[int]:
    """Children of the host's sshd listener: sessions not yet reaped."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == sshd_pid:
            found.append(int(entry))
    return found


def settle(fleet: Fleet) -> None:
    deadline = time.monotonic() + SETTLE_S
    sshd = fleet.hosts[0].sshd
    assert sshd is not None
    while session_pids(sshd.pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10, help="calls of each operation per round")
    args = parser.parse_args()
    pyinfra = facts_bench.find_tool("pyinfra", "PYINFRA")
    with Fleet(1) as fleet, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bench = facts_bench.Bench(fleet, work, pyinfra, None)
        os.environ.update({k: v for k, v in bench.env.items() if k.startswith("PROVISION_")})
        from provision.connection.base import ConnectOptions
        from provision.connection.ssh import SSHConnection
        from provision.remote.agent import Agent

        options = ConnectOptions(ssh_config=str(bench.ssh_config), connect_timeout=10)
        host = fleet.provision_hosts()[0]
        run_bench.write_files(work, fleet, 1)

        def session(*commands: str, agent: str | None = None) -> Callable[[], None]:
            def call() -> None:
                conn = SSHConnection(host, options)
                conn._open()
                for command in commands:
                    conn.run(command)
                if agent:
                    Agent(conn).call(agent)
                conn.close()
            return call

        def cli(cmd: list[str], env: dict[str, str]) -> Callable[[], None]:
            def call() -> None:
                subprocess.run(cmd, env=env, cwd=work, capture_output=True, check=True, timeout=120)
            return call

        ops: dict[str, Callable[[], None]] = {
            "connect + close": session(),
            "connect + `true`": session("true"),
            "connect + 5 x `true`": session(*["true"] * 5),
            "connect + `python3 -c pass`": session("python3 -c pass"),
            "connect + agent ping": session(agent="ping"),
            "connect + agent facts": session(agent="facts"),
            "provision facts (CLI)": cli(bench.provision_cmd(), bench.env),
            "provision run, 5 steps (CLI)": cli(*run_bench.command_for("provision", work, 1, {})),
        }
        if pyinfra:
            ops["pyinfra, 4 facts (CLI)"] = cli(bench.pyinfra_cmd(), bench.env)
            ops["pyinfra, 5 steps (CLI)"] = cli(*run_bench.command_for("pyinfra", work, 1, {"pyinfra": pyinfra}))
        else:
            print("pyinfra: not found, its rows skipped (pip install pyinfra into ~/.cache/provision-bench-venv)")
        for op in ops.values():  # warm: agents on the host, keys known, files in place
            op()
        settle(fleet)
        names = list(ops)
        rows: dict[str, list[tuple[float, float, float]]] = {n: [] for n in names}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for name in order:
                h0, c0, k0, t0 = facts_bench.hosts_cpu(fleet), time.process_time(), facts_bench.children_cpu(), time.perf_counter()
                for _ in range(args.calls):
                    ops[name]()
                wall = time.perf_counter() - t0
                settle(fleet)
                host_ms = (facts_bench.hosts_cpu(fleet) - h0) / args.calls * 1000
                ctl_ms = ((time.process_time() - c0) + (facts_bench.children_cpu() - k0)) / args.calls * 1000
                rows[name].append((host_ms, ctl_ms, wall / args.calls * 1000))
            print(f"  round {r + 1}/{args.rounds} (load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"\nPer call, one fleet host, medians of {args.rounds} rounds x {args.calls} calls (min-max):\n")
    print("| operation | host CPU | controller CPU | wall |")
    print("|---|---|---|---|")
    for name in names:
        cols = []
        for i in range(3):
            values = [row[i] for row in rows[name]]
            cols.append(f"{statistics.median(values):.1f} ms ({min(values):.1f}-{max(values):.1f})")
        print(f"| {name} | {' | '.join(cols)} |")
    med = {n: [statistics.median(row[i] for row in rows[n]) for i in range(3)] for n in names}
    conn, one, five = med["connect + close"][0], med["connect + `true`"][0], med["connect + 5 x `true`"][0]
    print(f"\nhost CPU: connection {conn:.1f} ms; each further framed command {(five - one) / 4:.1f} ms")
    for ours, theirs in (("provision facts (CLI)", "pyinfra, 4 facts (CLI)"),
                         ("provision run, 5 steps (CLI)", "pyinfra, 5 steps (CLI)")):
        if theirs in med:
            (h1, c1, _), (h2, c2, _) = med[ours], med[theirs]
            print(f"{ours} vs {theirs}: host {h1:.1f} vs {h2:.1f} ms, controller {c1:.1f} vs {c2:.1f} ms "
                  f"(controller includes the CLI's start, paid once per run, not per host)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
