"""`provision facts TARGET...`: a complete picture of one or thirty rented servers."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from provision.cli.common import (
    connect_options,
    console,
    emit_json,
    exit_code_for,
)
from provision.connection.factory import connect
from provision.inventory.loader import resolve_targets
from provision.inventory.model import Host
from provision.parallel import for_each_host
from provision.remote.agent import Agent
from provision.remote.facts import gather_facts
from provision.terminal import add_row, markup, text

describe = "gather facts (GPUs, driver/CUDA, CPU, memory, disks, Python, torch) from hosts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="+",
        metavar="TARGET",
        help="inventory host/group, user@host:port, 'ssh -p PORT user@host', ssh_config alias, localhost",
    )


def run(args: argparse.Namespace) -> int:
    options = connect_options(args)
    hosts = resolve_targets(args.targets, args.inventory, options)

    def work(host: Host) -> dict[str, Any]:
        with connect(host, options) as conn:
            return gather_facts(Agent(conn))

    outcomes = for_each_host(hosts, work, forks=args.forks)
    if args.json:
        emit_json(
            {
                "hosts": {
                    name: o.value if o.ok else {"error": o.message, "unreachable": o.unreachable}
                    for name, o in outcomes.items()
                }
            }
        )
    else:
        for name, o in outcomes.items():
            if o.ok:
                console.print(facts_table(name, o.value or {}))
            else:
                kind = "unreachable" if o.unreachable else "failed"
                console.print(markup("[bold red]{}: {}[/]: {}", name, kind, o.message))
    return exit_code_for(outcomes)


def _gib(n: Any) -> str:
    return f"{n / 2**30:.1f} GiB" if isinstance(n, (int, float)) else "?"


def _get(d: Any, *path: str, default: Any = None) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return default
        d = d[key]
    return d


def _where(os_: dict[str, Any]) -> str:
    """Container / VM / bare metal, as the agent detected it."""
    parts = []
    if _get(os_, "container", "is_container"):
        parts.append(f"container ({_get(os_, 'container', 'type') or '?'})")
    if _get(os_, "virtualization", "is_vm"):
        parts.append(f"VM ({_get(os_, 'virtualization', 'hypervisor') or '?'})")
    return " in ".join(parts) or "bare metal"


def facts_table(name: str, facts: dict[str, Any]) -> Table:
    """One screen per host: the lines a user checks before training (keys: docs/facts.md)."""
    table = Table(
        title=text(f"{name} — {facts.get('hostname', '?')}"),  # the host's words: text
        show_header=False,
        title_justify="left",
        expand=False,
        pad_edge=False,
    )
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    os_ = facts.get("os") or {}
    add_row(table,
        "OS", f"{os_.get('pretty_name', '?')} · kernel {os_.get('kernel', '?')} · {_where(os_)}"
    )
    cpu = facts.get("cpu") or {}
    mem = facts.get("memory") or {}
    add_row(table, "CPU", f"{cpu.get('model', '?')} · {cpu.get('effective_cpus', '?')} usable cores")
    add_row(table,
        "Memory",
        f"{_gib(mem.get('effective_total_bytes'))} usable, "
        f"{_gib(mem.get('effective_available_bytes'))} free",
    )
    nv = facts.get("nvidia") or {}
    if nv.get("driver_version"):
        add_row(table,
            "Driver", f"{nv['driver_version']} (CUDA ≤ {nv.get('cuda_driver_version') or '?'})"
        )
    gpus = facts.get("gpus")
    for g in gpus if isinstance(gpus, list) else []:
        total_mib = _get(g, "memory", "total_mib")
        add_row(table,
            f"GPU {g.get('index')}",
            f"{g.get('name')} · cc {g.get('compute_capability')} · "
            f"{_gib(total_mib * 2**20 if total_mib is not None else None)} · "
            f"PCIe gen{_get(g, 'pcie', 'gen_current', default='?')}"
            f"x{_get(g, 'pcie', 'width_current', default='?')}",
        )
    if not gpus:
        reason = nv.get("reason") or nv.get("error") or "no NVIDIA GPU found"
        add_row(table, "GPU", f"none ({reason})")
    dd = facts.get("data_dir") or {}
    if dd.get("path"):
        add_row(table,
            "Data dir",
            f"{dd['path']} · {_gib(dd.get('free_bytes'))} free · {dd.get('fs_type', '?')}"
            f"{' · NETWORK' if dd.get('network') else ''}",
        )
    else:
        add_row(table, "Data dir", f"none ({dd.get('reason') or dd.get('error') or '?'})")
    for label, value in _network_rows(facts.get("network")):
        add_row(table, label, value)
    py = _get(facts, "python", "agent") or {}
    add_row(table, "Python", f"{py.get('version', '?')} ({py.get('executable', '?')})")
    torch = facts.get("torch") or {}
    if torch.get("version"):
        add_row(table,
            "torch",
            f"{torch['version']} · CUDA {torch.get('cuda') or '-'} · "
            f"cuDNN {torch.get('cudnn') or '-'}",
        )
    else:
        add_row(table, "torch", f"not installed ({torch.get('reason') or 'not importable'})")
    return table


def _network_rows(net: Any) -> list[tuple[str, str]]:
    """Interfaces with an address (loopback left out), RDMA ports, NCCL settings already made."""
    if not isinstance(net, dict) or "interfaces" not in net:
        return [("Network", f"? ({_get(net, 'error', default='not gathered')})")]
    default = {r.get("iface") for r in net.get("default_routes") or []}
    rows = []
    for i in net["interfaces"] or []:
        addrs = [f"{a['address']}/{a['prefix']}" for a in i.get("ipv4") or []]
        addrs += [f"{a['address']}/{a['prefix']}" for a in i.get("ipv6") or [] if a.get("scope") == "global"]
        if i.get("kind") == "loopback" or not addrs:
            continue
        speed = f" · {i['speed_mbps'] / 1000:g} Gb/s" if i.get("speed_mbps") else ""
        rows.append((f"Net {i['name']}", f"{', '.join(addrs)} · {i.get('kind')}{speed} · MTU {i.get('mtu')}"
                     f"{' · ' + i['operstate'] if i.get('operstate') not in ('up', 'unknown') else ''}"
                     f"{' · default route' if i['name'] in default else ''}"))  # fmt: skip
    for dev in net.get("ib_devices") or []:
        for port in dev.get("ports") or []:
            rows.append((f"RDMA {dev['name']}/{port.get('port')}",
                         f"{port.get('state')} · {port.get('rate') or '?'} · {port.get('link_layer') or '?'}"
                         f"{' → ' + port['netdev'] if port.get('netdev') else ''}"))  # fmt: skip
    loaded = [m for m, on in (net.get("gpudirect_rdma") or {}).items() if on]
    if net.get("ib_devices") or loaded:
        rows.append(("GPUDirect", ", ".join(loaded) + " loaded" if loaded else "no peer-memory module loaded"))
    if net.get("nccl_env"):
        rows.append(("NCCL env", " ".join(f"{k}={v}" for k, v in net["nccl_env"].items())))
    return rows
