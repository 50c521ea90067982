#!/usr/bin/env python3
"""Facts benchmark: `provision facts` vs pyinfra (4 facts) vs `ansible -m setup`, same fleet, same run.

    sudo python3 benchmarks/facts_bench.py                      # 8 and 32 hosts, 7 repeats
    sudo python3 benchmarks/facts_bench.py --sizes 8 --repeats 3 --no-ansible
    sudo python3 benchmarks/facts_bench.py --profile            # + where provision's time goes
    sudo python3 benchmarks/facts_bench.py --sizes 32 --repeats 7 --no-ansible   # issue 23's 32-host rows
    sudo python3 benchmarks/facts_bench.py --sizes 8 128 256 --repeats 5 --no-ansible --default-forks
    git archive HEAD | tar -x -C /tmp/before && \
    sudo python3 benchmarks/facts_bench.py --before /tmp/before   # + an older tree, same run

For each fleet size: one discarded warm-up run per tool, then `--repeats` rounds of
[provision warm, pyinfra warm, provision cold, pyinfra cold] in rotating order (noise on a
shared machine hits all), then `ansible all -m setup` on the size given by --ansible-size.
Cold = a first contact: for provision the agent removed from every host, the controller's
known_hosts and its memo of agents on hosts emptied (the controller's cache of built agent
bundles stays: it is built once per provision version); for pyinfra its known_hosts emptied.
`--before DIR` adds the same warm and cold runs of another provision source tree. Wall-clock time of the whole
command, interpreter start-up included; medians reported. Each run's output is checked (every
host answered, with its own hostname) and a run that fails stops the benchmark.

pyinfra gathers server.Hostname, hardware.Memory, server.LinuxDistribution (OS) and
hardware.Cpus. ansible: ANSIBLE_HOST_KEY_CHECKING=False, pipelining on, forks = hosts.
The "values" column counts the leaf values each tool returns per host. After the table, the
per-round ratios (provision / pyinfra in the same round: warm/warm, cold/warm, cold/cold) with
median and min-max, and the load average seen after each round.
Parallelism: one connection per host (`--forks N`, `--parallel N`) unless `--default-forks`:
then neither option is passed and each tool runs with its own default (the 128/256-host rows).

Tools are found through $PYINFRA / $ANSIBLE, then ~/.cache/provision-bench-venv/bin, then PATH:
pyinfra 3.x pins paramiko < 5, so it lives in its own venv (see benchmarks/README.md).
Needs root (the fleet: network namespaces + sshd). Anchors (shared/reference/anchors.md, this
kind of machine): pyinfra 4 facts 0.99 s for 8 hosts, 1.78 s for 32; ansible -m setup 13.3 s
for 8. Goal: provision facts <= 1.0x pyinfra's time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fleet"))
sys.path.insert(0, str(ROOT))

from fleet import Fleet, preflight  # noqa: E402

ANCHORS = {("pyinfra", 8): 0.99, ("pyinfra", 32): 1.78, ("ansible -m setup", 8): 13.3}
PYINFRA_FACTS = ["server.Hostname", "hardware.Memory", "server.LinuxDistribution", "hardware.Cpus"]
VENV_BIN = Path.home() / ".cache" / "provision-bench-venv" / "bin"


@dataclass
class Series:
    tool: str
    hosts: int
    seconds: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)  # 1-min load average after each run
    controller_cpu: list[float] = field(default_factory=list)
    hosts_cpu: list[float] = field(default_factory=list)
    values_per_host: int = 0

    def add(self, sample: tuple[float, float, float, int]) -> None:
        seconds, controller_cpu, hosts_cpu, values = sample
        self.seconds.append(seconds)
        self.controller_cpu.append(controller_cpu)
        self.hosts_cpu.append(hosts_cpu)
        self.values_per_host = values
        self.loads.append(os.getloadavg()[0])

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def find_tool(name: str, env_var: str) -> str | None:
    if os.environ.get(env_var):
        return os.environ[env_var]
    for candidate in (str(VENV_BIN / name), shutil.which(name)):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def children_cpu() -> float:
    """CPU seconds of this process's finished children (the tool under test)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def hosts_cpu(fleet: Fleet) -> float:
    """CPU seconds the hosts spent so far: each host's sshd listener with every session it
    has reaped (the session, the shell, python3 and whatever they ran). On this machine the
    hosts share the controller's cores, so this is time the tools compete for; on real rentals
    it is spent on the hosts, in parallel."""
    ticks = 0
    for host in fleet.hosts:
        assert host.sshd is not None
        fields = Path(f"/proc/{host.sshd.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def leaf_count(value: Any) -> int:
    if isinstance(value, dict):
        return sum(leaf_count(v) for v in value.values())
    if isinstance(value, list):
        return sum(leaf_count(v) for v in value)
    return 1


def base_env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SSH_AUTH_SOCK", None)  # keys from files only, for every tool
    # An installed tool runs from cached bytecode (pip compiles it); this machine's environment
    # turns bytecode writing off, which would make our source-tree run compile every module.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["LC_ALL"] = env["LANG"] = "C.UTF-8"
    env["PROVISION_HOME"] = str(work / "provision-home")
    env["PROVISION_KNOWN_HOSTS"] = str(work / "provision_known_hosts")
    env["PROVISION_USER_KNOWN_HOSTS"] = str(work / "user_known_hosts")  # never the real one
    return env


class Bench:
    def __init__(self, fleet: Fleet, work: Path, pyinfra: str | None, ansible: str | None,
                 tree: Path = ROOT, default_forks: bool = False) -> None:
        self.fleet = fleet
        self.work = work
        self.n = len(fleet.hosts)
        self.pyinfra = pyinfra
        self.ansible = ansible
        self.tree = tree  # the provision source tree under test
        self.default_forks = default_forks  # no --forks / --parallel: each tool's own default
        self.env = base_env(work)
        self.env["PYTHONPATH"] = str(tree)
        self.digests = agent_digests(tree, self.env)
        self.inventory = fleet.write_inventory(work / "hosts.ini")
        self.ssh_config = work / "ssh_config"
        self.ssh_config.write_text("")  # the user's ~/.ssh/config takes no part
        (work / "provision-home").mkdir(exist_ok=True)
        self._write_pyinfra_inventory()
        self.names = {h.name for h in fleet.hosts}
        self.by_address = {h.address: h.name for h in fleet.hosts}

    # -- commands ----------------------------------------------------------------------------
    def provision_cmd(self) -> list[str]:
        return [
            sys.executable, "-m", "provision", "facts", "all", "-i", str(self.inventory),
            "--json", *([] if self.default_forks else ["--forks", str(self.n)]),
            "--ssh-config", str(self.ssh_config),
        ]  # fmt: skip

    def _write_pyinfra_inventory(self) -> None:
        data = {
            "ssh_user": "root",
            "ssh_key": self.fleet.key_file,
            "ssh_config_file": str(self.ssh_config),
            "ssh_known_hosts_file": str(self.work / "pyinfra_known_hosts"),
            "ssh_strict_host_key_checking": "accept-new",  # as ours: record on first contact
        }
        hosts = [(h.address, data) for h in self.fleet.hosts]
        (self.work / "pyinfra_inventory.py").write_text(f"hosts = {hosts!r}\n")
        (self.work / "pyinfra_known_hosts").touch()

    def pyinfra_cmd(self) -> list[str]:
        assert self.pyinfra
        return [
            self.pyinfra, str(self.work / "pyinfra_inventory.py"), "fact", *PYINFRA_FACTS,
            "--json", "-y", *([] if self.default_forks else ["--parallel", str(self.n)]),
        ]  # fmt: skip

    def ansible_cmd(self) -> tuple[list[str], dict[str, str]]:
        assert self.ansible
        env = dict(self.env)
        env.update(
            ANSIBLE_HOST_KEY_CHECKING="False",
            ANSIBLE_PIPELINING="True",
            ANSIBLE_FORKS=str(self.n),
            ANSIBLE_PYTHON_INTERPRETER="auto_silent",
            ANSIBLE_LOCAL_TEMP=str(self.work / "ansible-tmp"),
            ANSIBLE_SSH_CONTROL_PATH_DIR=str(self.work / "ansible-cp"),
            ANSIBLE_SSH_ARGS=(
                "-F /dev/null -C -o ControlMaster=auto -o ControlPersist=60s "
                f"-o UserKnownHostsFile={self.work / 'ansible_known_hosts'}"
            ),
            ANSIBLE_NOCOLOR="1",
        )
        env.pop("ANSIBLE_CONFIG", None)
        return [self.ansible, "all", "-i", str(self.inventory), "-m", "setup", "-o"], env

    # -- running -----------------------------------------------------------------------------
    def _timed(
        self, cmd: list[str], env: dict[str, str], label: str, cwd: Path = ROOT
    ) -> tuple[float, float, float, str]:
        log = self.work / f"{label}.stderr"
        cpu0, hosts0 = children_cpu(), hosts_cpu(self.fleet)
        started = time.perf_counter()
        with open(log, "w") as err:
            proc = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=cwd, timeout=600
            )
        seconds = time.perf_counter() - started
        cpu, host = children_cpu() - cpu0, hosts_cpu(self.fleet) - hosts0
        if proc.returncode != 0:
            raise SystemExit(
                f"{label} exited {proc.returncode}; stderr in {log}:\n{log.read_text()[-2000:]}"
            )
        return seconds, cpu, host, proc.stdout

    def run_provision(self) -> tuple[float, float, float, int]:
        seconds, cpu, host, out = self._timed(self.provision_cmd(), self.env, "provision", self.tree)
        hosts = json.loads(out)["hosts"]
        got = {name: f.get("hostname") for name, f in hosts.items()}
        if got != {n: n for n in self.names}:
            raise SystemExit(f"provision facts: wrong answer {got}")
        return seconds, cpu, host, statistics.median(leaf_count(f) for f in hosts.values())

    def run_pyinfra(self) -> tuple[float, float, float, int]:
        seconds, cpu, host, out = self._timed(self.pyinfra_cmd(), self.env, "pyinfra")
        facts = json.loads(out)
        hostnames = facts.get("server.Hostname") or {}
        if {self.by_address.get(a): h for a, h in hostnames.items()} != {n: n for n in self.names}:
            raise SystemExit(f"pyinfra: wrong answer {hostnames}")
        per_host = [leaf_count([facts[f].get(a) for f in PYINFRA_FACTS]) for a in hostnames]
        return seconds, cpu, host, statistics.median(per_host)

    def run_ansible(self) -> tuple[float, float, float, int]:
        cmd, env = self.ansible_cmd()
        seconds, cpu, host, out = self._timed(cmd, env, "ansible")
        counts = []
        for line in out.splitlines():  # -o: "gpu1 | SUCCESS => {...}" one line per host
            name, _, rest = line.partition(" | ")
            if rest.startswith("SUCCESS"):
                counts.append(leaf_count(json.loads(rest.split("=>", 1)[1])))
        if len(counts) != self.n:
            raise SystemExit(f"ansible: {len(counts)} of {self.n} hosts answered")
        return seconds, cpu, host, statistics.median(counts)

    def make_cold(self) -> None:
        """As before a first contact: no agent of this tree on any host (another tree's stays),
        no recorded host keys, no memo of agents on hosts."""
        folders = " ".join(f"/root/.cache/provision/agent-{d}*" for d in self.digests)
        for host in self.fleet.hosts:
            self.fleet.ns_exec(host, f"rm -rf {folders}")
        Path(self.env["PROVISION_KNOWN_HOSTS"]).unlink(missing_ok=True)
        shutil.rmtree(Path(self.env["PROVISION_HOME"]) / "agent" / "hosts", ignore_errors=True)

    def make_pyinfra_cold(self) -> None:
        (self.work / "pyinfra_known_hosts").write_text("")


