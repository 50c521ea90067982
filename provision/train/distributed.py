"""`provision train TARGET... --distributed`: one torch.distributed job across the hosts.

Every host gets the same run id and code and runs `python -m torch.distributed.run` (torchrun)
under the run's detached supervisor, so the issue-12 model holds: the run survives the
controller, `runs`/`logs`/`attach` see it on each host, the sampler watches each host.

    torchrun --nnodes N --node-rank I --nproc-per-node P --rdzv-backend c10d
             --rdzv-endpoint MASTER_ADDR:PORT --rdzv-id RUN_ID --rdzv-conf is_host=0|1
             --local-addr THIS_HOST'S_FABRIC_ADDR --max-restarts 0 --log-dir RUN_DIR/ranks --tee 3
             train.py ARGS...

The fabric (provision/distributed/fabric.py) says which address and port the hosts meet on and
which interface NCCL/gloo use. `is_host` is explicit: the master host serves the rendezvous store
(torch's guess from the hostname fails where names don't resolve). `--local-addr` is each host's
fabric address: rank 0's becomes the workers' MASTER_ADDR, so it must be one the others reach.
With c10d, torch orders the nodes itself (`--node-rank` is passed for the static case and the
logs); the global ranks in the log prefixes (`[rankN]:`) are the real ones.

Everything here builds argv lists and env dicts: the agent starts them without a shell.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from provision.errors import ConfigError

TORCHRUN = ["python", "-m", "torch.distributed.run"]  # `python`: the run's interpreter (supervisor)
PREFIX_TEMPLATE = "[rank${rank}]:"  # torchrun's per-line prefix in the tee'd log (global rank)
RANK_LINE = re.compile(r"^\[rank(\d+)\]:(.*)$")
JOIN_TIMEOUT_S = 300  # a host that never joins: torchrun gives up after this (a bounded wait)
STOP_GRACE_S = 5.0  # one rank failed / Ctrl-C: TERM, then KILL after this


@dataclass
class DistributedOptions:
    nproc_per_node: str | None = None  # None / "auto": GPUs per host from facts, 1 without GPUs
    master: str | None = None  # HOST[:PORT]
    iface: str | None = None
    allreduce: bool = True  # measure the all-reduce bandwidth between the hosts first
    allreduce_max_age_s: float = 6 * 3600.0  # reuse a measurement between the same hosts this recent (allreduce_memo.REUSE_S)
    grad_bytes: int | None = None  # when the instrumentation can't count the model's parameters
    join_timeout_s: int = JOIN_TIMEOUT_S


@dataclass
class NodePlan:
    """What one host runs: its node rank, process count, the argv and the env it adds."""
    host: str
    node_rank: int
    nproc: int
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)


def parse_nproc(text: str | None) -> str | None:
    """`--nproc-per-node N|auto` -> "N", or None for auto; a clear error otherwise."""
    if text is None or str(text).strip().lower() == "auto":
        return None
    value = str(text).strip()
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"--nproc-per-node {text!r}: give a positive number of processes per host, or auto")
    return value


def nproc_for(requested: str | None, facts: dict[str, Any]) -> int:
    """Processes on a host: the number asked, else one per GPU the facts list, 1 on a CPU host."""
    if requested is not None:
        return int(requested)
    gpus = facts.get("gpus")
    return max(1, len(gpus)) if isinstance(gpus, list) else 1


def check_same_torch(torches: dict[str, dict[str, Any]]) -> None:
    """Refuse hosts whose training interpreters import different torch versions or builds:
    ranks of different builds fail in the first collective, or worse, compute differently."""
    missing = {h: t for h, t in torches.items() if not t.get("installed")}
    if missing:
        lines = "\n".join(f"  {h}: {t.get('python')}: {t.get('error') or 'no torch'}" for h, t in missing.items())
        raise ConfigError("provision train --distributed: torch is not importable on every host:\n" + lines
                          + "\nInstall the same torch on each (`provision install HOST...`), or pass --python.")

    def build(t: dict[str, Any]) -> tuple[str, str]:
        return str(t.get("version")), str(t.get("cuda") or t.get("hip") or "cpu")

    if len({build(t) for t in torches.values()}) <= 1:
        return
    lines = "\n".join(f"  {h}: torch {t.get('version')} (CUDA {t.get('cuda') or '-'}"
                      + (f", HIP {t['hip']}" if t.get("hip") else "") + f") in {t.get('python')}"
                      for h, t in torches.items())
    raise ConfigError("provision train --distributed: the hosts' torch versions or CUDA builds differ, "
                      "and ranks of different builds can't train together:\n" + lines
                      + "\nInstall one version on every host (`provision install HOSTS... --torch VERSION`) "
                        "or point --python at matching environments; nothing was started.")


def user_program(command: list[str]) -> list[str]:
    """The part of `python train.py ARGS` torchrun takes: `train.py ARGS`, `-m pkg ARGS`, or
    `--no-python CMD ARGS` for a non-Python command."""
    if not command:
        raise ConfigError("provision train --distributed: give the command after --, e.g. -- python train.py")
    first = command[0].rsplit("/", 1)[-1]
    if not re.match(r"^python(3(\.\d+)?)?$", first):
        return ["--no-python", *command]
    rest = command[1:]
    if not rest:
        raise ConfigError("provision train --distributed: `python` needs a script or -m MODULE to run on every rank")
    if rest[0] == "-m":
        if len(rest) < 2:
            raise ConfigError("provision train --distributed: `python -m` needs a module name")
        return ["-m", *rest[1:]]
    if rest[0].startswith("-"):
        raise ConfigError(f"provision train --distributed: interpreter option {rest[0]!r} before the script: "
                          "torchrun starts the ranks itself; set PYTHON* variables with -e instead")
    return rest


def endpoint(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def torchrun_argv(command: list[str], *, nnodes: int, node_rank: int, nproc: int, master_addr: str,
                  master_port: int, run_id: str, is_host: bool, local_addr: str, log_dir: str,
                  join_timeout_s: int = JOIN_TIMEOUT_S) -> list[str]:
    """The argv one host runs (a list: the agent starts it without a shell)."""
    return [
        *TORCHRUN,
        f"--nnodes={nnodes}", f"--node-rank={node_rank}", f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint(master_addr, master_port)}", f"--rdzv-id={run_id}",
        f"--rdzv-conf=is_host={1 if is_host else 0},join_timeout={int(join_timeout_s)}",
        f"--local-addr={local_addr}", "--max-restarts=0", f"--log-dir={log_dir}", "--tee=3",
        *user_program(command),
    ]


def plan_nodes(command: list[str], fabric: Any, facts: dict[str, dict[str, Any]], nprocs: dict[str, int],
               run_id: str, run_dirs: dict[str, str], join_timeout_s: int = JOIN_TIMEOUT_S) -> list[NodePlan]:
    """One NodePlan per host, node ranks in the fabric's host order (the master first)."""
    hosts = list(getattr(fabric, "hosts", None) or facts)
    plans = []
    for rank, host in enumerate(hosts):
        env = dict(fabric.env(host))
        env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = PREFIX_TEMPLATE
        argv = torchrun_argv(command, nnodes=len(hosts), node_rank=rank, nproc=nprocs[host],
                             master_addr=fabric.master_addr, master_port=fabric.master_port, run_id=run_id,
                             is_host=host == fabric.master_host, local_addr=host_addr(fabric, facts, host),
                             log_dir=f"{run_dirs[host].rstrip('/')}/ranks", join_timeout_s=join_timeout_s)
        plans.append(NodePlan(host, rank, nprocs[host], argv, env))
    return plans


