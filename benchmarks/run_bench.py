#!/usr/bin/env python3
"""Control plane benchmark, side by side in one run:

(a) the same 5 steps on N fleet hosts with `provision run`, pyinfra 3.x and ansible-core;
(b) a playbook of 30 tasks on 8 hosts (benchmarks/playbook30.py) with `provision run` and
    ansible-playbook (no fact gathering). Goals (issue 11): (a) <= 0.6x pyinfra at 32 hosts,
    (b) <= 0.2x ansible-playbook. The last lines print both ratios.

Steps: ensure a directory, run `nproc`, run `python3 -c ...`, copy a small file, run `df`.
Each tool runs twice per round: the first run (directory and file absent on every host) and the
no-change run right after. The tools alternate within each round (the order rotates round by
round), so load that drifts hits all alike; per fleet size it prints medians with min-max, the
median of the per-round ratios to pyinfra, and CPU seconds on both ends: the controller's (the
tool's process tree) and the hosts' (every sshd session on the fleet; on this machine they share
the controller's cores). Wall-clock time of the whole command, start-up included. The load
average is printed with every round: quote it with the figures.

Parallelism: by default every tool gets one connection per host (`-f N`, `--parallel N`,
ansible forks = N). `--default-forks` passes none, so each tool runs with its own default
(provision 32... see `provision run --help`, pyinfra 20 per CPU core, ansible 5 -- ansible
keeps forks = N) -- the setting for the 128- and 256-host rows.

    sudo python3 benchmarks/run_bench.py                 # 8 and 32 hosts, every tool found
    sudo python3 benchmarks/run_bench.py --sizes 8 --tools provision,pyinfra
    sudo python3 benchmarks/run_bench.py --sizes 32 --tools provision,pyinfra --repeat 7 --no-30
    sudo python3 benchmarks/run_bench.py --sizes 128,256 --tools provision,pyinfra --repeat 5 --no-30 --default-forks
    PYINFRA=/path/to/pyinfra ANSIBLE_PLAYBOOK=/path/to/ansible-playbook python3 benchmarks/run_bench.py

Needs root (the fleet: network namespaces + sshd). pyinfra and ansible-core are found on PATH,
next to this Python, or in ~/.cache/provision-bench-venv (pip install pyinfra ansible-core);
a tool that is missing is reported and skipped. Anchors measured on this kind of machine
(shared/reference/anchors.md): pyinfra 1.17 s (8 hosts) / 3.1 s (32); ansible-playbook with fact
gathering 21.5 s / 60.4 s. Goal: provision <= 0.8x pyinfra at 32 hosts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fleet"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from playbook30 import GOAL as GOAL30  # noqa: E402
from playbook30 import write_playbook30  # noqa: E402

ANCHORS = {  # seconds, measured on this kind of machine (anchors.md)
    ("pyinfra", 8): 1.17,
    ("pyinfra", 32): 3.1,
    ("ansible+facts", 8): 21.5,
    ("ansible+facts", 32): 60.4,
    ("ansible", 8): 10.4,
}
SMALL_FILE = "provision benchmark: a small file\n" * 8
TOOLS = ("provision", "provision+facts", "pyinfra", "ansible", "ansible+facts")


def find_tool(name: str, env: str) -> str | None:
    if os.environ.get(env):
        return os.environ[env]
    for candidate in (
        shutil.which(name),
        str(Path(sys.executable).parent / name),
        str(Path.home() / ".cache" / "provision-bench-venv" / "bin" / name),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def write_files(work: Path, fleet: object, n: int) -> None:
    hosts = fleet.hosts  # type: ignore[attr-defined]
    (work / "small.txt").write_text(SMALL_FILE)
    fleet.write_inventory(work / "hosts.ini")  # type: ignore[attr-defined]
    for facts in (False, True):
        suffix = "-facts" if facts else ""
        (work / f"bench{suffix}.yml").write_text(
            textwrap.dedent(f"""\
            - hosts: all
              gather_facts: {str(facts).lower()}
              tasks:
                - name: ensure a directory
                  file: path=/tmp/bench state=directory mode=0755
                - name: nproc
                  command: nproc
                  changed_when: false
                - name: python
                  command: python3 -c "import sys; print(sys.version_info[:2])"
                  changed_when: false
                - name: copy a small file
                  copy: src={work}/small.txt dest=/tmp/bench/small.txt mode=0644
                - name: df
                  command: df -h /
                  changed_when: false
            """)
        )
    (work / "ansible.cfg").write_text(
        textwrap.dedent(f"""\
        [defaults]
        forks = {n}
        host_key_checking = False
        interpreter_python = /usr/bin/python3
        stdout_callback = default
        retry_files_enabled = False
        deprecation_warnings = False
        [ssh_connection]
        pipelining = True
        ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile={work}/ansible_known_hosts
        """)
    )
    lines = ["hosts = ["]
    for h in hosts:
        lines.append(
            # named by host, the address as ssh_hostname: behind the latency proxy every host is
            # 127.0.0.1 (its own port), and pyinfra keys hosts by name
            f"    ({h.name!r}, {{'ssh_hostname': {h.address!r}, 'ssh_port': {h.port}, 'ssh_user': {h.user!r}, "
            f"'ssh_key': {h.key_file!r}, "
            f"'ssh_known_hosts_file': {str(work / 'pyinfra_known_hosts')!r}, "
            f"'ssh_strict_host_key_checking': 'accept-new'}}),"
        )
    lines.append("]")
    (work / "inventory.py").write_text("\n".join(lines) + "\n")
    (work / "deploy.py").write_text(
        textwrap.dedent(f"""\
        from pyinfra.operations import files, server
        files.directory(name="ensure a directory", path="/tmp/bench", mode="755")
        server.shell(name="nproc", commands=["nproc"])
        server.shell(name="python", commands=['python3 -c "import sys; print(sys.version_info[:2])"'])
        files.put(name="copy a small file", src={str(work / "small.txt")!r}, dest="/tmp/bench/small.txt", mode="644")
        server.shell(name="df", commands=["df -h /"])
        """)
    )


def command_for(
    tool: str, work: Path, n: int, paths: dict[str, str], default_forks: bool = False
) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if tool.startswith("provision"):
        facts = "-facts" if tool.endswith("+facts") else ""
        env["PROVISION_KNOWN_HOSTS"] = str(work / "provision_known_hosts")
        env["PROVISION_HOME"] = str(work / "provision_home")
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        return (
            [
                sys.executable,
                "-m",
                "provision",
                "run",
                str(work / f"bench{facts}.yml"),
                "-i",
                str(work / "hosts.ini"),
                *([] if default_forks else ["-f", str(n)]),
                "--known-hosts",
                "accept-new",
            ],
            env,
        )
    if tool == "pyinfra":
        return (
            [
                paths["pyinfra"],
                str(work / "inventory.py"),
                str(work / "deploy.py"),
                "-y",
                *([] if default_forks else ["--parallel", str(n)]),
            ],
            env,
        )
    facts = "-facts" if tool.endswith("+facts") else ""
    env["ANSIBLE_CONFIG"] = str(work / "ansible.cfg")
    env["ANSIBLE_LOCAL_TEMP"] = str(work / "ansible_tmp")
    return (
        [paths["ansible-playbook"], "-i", str(work / "hosts.ini"), str(work / f"bench{facts}.yml")],
        env,
    )


def reset_hosts(fleet: object) -> None:
    for host in fleet.hosts:  # type: ignore[attr-defined]
        fleet.ns_exec(host, "rm -rf /tmp/bench")  # type: ignore[attr-defined]


def verify(fleet: object) -> bool:
    out = fleet.ns_exec(fleet.hosts[-1], "cat /tmp/bench/small.txt", check=False)  # type: ignore[attr-defined]
    text = out.stdout if hasattr(out, "stdout") else str(out)
    return SMALL_FILE.strip() in (text.decode() if isinstance(text, bytes) else text)


def timed(cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> tuple[float, int]:
    start = time.perf_counter()
    with open(log, "ab") as fh:
        proc = subprocess.run(
            cmd,
            env=env,
            cwd=cwd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=900,
        )
    return time.perf_counter() - start, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="8,32", help="fleet sizes (default 8,32)")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"subset of {','.join(TOOLS)}")
    parser.add_argument(
        "--repeat", type=int, default=1, help="repeat each measurement; median reported"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs, inventories)")
    parser.add_argument(
        "--no-30", dest="thirty", action="store_false", help="skip (b), the 30-task playbook"
    )
    parser.add_argument("--only-30", action="store_true", help="only (b): the 30-task playbook on 8 hosts")
    parser.add_argument(
        "--default-forks",
        action="store_true",
        help="no -f/--parallel: provision and pyinfra with their own default parallelism",
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        print(
            "needs root: the benchmark starts an SSH test fleet (network namespaces)",
            file=sys.stderr,
        )
        return 2
    from fleet import Fleet

    paths = {
        "pyinfra": find_tool("pyinfra", "PYINFRA"),
        "ansible-playbook": find_tool("ansible-playbook", "ANSIBLE_PLAYBOOK"),
    }
    tools = [t for t in args.tools.split(",") if t]
    for tool in list(tools):
        need = (
            "pyinfra"
            if tool == "pyinfra"
            else "ansible-playbook"
            if tool.startswith("ansible")
            else None
        )
        if need and not paths[need]:
            print(
                f"skipping {tool}: {need} not found (pip install pyinfra ansible-core, or set "
                f"{'PYINFRA' if need == 'pyinfra' else 'ANSIBLE_PLAYBOOK'})",
                file=sys.stderr,
            )
            tools.remove(tool)
    rows: list[tuple[int, str, float, float, int]] = []
    all_series: list[Series] = []
    rows30: list[tuple[int, str, float, float, int]] = []
    base = Path(tempfile.mkdtemp(prefix="provision-bench-"))
    sizes = [8] if args.only_30 else [int(s) for s in args.sizes.split(",") if s]
    if args.thirty and 8 not in sizes:
        sizes.insert(0, 8)  # (b) runs on the 8-host fleet
    for n in sizes:
        fleet = Fleet(n).start()
        try:
            work = base / f"n{n}"
            work.mkdir()
            write_files(work, fleet, n)
            if not args.only_30:
                series = run_rounds(work, fleet, n, tools, paths, args.repeat, args.default_forks)
                all_series += series
                rows += [s.row() for s in series]
            if args.thirty and n == 8:
                rows30 += run_thirty(work, fleet, n, paths, args.repeat)
        finally:
            fleet.stop()
    print_table(rows)
    print_rounds(all_series)
    print_thirty(rows30)
    print_goals(rows, rows30)
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"work dir: {base}")
    return 0 if all(r[4] == 0 for r in rows) else 1


def hosts_cpu(fleet: object) -> float:
    """CPU seconds the hosts spent so far: each host's sshd listener with every session it has
    reaped (sshd, the login shell, what the tool ran). Read before and after a run."""
    ticks = 0
    for host in fleet.hosts:  # type: ignore[attr-defined]
        if host.sshd is None:
            continue
        fields = Path(f"/proc/{host.sshd.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class Series:
    """One tool at one fleet size: every round's first and no-change run."""

    hosts: int
    tool: str
    first: list[float] = field(default_factory=list)
    second: list[float] = field(default_factory=list)
    controller_cpu: list[float] = field(default_factory=list)  # both runs of a round
    hosts_cpu: list[float] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)

    def row(self) -> tuple[int, str, float, float, int]:
        return (self.hosts, self.tool, statistics.median(self.first), statistics.median(self.second),
                max(self.codes))  # fmt: skip