def agent_digests(tree: Path, env: dict[str, str]) -> list[str]:
    """The agent folder names (digests) a provision tree uses on hosts."""
    code = (
        "from provision.remote import agent as a\n"
        "try:\n    print(a.agent_digest('core'), a.agent_digest('full'))\n"
        "except TypeError:\n    print(a.agent_digest())"  # trees with one agent folder
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tree, check=True).stdout
    return out.split()


def bench_size(
    fleet: Fleet, args: argparse.Namespace, pyinfra: str | None, ansible: str | None
) -> list[Series]:
    n = len(fleet.hosts)
    with tempfile.TemporaryDirectory(prefix=f"facts-bench-{n}-") as tmp:
        bench = Bench(fleet, Path(tmp), pyinfra, ansible, default_forks=args.default_forks)
        trees = [("", bench)]
        if args.before:
            (Path(tmp) / "before").mkdir()
            trees.append((" before", Bench(fleet, Path(tmp) / "before", None, None, args.before,
                                           args.default_forks)))
        tasks: list[tuple[Series, Any]] = []
        series: list[Series] = []
        for label, b in trees:
            warm = Series(f"provision{label} facts (warm)", n)
            cold = Series(f"provision{label} facts (cold)", n)

            def cold_run(b: Bench = b) -> tuple[float, float, float, int]:
                b.make_cold()
                return b.run_provision()

            tasks += [(warm, b.run_provision), (cold, cold_run)]
            series += [warm, cold]
            b.run_provision()  # warm-up: uploads the agent, records host keys, fills caches
        if pyinfra:
            pyi, pyi_cold = Series("pyinfra (warm)", n), Series("pyinfra (cold)", n)

            def pyinfra_cold() -> tuple[float, float, float, int]:
                bench.make_pyinfra_cold()
                return bench.run_pyinfra()

            tasks += [(pyi, bench.run_pyinfra), (pyi_cold, pyinfra_cold)]
            series += [pyi, pyi_cold]
            bench.run_pyinfra()
        # rotating order, and each warm run right after its own tool's cold one half the time:
        # a warm run always finds its agent in place (cold runs remove only their own tree's)
        for i in range(args.repeats):
            shift = i % len(tasks)
            for target, func in tasks[shift:] + tasks[:shift]:
                target.add(func())
            print(f"  {n} hosts, round {i + 1}/{args.repeats} done (load {os.getloadavg()[0]:.1f})",
                  file=sys.stderr, flush=True)
        if ansible and n == args.ansible_size:
            ans = Series("ansible -m setup", n)
            for i in range(args.ansible_repeats):
                ans.add(bench.run_ansible())
                print(f"  ansible run {i + 1}: {ans.seconds[-1]:.2f}s", file=sys.stderr, flush=True)
            series.append(ans)
        if args.profile:
            profile(bench)
    return series


