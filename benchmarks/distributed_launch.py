"""Launch overhead of a distributed job: `provision train --distributed` vs torchrun started by
hand over ssh on the same fleet hosts, side by side, from the command to the first training
step done on EVERY rank.

    python3 benchmarks/distributed_launch.py                  # 2 conda fleet hosts, 3 repeats
    python3 benchmarks/distributed_launch.py --hosts 3 --repeat 5

The job is tests/fleet/train_scripts/ddp.py (gloo, CPU): each rank prints `first step RANK T`
with T = time.time(); fleet hosts share this machine's clock, so T minus the moment the command
started is the launch overhead for that rank; a variant's figure is the slowest rank's.

By hand = what a user would type once the code is on the hosts: one `ssh HOST torchrun ...` per
host, all at once, with the same rendezvous argv provision builds (c10d on the first host,
is_host set, the host's own address as --local-addr, GLOO_SOCKET_IFNAME), the code copied
beforehand (not timed). provision = the whole command: connect, facts, the torch check, the
fabric probe, the code sync (nothing changed: hashes only), the supervisor, torchrun; with and
without the pre-job all-reduce: skipped (--no-allreduce), reused from the last measurement
between the same hosts (the default, within 6 h), measured again (--fresh-allreduce). Variants
interleave per repeat so drifting load hits all alike. Goal (issue 13): <= 1.5x by hand, < 5 s.
The provision runs keep their state (known hosts, the all-reduce memo) in a temporary PROVISION_HOME.
Needs root (the fleet) and torch.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fleet"))

SCRIPTS = ROOT / "tests" / "fleet" / "train_scripts"
PYTHON = "/root/miniconda3/bin/python"
FIRST = re.compile(r"first step (\d+) (\d+\.\d+)")
STARTED = re.compile(r"^\S+: run \S+ running \(node \d+\)")  # provision: torchrun runs on that host
HAND_DIR = "/root/autodl-tmp/byhand"


def ssh_argv(host, command: str) -> list[str]:
    return ["ssh", "-F", "/dev/null", "-i", host.key_file, "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
            "-p", str(host.port), f"{host.user}@{host.address}", command]


def first_steps(procs: list[subprocess.Popen], streams: list, ranks: int, timeout: float,
                started: list[float] | None = None) -> list[float]:
    """Read the processes' output until every rank printed its first step; their times. `started`
    collects when provision said torchrun runs on a host."""
    found: dict[int, float] = {}
    lock = threading.Lock()
    tail: list[str] = []

    def reader(stream) -> None:
        for line in stream:
            tail[:] = [*tail[-30:], line]
            if started is not None and STARTED.match(line):
                started.append(time.time())
            m = FIRST.search(line)
            if m:
                with lock:
                    found.setdefault(int(m.group(1)), float(m.group(2)))

    threads = [threading.Thread(target=reader, args=(s,), daemon=True) for s in streams]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        try:
            p.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
    if len(found) < ranks:
        raise RuntimeError(f"only ranks {sorted(found)} of {ranks} reported a first step; last lines:\n"
                           + "".join(tail))
    return [found[r] for r in range(ranks)]


def by_hand(fleet, names: list[str], run: int) -> float:
    from provision.shell import sh
    from provision.train.distributed import torchrun_argv

    master = fleet.host(names[0])
    procs, streams = [], []
    started = time.time()
    for rank, name in enumerate(names):
        h = fleet.host(name)
        argv = torchrun_argv(["python", "ddp.py", "--steps", "3", "--out-dir", "/tmp"], nnodes=len(names),
                             node_rank=rank, nproc=1, master_addr=master.address, master_port=29400 + run % 90,
                             run_id=f"hand{run}", is_host=rank == 0, local_addr=h.address, log_dir="/tmp/byhand-logs")
        argv = [PYTHON] + [a for a in argv[1:] if a != "--tee=3" and not a.startswith("--log-dir=")]
        command = sh("cd {dir} && GLOO_SOCKET_IFNAME=eth0 {argv}", dir=HAND_DIR, argv=argv)
        p = subprocess.Popen(ssh_argv(h, str(command)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(p)
        streams.append(p.stdout)
    return max(first_steps(procs, streams, len(names), 300)) - started


def with_provision(work: Path, inventory: Path, names: list[str], extra: list[str],
                   setup: list[float] | None = None) -> float:
    argv = [sys.executable, "-m", "provision", "train", *names, "-i", str(inventory), "--ssh-config",
            str(work / "ssh_config"), "--distributed", "--dir", str(SCRIPTS), "--python", PYTHON, "--no-live",
            "--out", str(work / "reports"), *extra, "--", "python", "ddp.py", "--steps", "3"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), PROVISION_HOME=str(work / "provision-home"))
    started = time.time()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=work, env=env)
    hosts_started: list[float] = []
    first = max(first_steps([p], [p.stderr], len(names), 300, hosts_started)) - started
    if setup is not None and hosts_started:
        setup.append(max(hosts_started) - started)
    return first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from fleet import Fleet

    work = Path(tempfile.mkdtemp(prefix="dist-launch-"))
    (work / "ssh_config").write_text("")
    names = [f"gpu{i + 1}" for i in range(args.hosts)]
    with Fleet(args.hosts, kinds="conda") as fleet:
        inventory = fleet.write_inventory(work / "hosts.ini")
        from provision.shell import sh

        for name in names:  # by hand: the code is already there (not timed)
            copy = sh("mkdir -p {dir} && cat > {file}", dir=HAND_DIR, file=f"{HAND_DIR}/ddp.py")
            subprocess.run(ssh_argv(fleet.host(name), str(copy)), input=(SCRIPTS / "ddp.py").read_bytes(), check=True)
        with_provision(work, inventory, names, [])  # warm: agent shipped, code synced, all-reduce measured once
        by_hand(fleet, names, 0)
        results: dict[str, list[float]] = {"by hand (ssh + torchrun)": [], "provision --no-allreduce": [],
                                           "provision, all-reduce reused": [],
                                           "provision --fresh-allreduce": []}
        setup: list[float] = []  # provision --no-allreduce: command -> torchrun started on every host
        for r in range(1, args.repeat + 1):
            results["by hand (ssh + torchrun)"].append(by_hand(fleet, names, r))
            results["provision --no-allreduce"].append(
                with_provision(work, inventory, names, ["--no-allreduce"], setup))
            # the default: the all-reduce measured by the --fresh-allreduce run before is reused
            results["provision, all-reduce reused"].append(with_provision(work, inventory, names, []))
            results["provision --fresh-allreduce"].append(
                with_provision(work, inventory, names, ["--fresh-allreduce"]))
            print(f"repeat {r}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in results.items()),
                  file=sys.stderr, flush=True)
    base = statistics.median(results["by hand (ssh + torchrun)"])
    print(f"\ncommand -> first step on every rank, {args.hosts} fleet hosts, median of {args.repeat} "
          f"(cores: {os.cpu_count()})")
    print(f"{'variant':<30} {'median s':>9} {'x by hand':>10}   runs")
    for name, values in results.items():
        med = statistics.median(values)
        print(f"{name:<30} {med:>9.2f} {med / base:>10.2f}   " + " ".join(f"{v:.2f}" for v in values))
    if setup:
        print(f"provision's own part (--no-allreduce: command -> torchrun running on every host): median "
              f"{statistics.median(setup):.2f} s (" + " ".join(f"{v:.2f}" for v in setup) + ")")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