def run_rounds(
    work: Path, fleet: object, n: int, tools: list[str], paths: dict[str, str | None], repeat: int,
    default_forks: bool,
) -> list[Series]:  # fmt: skip
    """`repeat` rounds; in each, every tool's first run then its no-change run, tools in an order
    that rotates round by round (provision, pyinfra / pyinfra, provision ...)."""
    series = {t: Series(n, t) for t in tools}
    commands = {t: command_for(t, work, n, paths, default_forks) for t in tools}  # type: ignore[arg-type]
    for tool in tools:  # warm-up, not counted: host keys recorded, caches and bytecode filled
        reset_hosts(fleet)
        timed(*commands[tool], work, work / f"{tool}.log")
    for i in range(repeat):
        order = tools[i % len(tools):] + tools[: i % len(tools)]
        for tool in order:
            cmd, env = commands[tool]
            log = work / f"{tool}.log"
            s = series[tool]
            reset_hosts(fleet)
            h0 = hosts_cpu(fleet)
            t1, cpu1, c1 = timed_cpu(cmd, env, work, log)
            ok = verify(fleet)
            t2, cpu2, c2 = timed_cpu(cmd, env, work, log)
            time.sleep(0.2)  # the last sessions' sshd exits are reaped
            s.first.append(t1)
            s.second.append(t2)
            s.controller_cpu.append(cpu1 + cpu2)
            s.hosts_cpu.append(hosts_cpu(fleet) - h0)
            s.codes.append(c1 or c2 or (0 if ok else 99))
            s.loads.append(os.getloadavg()[0])
        print(
            f"{n:>3} hosts  round {i + 1}/{repeat}: "
            + ", ".join(f"{t} {series[t].first[-1]:.2f}/{series[t].second[-1]:.2f}s" for t in order)
            + f"  (load {os.getloadavg()[0]:.1f})",
            file=sys.stderr,
            flush=True,
        )
    for s in series.values():
        if max(s.codes):
            print(f"{n} hosts {s.tool}: FAILED (exit {max(s.codes)}, see {work / f'{s.tool}.log'})",
                  file=sys.stderr)  # fmt: skip
    return list(series.values())