# -- where provision's time goes -------------------------------------------------------------------
# How the controller starts the agent for `facts` (provision/remote/agent.py), run in its folder.
AGENT_FACTS = "python3 -S ./__main__.py facts"
AGENT_CPU_CALLS = 50
# Runs on the host: CPU (user + system) of N sequential agent `facts` calls, the agent's
# children (nvidia-smi, nvcc ...) included; no sshd, no shell.
_AGENT_CPU = """
import glob, json, os, resource, subprocess, sys
n = int(sys.argv[1])
folder = glob.glob("/root/.cache/provision/agent-*")[0]
cmd = [sys.executable, "-S", os.path.join(folder, "__main__.py"), "facts"]
before = resource.getrusage(resource.RUSAGE_CHILDREN)
for _ in range(n):
    out = subprocess.run(cmd, input=b"{}\\n", stdout=subprocess.PIPE, check=True).stdout
    assert b'"event": "result"' in out, out[-300:]
after = resource.getrusage(resource.RUSAGE_CHILDREN)
user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
print(json.dumps({"user_ms": user / n * 1000, "sys_ms": system / n * 1000,
                  "cpu_ms": (user + system) / n * 1000}))
"""


def agent_cpu_per_call(fleet: Fleet, host: Any, calls: int = AGENT_CPU_CALLS) -> dict[str, float]:
    """Milliseconds of CPU per agent `facts` call on one fleet host (its Debian python3)."""
    out = fleet.ns_exec(host, ["python3", "-c", _AGENT_CPU, str(calls)]).stdout
    return json.loads(out)