def host_addr(fabric: Any, facts: dict[str, dict[str, Any]], host: str) -> str:
    """This host's own address on the fabric's network (the one the others reach it on)."""
    import ipaddress

    addrs = getattr(fabric, "addrs", None) or {}
    if host in addrs:
        return str(addrs[host])
    if host == fabric.master_host:
        return str(fabric.master_addr)
    iface = fabric.ifaces.get(host)
    try:
        network = ipaddress.ip_network(str(getattr(fabric, "network", "")), strict=False)
    except ValueError:
        network = None
    entries = ((facts.get(host) or {}).get("network") or {}).get("interfaces") or []
    for entry in entries:
        if entry.get("name") != iface:
            continue
        v4 = [a.get("address") for a in entry.get("ipv4") or [] if a.get("address")]
        inside = [a for a in v4 if network is not None and ipaddress.ip_address(a) in network]
        if inside or v4:
            return str((inside or v4)[0])
    raise ConfigError(f"provision train --distributed: {host} has no IPv4 address on {iface} "
                      f"(the fabric's interface there); give --iface/--master for a network every host is on")


def split_rank_line(line: str) -> tuple[int | None, str]:
    """`[rank3]:text` -> (3, "text"); torchrun's own lines -> (None, line)."""
    m = RANK_LINE.match(line)
    return (int(m.group(1)), m.group(2)) if m else (None, line)


def label_lines(host: str, lines: list[str]) -> list[str]:
    """Log lines as shown: `HOST/rankN | text`, torchrun's own `HOST | text`."""
    out = []
    for line in lines:
        rank, text = split_rank_line(line)
        out.append(f"{host}/rank{rank} | {text}" if rank is not None else f"{host} | {text}")
    return out


class FailureWatch:
    """Shared by the per-host follow threads: the first host whose run failed makes every other
    host stop its ranks (from that host's own thread and connection)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.failed: list[str] = []
        self.stopped: set[str] = set()

    def ended(self, host: str, state: str | None) -> None:
        if state == "failed":
            with self._lock:
                self.failed.append(host)

    def should_stop(self, host: str) -> bool:
        with self._lock:
            if self.failed and host not in self.failed and host not in self.stopped:
                self.stopped.add(host)
                return True
            return False