def print_rounds(all_series: list[Series]) -> None:
    """The issue's table: medians, min-max, per-round ratios to pyinfra, CPU on both ends."""
    if not all_series:
        return
    print()
    print("| hosts | tool | first run | no-change | vs pyinfra (per-round ratios: median, min-max) "
          "| controller CPU | hosts CPU | load |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for s in all_series:
        ref = next((r for r in all_series if r.hosts == s.hosts and r.tool == "pyinfra"), None)
        ratio = "-"
        if ref is not None and s is not ref:
            firsts = [a / b for a, b in zip(s.first, ref.first, strict=True)]
            seconds = [a / b for a, b in zip(s.second, ref.second, strict=True)]
            ratio = (f"{statistics.median(firsts):.2f}x ({min(firsts):.2f}-{max(firsts):.2f}) / "
                     f"{statistics.median(seconds):.2f}x ({min(seconds):.2f}-{max(seconds):.2f})")  # fmt: skip
        print(
            f"| {s.hosts} | {s.tool} | {statistics.median(s.first):.2f} s ({min(s.first):.2f}-{max(s.first):.2f}) "
            f"| {statistics.median(s.second):.2f} s ({min(s.second):.2f}-{max(s.second):.2f}) | {ratio} "
            f"| {statistics.median(s.controller_cpu):.2f} s | {statistics.median(s.hosts_cpu):.2f} s "
            f"| {min(s.loads):.1f}-{max(s.loads):.1f} |"
        )
    print("(first / no-change; CPU: both runs of a round, medians; load: 1-min average after each round)")


def timed_cpu(cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> tuple[float, float, int]:
    """(wall seconds, controller CPU seconds of the command and its children, exit code)."""
    before = os.times()
    wall, code = timed(cmd, env, cwd, log)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu, code


def run_thirty(
    work: Path, fleet: object, n: int, paths: dict[str, str | None], repeat: int
) -> list[tuple[int, str, float, float, int]]:
    """(b): the 30-task playbook, provision vs ansible-playbook, first and no-change runs.
    The tools alternate in pairs (provision's first + no-change run, then Ansible's, `repeat`
    times), so drifting load hits both alike; medians, their min-max and each pair's ratio."""
    playbook = write_playbook30(work)
    tools = [t for t in ("provision", "ansible") if t != "ansible" or paths["ansible-playbook"]]
    runs: dict[str, dict[str, list[float]]] = {t: {"first": [], "second": [], "cpu": []} for t in tools}
    codes: dict[str, list[int]] = {t: [] for t in tools}
    commands = {}
    for tool in tools:
        cmd, env = command_for(tool, work, n, paths)  # type: ignore[arg-type]
        commands[tool] = ([playbook.as_posix() if c.endswith("bench.yml") else c for c in cmd], env)
    for _ in range(repeat):
        for tool in tools:
            cmd, env = commands[tool]
            log = work / f"thirty-{tool}.log"
            for host in fleet.hosts:  # type: ignore[attr-defined]
                fleet.ns_exec(host, "rm -rf /tmp/b30")  # type: ignore[attr-defined]
            t1, cpu1, c1 = timed_cpu(cmd, env, work, log)
            t2, cpu2, c2 = timed_cpu(cmd, env, work, log)
            runs[tool]["first"].append(t1)
            runs[tool]["second"].append(t2)
            runs[tool]["cpu"].append(cpu1 + cpu2)
            codes[tool].append(c1 or c2)
    out = []
    for tool in tools:
        r = runs[tool]
        out.append((n, tool, statistics.median(r["first"]), statistics.median(r["second"]), max(codes[tool])))
        print(
            f"{n:>3} hosts  30 tasks {tool:<10} first {out[-1][2]:6.2f}s ({min(r['first']):.2f}-{max(r['first']):.2f})"
            f"  no-change {out[-1][3]:6.2f}s ({min(r['second']):.2f}-{max(r['second']):.2f})"
            f"  controller CPU {statistics.median(r['cpu']):.2f}s per pair of runs"
            + ("" if out[-1][4] == 0 else f"  FAILED (see {work / f'thirty-{tool}.log'})"),
            file=sys.stderr,
            flush=True,
        )
    if "ansible" in runs and len(tools) == 2:
        p, a = runs["provision"], runs["ansible"]
        for key in ("first", "second"):
            ratios = [x / y for x, y in zip(p[key], a[key], strict=True)]
            print(
                f"  30 tasks, {key} run, per-pair ratio provision/ansible: median {statistics.median(ratios):.3f}x"
                f" (min {min(ratios):.3f}, max {max(ratios):.3f}, {len(ratios)} pairs)",
                file=sys.stderr,
                flush=True,
            )
    return out


def print_thirty(rows30: list[tuple[int, str, float, float, int]]) -> None:
    if not rows30:
        return
    print()
    print(f"{'hosts':>5}  {'30 tasks':<16} {'first run':>10} {'no-change':>10} {'vs ansible':>11}")
    ref = next((r for r in rows30 if r[1] == "ansible"), None)
    for size, tool, first, second, code in rows30:
        ratio = f"{first / ref[2]:.2f}/{second / ref[3]:.2f}x" if ref and tool != "ansible" else ""
        flag = "" if code == 0 else "  FAILED"
        print(f"{size:>5}  {tool:<16} {first:>9.2f}s {second:>9.2f}s {ratio:>11}{flag}")


def print_goals(
    rows: list[tuple[int, str, float, float, int]], rows30: list[tuple[int, str, float, float, int]]
) -> None:
    """Both goals of issue 11 on two lines, from this run's numbers."""

    def pick(table: list[tuple[int, str, float, float, int]], size: int, tool: str) -> Any:
        return next((r for r in table if r[0] == size and r[1] == tool), None)

    print()
    size = max((r[0] for r in rows), default=0)
    ours, theirs = pick(rows, size, "provision"), pick(rows, size, "pyinfra")
    if ours and theirs:
        print(
            f"(a) 5 steps, {size} hosts: provision / pyinfra = {ours[2] / theirs[2]:.2f}x first, "
            f"{ours[3] / theirs[3]:.2f}x no-change (goal <= 0.50x, issue 23; was 0.60x, issue 11)"
        )
    ours, theirs = pick(rows30, 8, "provision"), pick(rows30, 8, "ansible")
    if ours and theirs:
        print(
            f"(b) 30 tasks, 8 hosts: provision / ansible-playbook = {ours[2] / theirs[2]:.2f}x "
            f"first, {ours[3] / theirs[3]:.2f}x no-change (goal <= {GOAL30:.2f}x)"
        )


def print_table(rows: list[tuple[int, str, float, float, int]]) -> None:
    print()
    print(
        f"{'hosts':>5}  {'tool':<16} {'first run':>10} {'no-change':>10} {'vs pyinfra':>11} {'anchor':>8}"
    )
    for n in sorted({r[0] for r in rows}):
        ref = next((r for r in rows if r[0] == n and r[1] == "pyinfra"), None)
        for size, tool, first, second, code in [r for r in rows if r[0] == n]:
            ratio = ""
            if ref and tool != "pyinfra":
                ratio = f"{first / ref[2]:.2f}/{second / ref[3]:.2f}x"
            anchor = ANCHORS.get((tool, size))
            flag = "" if code == 0 else "  FAILED"
            print(
                f"{size:>5}  {tool:<16} {first:>9.2f}s {second:>9.2f}s {ratio:>11} "
                f"{(f'{anchor:.2f}s' if anchor else ''):>8}{flag}"
            )
    print(
        "(vs pyinfra: first-run ratio / no-change ratio; goal for provision at 32 hosts: <= 0.60x)"
    )


if __name__ == "__main__":
    sys.exit(main())
