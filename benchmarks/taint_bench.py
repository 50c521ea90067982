"""What marking host data costs (issue 20: <= 2 % on a 30-task play).

The same 30-task play — every task registers host output or uses it: `cat` of a 300-line file,
`stdout_lines` through filters into set_fact, `when: r.rc == 0`, loops over registered lines,
`from_json` — run by this tree and by a baseline tree (a checkout of the commit before the
change, e.g. `git worktree add /tmp/taint-base a8e1ba6`), alternating in pairs (A B, B A, …).
Each run is a fresh `python3 -c` with PYTHONPATH set to its tree that times `run_playbook` alone
(wall) and reads its own CPU (user + system, the controller process only: the commands it starts
are not counted). Prints medians with the spread (min–max) and the ratio this/baseline.

    python3 benchmarks/taint_bench.py --baseline /tmp/taint-base            # localhost, 7 pairs
    python3 benchmarks/taint_bench.py --baseline /tmp/taint-base -i hosts.ini --pairs 9
    python3 benchmarks/taint_bench.py --baseline /tmp/taint-base --tiny     # does it run?

With `-i`, the play runs on the inventory's hosts over SSH (a fleet: `sudo python3
tests/fleet/fleet.py up -n 8` prints one). Measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
GOAL = 1.02  # this tree's median / the baseline's

_DRIVER = r"""
import json, resource, sys, time
from provision.engine.runner import run_playbook
from provision.inventory.model import Host
pb, inventory = sys.argv[1], sys.argv[2]
if inventory:
    from provision.inventory.loader import load_inventory
    inv, hosts = load_inventory([inventory]), None
else:
    inv, hosts = None, [Host("localhost", local=True)]
start = time.perf_counter()
cpu0 = resource.getrusage(resource.RUSAGE_SELF)
result = run_playbook(pb, inv, hosts=hosts)
cpu1 = resource.getrusage(resource.RUSAGE_SELF)
wall = time.perf_counter() - start
cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
failed = [(r.task, r.msg) for r in result.results if r.status == "failed"]
print("TAINTBENCH" + json.dumps({"wall": wall, "cpu": cpu, "failed": failed[:3]}))
"""


def write_play(work: Path, lines: int) -> Path:
    """30 tasks, each registering host output or using what an earlier one registered."""
    # no template markers: the baseline would render them (that is the defect) and fail
    text = "\n".join(f"line {i} x{'y' * (i % 40)} (plain host text) [{i}]" for i in range(lines))
    (work / "host.txt").write_text(text + "\n")
    (work / "host.json").write_text(json.dumps({"items": [f"v{i}" for i in range(20)], "n": lines}))
    tasks: list[str] = []
    for i in range(6):
        tasks += [
            f"- command: cat {work}/host.txt\n  register: r{i}\n  changed_when: false",
            f"- set_fact:\n    f{i}: \"{{{{ r{i}.stdout_lines | select('match', 'line 1') | list }}}}\"\n"
            f"    s{i}: \"{{{{ r{i}.stdout ~ '' }}}}\"",
            f"- debug: msg=\"{{{{ f{i} | length }}}} {{{{ s{i} | length }}}}\"\n  when: r{i}.rc == 0",
        ]
    for i in range(4):
        tasks += [
            f"- command: cat {work}/host.json\n  register: j{i}\n  changed_when: false",
            f"- debug: msg=\"{{{{ item }}}}\"\n  loop: \"{{{{ (j{i}.stdout | from_json)['items'][:5] }}}}\"",
            f"- debug: msg=\"{{{{ r0.stdout_lines[{i}] }}}} {{{{ hostvars[inventory_hostname].f0 | length }}}}\"\n"
            f"  when: j{i}.stdout | length > 0",
        ]
    assert len(tasks) == 30, len(tasks)
    body = "\n".join(textwrap.indent(t, "    ") for t in tasks)
    path = work / "taint30.yml"
    path.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n" + body + "\n")
    return path


def once(tree: Path, playbook: Path, inventory: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(playbook), inventory],
        capture_output=True, text=True, env=env, cwd=str(playbook.parent), timeout=600,
    )
    marker = proc.stdout.rfind("TAINTBENCH")
    if proc.returncode != 0 or marker < 0:
        raise SystemExit(f"{tree}: the run failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    doc = json.loads(proc.stdout[marker + len("TAINTBENCH"):].splitlines()[0])
    if doc["failed"]:
        raise SystemExit(f"{tree}: tasks failed: {doc['failed']}")
    return doc


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, type=Path, help="the tree before the change")
    parser.add_argument("--tree", type=Path, default=HERE, help="the tree with it (default: this one)")
    parser.add_argument("-i", "--inventory", default="", help="run on these hosts over SSH")
    parser.add_argument("--pairs", type=int, default=7, help="A/B pairs (at least 5 for figures)")
    parser.add_argument("--lines", type=int, default=300, help="lines of the host's file")
    parser.add_argument("--tiny", action="store_true", help="1 pair, 20 lines: check that it runs")
    args = parser.parse_args(argv)
    pairs, lines = (1, 20) if args.tiny else (args.pairs, args.lines)
    if not args.tiny and pairs < 5:
        parser.error("--pairs must be at least 5 (or use --tiny)")
    runs: dict[str, list[dict]] = {"this tree": [], "baseline": []}
    trees = {"this tree": args.tree.resolve(), "baseline": args.baseline.resolve()}
    with tempfile.TemporaryDirectory(prefix="taint-bench-") as tmp:
        playbook = write_play(Path(tmp), lines)
        once(trees["this tree"], playbook, args.inventory)  # warm the caches (pyc, page cache)
        once(trees["baseline"], playbook, args.inventory)
        for pair in range(pairs):
            order = ["this tree", "baseline"] if pair % 2 == 0 else ["baseline", "this tree"]
            for name in order:
                runs[name].append(once(trees[name], playbook, args.inventory))
                print(f"pair {pair + 1}/{pairs} {name}: {runs[name][-1]['wall']:.3f}s wall, "
                      f"{runs[name][-1]['cpu']:.3f}s CPU", file=sys.stderr)
    print(f"30-task play, {lines}-line host file, {pairs} pairs, "
          f"{'hosts of ' + args.inventory if args.inventory else 'localhost'}")
    print(f"{'':12} {'wall s: median (min–max)':>28} {'controller CPU s':>28}")
    for name in ("this tree", "baseline"):
        print(f"{name:12} {spread([r['wall'] for r in runs[name]]):>28} "
              f"{spread([r['cpu'] for r in runs[name]]):>28}")
    ratios = {
        key: statistics.median(r[key] for r in runs["this tree"])
        / statistics.median(r[key] for r in runs["baseline"])
        for key in ("wall", "cpu")
    }
    print(f"{'ratio':12} {ratios['wall']:>28.3f} {ratios['cpu']:>28.3f}   (goal <= {GOAL})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