def _py_seconds(code: str, env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    return float(out.stdout.strip())


def profile(bench: Bench) -> None:
    """Phases of one warm `provision facts` run, measured one by one in this process."""
    from concurrent.futures import ThreadPoolExecutor

    os.environ.update({k: v for k, v in bench.env.items() if k.startswith("PROVISION_")})
    from provision.connection.base import ConnectOptions
    from provision.connection.ssh import SSHConnection
    from provision.remote.agent import Agent

    env = bench.env
    startup = [
        _py_seconds(
            "import time; t = time.perf_counter(); import provision.cli.main, "
            "provision.cli.facts, provision.connection.ssh, provision.remote.agent; "
            "print(time.perf_counter() - t)",
            env,
        )
        for _ in range(3)
    ]
    bare = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-S", "-c", "pass"], env=env, check=True)
        bare.append(time.perf_counter() - t)

    options = ConnectOptions(ssh_config=str(bench.ssh_config), connect_timeout=10)
    hosts = bench.fleet.provision_hosts()
    conns = [SSHConnection(h, options) for h in hosts]

    def timed(func):
        def run(arg):
            t = time.perf_counter()
            value = func(arg)
            return time.perf_counter() - t, value

        return run

    with ThreadPoolExecutor(len(conns)) as pool:
        cpu0, t0 = time.process_time(), time.perf_counter()
        list(pool.map(timed(lambda c: c._open()), conns))
        connect_wall, connect_cpu = time.perf_counter() - t0, time.process_time() - cpu0

        t0 = time.perf_counter()
        list(pool.map(timed(lambda c: c.run("true")), conns))
        shell_wall = time.perf_counter() - t0
        t0 = time.perf_counter()
        list(pool.map(timed(lambda c: c.run("python3 -c pass")), conns))
        python_wall = time.perf_counter() - t0
        t0 = time.perf_counter()
        list(pool.map(timed(lambda c: Agent(c).call("ping")), conns))
        ping_wall = time.perf_counter() - t0
        cpu0, t0 = time.process_time(), time.perf_counter()
        facts = list(pool.map(timed(lambda c: Agent(c).call("facts")), conns))
        facts_wall, facts_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    for c in conns:
        c.close()
    inside = [f["seconds"] for _, f in facts]
    one = bench.fleet.hosts[0]
    single = bench.fleet.ns_exec(
        one,
        f"cd /root/.cache/provision/agent-* && s=$(date +%s%N) && echo '{{}}' | {AGENT_FACTS} "
        ">/dev/null && echo $(( ($(date +%s%N) - s) / 1000000 ))",
    ).stdout.strip()
    per_call = agent_cpu_per_call(bench.fleet, one)
    print(f"\nWhere a warm `provision facts` on {bench.n} hosts spends its time:")
    rows = [
        ("controller: interpreter start (python -S)", f"{statistics.median(bare):.3f} s"),
        ("controller: importing provision + fabric/paramiko/rich", f"{statistics.median(startup):.3f} s"),
        (f"connect {bench.n} hosts in parallel (TCP + SSH handshake + auth)",
         f"{connect_wall:.3f} s wall, {connect_cpu:.3f} s controller CPU"),
        ("`true` on every host (one channel, no Python)", f"{shell_wall:.3f} s wall"),
        ("`python3 -c pass` on every host", f"{python_wall:.3f} s wall"),
        ("agent `ping` on every host (Python + agent import)", f"{ping_wall:.3f} s wall"),
        ("agent `facts` on every host", f"{facts_wall:.3f} s wall, {facts_cpu:.3f} s controller CPU"),
        ("  facts gathering inside the agent (median per host)", f"{statistics.median(inside):.3f} s"),
        ("  one agent `facts` alone on one host, no SSH", f"{single} ms"),
        (f"  agent CPU per `facts` call ({AGENT_CPU_CALLS} in a row on one host, no SSH)",
         f"{per_call['cpu_ms']:.1f} ms (user {per_call['user_ms']:.1f}, sys {per_call['sys_ms']:.1f})"),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


# -- output --------------------------------------------------------------------------------------
def print_table(all_series: list[Series]) -> None:
    pyinfra_median = {s.hosts: s.median for s in all_series if s.tool == "pyinfra (warm)"}
    pyinfra_cold = {s.hosts: s.median for s in all_series if s.tool == "pyinfra (cold)"}
    header = (
        "hosts",
        "tool",
        "runs",
        "median",
        "min-max",
        "vs pyinfra warm",
        "vs pyinfra cold",
        "anchor",
        "vs anchor",
        "controller CPU",
        "hosts CPU",
        "values/host",
    )
    rows = []
    for s in all_series:
        anchor_key = (
            ("pyinfra", s.hosts)
            if s.tool.startswith(("provision", "pyinfra"))
            else (s.tool, s.hosts)
        )
        anchor = ANCHORS.get(anchor_key)
        ref = pyinfra_median.get(s.hosts)
        rows.append((
            str(s.hosts), s.tool, str(len(s.seconds)), f"{s.median:.2f} s",
            f"{min(s.seconds):.2f}-{max(s.seconds):.2f}",
            f"{s.median / ref:.2f}x" if ref else "-",
            f"{s.median / pyinfra_cold[s.hosts]:.2f}x" if s.hosts in pyinfra_cold else "-",
            f"{anchor:.2f} s" if anchor else "-",
            f"{s.median / anchor:.2f}x" if anchor else "-",
            f"{statistics.median(s.controller_cpu):.2f} s",
            f"{statistics.median(s.hosts_cpu):.2f} s",
            str(int(s.values_per_host)),
        ))  # fmt: skip
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    print_round_ratios(all_series)
    print(
        "\nanchors: pyinfra gathering 4 facts (provision rows compare with it), `ansible -m setup`;"
    )
    print("shared/reference/anchors.md. vs pyinfra warm/cold = median / pyinfra's warm/cold median")
    print("in this run (pyinfra cold: its known_hosts emptied first).")
    print("CPU: medians of CPU seconds used by the tool's process tree (controller) and by all")
    print("hosts' sshd sessions (hosts) -- on this machine both come out of the same cores.")
    print("ansible's ControlPersist masters outlive the run, so its CPU columns undercount.")


def print_round_ratios(all_series: list[Series]) -> None:
    """provision / pyinfra within each round (the runs of a round are minutes apart at most)."""
    lines = []
    for s in all_series:
        if not s.tool.startswith("provision"):
            continue
        for ref_name in ("pyinfra (warm)", "pyinfra (cold)"):
            ref = next((r for r in all_series if r.hosts == s.hosts and r.tool == ref_name), None)
            if ref is None or len(ref.seconds) != len(s.seconds):
                continue
            ratios = [a / b for a, b in zip(s.seconds, ref.seconds, strict=True)]
            lines.append(f"| {s.hosts} | {s.tool} / {ref_name} | {statistics.median(ratios):.2f}x "
                         f"| {min(ratios):.2f}-{max(ratios):.2f} | {min(s.loads):.1f}-{max(s.loads):.1f} |")  # fmt: skip
    if lines:
        print("\n| hosts | per-round ratio | median | min-max | load |")
        print("|---|---|---|---|---|")
        print("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--repeats", type=int, default=7, help="rounds per size (default 7)")
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="also run another provision source tree (e.g. `git archive HEAD`)")
    parser.add_argument("--ansible-size", type=int, default=8)
    parser.add_argument("--ansible-repeats", type=int, default=3)
    parser.add_argument("--no-ansible", action="store_true")
    parser.add_argument("--no-pyinfra", action="store_true")
    parser.add_argument("--profile", action="store_true", help="also break down provision's time")
    parser.add_argument("--default-forks", action="store_true",
                        help="no --forks/--parallel: each tool with its own default parallelism")
    parser.add_argument("--json-out", metavar="FILE", help="also write the raw timings here")
    args = parser.parse_args()
    for name in ("repeats", "ansible_repeats"):
        if not 1 <= getattr(args, name) <= 50:
            parser.error(f"--{name.replace('_', '-')} must be 1..50")
    reason = preflight()
    if reason:
        print(f"cannot start the test fleet: {reason}", file=sys.stderr)
        return 2
    pyinfra = None if args.no_pyinfra else find_tool("pyinfra", "PYINFRA")
    ansible = None if args.no_ansible else find_tool("ansible", "ANSIBLE")
    for name, path in (("pyinfra", pyinfra), ("ansible", ansible)):
        print(f"{name}: {path or 'not found, skipped (see benchmarks/README.md)'}", file=sys.stderr)

    results: list[Series] = []
    for size in args.sizes:
        with Fleet(size) as fleet:
            print(f"{size} hosts up in {fleet.start_seconds:.2f}s", file=sys.stderr, flush=True)
            results += bench_size(fleet, args, pyinfra, ansible)
    print()
    print_table(results)
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps([s.__dict__ | {"median": s.median} for s in results], indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
