#!/usr/bin/env python3
"""What the reply boundary (issue 29: provision/remote/replies.py) costs on `provision facts`.

    sudo python3 benchmarks/boundary_bench.py                  # 32 hosts, 15 pairs
    sudo python3 benchmarks/boundary_bench.py --hosts 4 --pairs 1   # a smoke run

One fleet; one discarded warm-up of each; then `--pairs` pairs of warm `provision facts all
--json --forks N` runs, one with the boundary and one without, their order alternating from
pair to pair (noise on a shared machine hits both). "Without" is the same command with the
check replaced by a no-op inside the benchmark's own process start (`-c`, before provision's
main runs): the shipped code has no switch to turn it off. Wall-clock time of the whole command,
interpreter start-up included. Reported: each side's median, the per-pair ratio (with/without)
median and min-max, and the check's own CPU per host (timed in-process on the facts replies the
run got: what the boundary adds to the controller, free of the fleet's noise). Target: <= 2 %.

Needs root (the fleet: network namespaces + sshd).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "fleet"))
sys.path.insert(0, str(ROOT))

from facts_bench import Bench  # noqa: E402
from fleet import Fleet, preflight  # noqa: E402

WITHOUT = (
    "import runpy, sys\n"
    "import provision.remote.replies as r\n"
    "r.check_reply = r.check_event = lambda *a: None\n"
    "sys.argv[0] = 'provision'\n"
    "runpy.run_module('provision', run_name='__main__')\n"
)


def timed(bench: Bench, boundary: bool) -> tuple[float, dict]:
    cmd = bench.provision_cmd()
    if not boundary:
        cmd = [cmd[0], "-c", WITHOUT, *cmd[3:]]  # in place of `-m provision`
    seconds, _, _, out = bench._timed(cmd, bench.env, "with" if boundary else "without", bench.tree)
    hosts = json.loads(out)["hosts"]
    bad = {n: f.get("error") for n, f in hosts.items() if f.get("hostname") != n}
    if bad:
        raise SystemExit(f"provision facts ({'with' if boundary else 'without'} the boundary): {bad}")
    return seconds, hosts


def check_cpu_per_host(replies_by_host: dict) -> float:
    """Seconds of CPU the check takes per host's facts reply (median of the hosts)."""
    from provision.remote.replies import check_reply

    per_host = []
    for data in replies_by_host.values():
        rounds = 200
        started = time.process_time()
        for _ in range(rounds):
            check_reply("facts", data)
        per_host.append((time.process_time() - started) / rounds)
    return statistics.median(per_host)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=15)
    args = parser.parse_args()
    reason = preflight()
    if reason:
        print(f"the fleet is unavailable: {reason}", file=sys.stderr)
        return 2
    with Fleet(args.hosts) as fleet, tempfile.TemporaryDirectory(prefix="boundary-bench-") as tmp:
        bench = Bench(fleet, Path(tmp), None, None)
        timed(bench, True)  # warm-up: agents on the hosts, known_hosts, bytecode
        timed(bench, False)
        with_s, without_s, ratios = [], [], []
        last: dict = {}
        for i in range(args.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            got = {}
            for boundary in order:
                got[boundary], hosts = timed(bench, boundary)
                if boundary:
                    last = hosts
            with_s.append(got[True])
            without_s.append(got[False])
            ratios.append(got[True] / got[False])
            print(f"pair {i + 1}: with {got[True]:.3f} s, without {got[False]:.3f} s, ratio {ratios[-1]:.3f}",
                  flush=True)
        cpu = check_cpu_per_host(last)
    print(f"\n{args.hosts} hosts, {args.pairs} pairs")
    print(f"with the boundary:    median {statistics.median(with_s):.3f} s")
    print(f"without the boundary: median {statistics.median(without_s):.3f} s")
    print(f"ratio with/without:   median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")
    print(f"the check's CPU:      {cpu * 1e6:.0f} us per host's facts reply, {cpu * args.hosts * 1e3:.2f} ms for "
          f"{args.hosts} hosts ({cpu * args.hosts / statistics.median(without_s) * 100:.2f} % of the run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
