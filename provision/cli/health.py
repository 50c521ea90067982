"""`provision health HOST... [--watch SECONDS [--count N]] [--json]`: fleet health in one screen.

Each host's agent reads NVML / nvidia-smi and the kernel log (provision/agent/health.py) and
judges every GPU and the host: healthy, degraded or failing, with the reasons. Here the results
become one table — a row per host (load, memory, data-dir space) followed by a row per GPU
(utilization, memory, temperature, power, clocks and throttle reasons, PCIe link vs max, ECC /
retired pages / remapped rows / Xid, processes) — and the reasons below it.

Exit code: 0 when every host answered and none is failing (degraded is a warning), 1 when a
host is failing or its check failed, 4 when a host is unreachable (and none failed), 130 on
Ctrl-C (the way to end --watch without --count).
"""

from __future__ import annotations

import argparse
import threading
import time
from datetime import datetime
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from provision.cli.common import (
    EXIT_HOST_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    connect_options,
    console,
    emit_json,
    usage_error,
)
from provision.connection.base import Connection, ConnectOptions
from provision.inventory.model import Host
from provision.parallel import HostOutcome
from provision.terminal import add_row

describe = (
    "fleet health in one screen: per GPU utilization, memory, temperature, power, clocks, "
    "throttling, ECC, retired pages, Xid, PCIe, processes; per host load, memory, disk; "
    "healthy / degraded / failing"
)

VERDICT_STYLE = {"healthy": "green", "degraded": "yellow", "failing": "bold red"}
AGENT_TIMEOUT_S = 120.0  # nvidia-smi can hang on a sick GPU; the agent gives it 20 s, dmesg 10 s
# NVML clock-event reason -> a word that fits a table cell
THROTTLE_SHORT = {
    "gpu_idle": "idle",
    "applications_clocks_setting": "app-clocks",
    "sw_power_cap": "pwr-cap",
    "hw_slowdown": "HW-slow",
    "sync_boost": "sync-boost",
    "sw_thermal_slowdown": "SW-therm",
    "hw_thermal_slowdown": "HW-therm",
    "hw_power_brake_slowdown": "pwr-brake",
    "display_clock_setting": "display",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="+",
        metavar="TARGET",
        help="inventory host/group, user@host:port, 'ssh -p PORT user@host', ssh_config alias, localhost",
    )
    parser.add_argument(
        "--watch",
        type=float,
        metavar="SECONDS",
        help="refresh in place every SECONDS until Ctrl-C (connections stay open between refreshes)",
    )
    parser.add_argument(
        "--count", type=int, metavar="N", help="with --watch: stop after N refreshes"
    )
    parser.add_argument(
        "--expect-gpus",
        type=int,
        metavar="N",
        help="fewer visible GPUs than N is failing (a GPU fell off the bus); default: host var expect_gpus",
    )
    parser.add_argument(
        "--no-kernel-log",
        dest="kernel_log",
        action="store_false",
        help="do not read dmesg/journalctl for Xid events",
    )


# -- polling -------------------------------------------------------------------------------------


class HealthPoller:
    """One connection and agent per host, kept open across --watch refreshes; a host whose poll
    fails gets a fresh connection next time. Each host is polled by one thread at a time."""

    def __init__(
        self, hosts: list[Host], options: ConnectOptions, args: argparse.Namespace
    ) -> None:
        self.hosts = hosts
        self.options = options
        self.args = args
        self._open: dict[str, tuple[Connection, Any]] = {}
        self._lock = threading.Lock()

    def request(self, host: Host) -> dict[str, Any]:
        request: dict[str, Any] = {"kernel_log": bool(self.args.kernel_log)}
        expect = self.args.expect_gpus
        if expect is None and host.vars.get("expect_gpus") is not None:
            expect = int(host.vars["expect_gpus"])
        if expect is not None:
            request["expect_gpus"] = expect
        if host.vars.get("data_dir"):
            request["data_dir"] = str(host.vars["data_dir"])
        return request

    def _agent(self, host: Host) -> Any:
        from provision.connection.factory import connect
        from provision.remote.agent import Agent

        with self._lock:
            found = self._open.get(host.name)
        if found is None:
            conn = connect(host, self.options)
            found = (conn, Agent(conn))
            with self._lock:
                self._open[host.name] = found
        return found[1]

    def _drop(self, host: Host) -> None:
        with self._lock:
            found = self._open.pop(host.name, None)
        if found is not None:
            found[0].close()

    def poll_one(self, host: Host) -> dict[str, Any]:
        try:
            return self._agent(host).call("health", self.request(host), timeout=AGENT_TIMEOUT_S)
        except Exception:
            self._drop(host)
            raise

    def poll(self) -> dict[str, HostOutcome[dict[str, Any]]]:
        from provision.parallel import for_each_host

        return for_each_host(self.hosts, self.poll_one, forks=self.args.forks)

    def close(self) -> None:
        for host in list(self.hosts):
            self._drop(host)


def exit_code(outcomes: dict[str, HostOutcome[dict[str, Any]]]) -> int:
    """1 when a host is failing or its check failed, else 4 when one is unreachable, else 0."""
    failing = any(o.ok and (o.value or {}).get("verdict") == "failing" for o in outcomes.values())
    failed = any(not o.ok and not o.unreachable for o in outcomes.values())
    if failing or failed:
        return EXIT_HOST_FAILED
    if any(o.unreachable for o in outcomes.values()):
        return EXIT_UNREACHABLE
    return EXIT_OK


def json_document(outcomes: dict[str, HostOutcome[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "hosts": {
            name: o.value if o.ok else {"error": o.message, "unreachable": o.unreachable}
            for name, o in outcomes.items()
        }
    }


# -- the screen ----------------------------------------------------------------------------------


def _n(value: Any, fmt: str = "{:.0f}") -> str:
    return "—" if value is None else fmt.format(value)


def _gib(nbytes: Any) -> str:
    return "—" if not isinstance(nbytes, (int, float)) else f"{nbytes / 2**30:.1f}"


def _verdict(verdict: str) -> Text:
    return Text(verdict, style=VERDICT_STYLE.get(verdict, "bold red"))


def _gpu_name(name: Any) -> str:
    text = str(name or "?")
    for prefix in ("NVIDIA ", "Tesla ", "GeForce "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return text


def _errors(gpu: dict[str, Any]) -> str:
    """ECC, retired pages, remapped rows and Xid in a few words; "ok" when all are clean."""
    parts = []
    ecc = gpu.get("ecc") or {}
    vol, agg = ecc.get("volatile") or {}, ecc.get("aggregate") or {}
    if vol.get("uncorrected") or vol.get("corrected"):
        parts.append(f"ECC {vol.get('uncorrected') or 0} unc/{vol.get('corrected') or 0} corr")
    elif agg.get("uncorrected"):
        parts.append(f"ECC {agg['uncorrected']} unc (lifetime)")
    if ecc.get("enabled") is False:
        parts.append("ECC off")
    pages = gpu.get("retired_pages") or {}
    retired = (pages.get("single_bit") or 0) + (pages.get("double_bit") or 0)
    if retired or pages.get("pending"):
        parts.append(f"pages {retired}" + (" +pending" if pages.get("pending") else ""))
    rows = gpu.get("remapped_rows") or {}
    if rows.get("failure"):
        parts.append("row remap FAILED")
    elif rows.get("uncorrectable") or rows.get("pending"):
        parts.append(
            f"rows {rows.get('uncorrectable') or 0}" + (" +pending" if rows.get("pending") else "")
        )
    xids = sorted({e.get("xid") for e in gpu.get("xid_events") or [] if e.get("xid") is not None})
    if xids:
        parts.append("Xid " + ",".join(str(x) for x in xids))
    return " · ".join(parts) or "ok"


def _gpu_row(gpu: dict[str, Any]) -> list[Any]:
    mem = gpu.get("memory") or {}
    temp = gpu.get("temperature") or {}
    power = gpu.get("power") or {}
    clocks = gpu.get("clocks") or {}
    pcie = gpu.get("pcie") or {}
    util = gpu.get("utilization") or {}
    reasons = [THROTTLE_SHORT.get(r, r) for r in gpu.get("clock_event_reasons") or []]
    clock = f"{_n(clocks.get('sm_mhz'))}/{_n(clocks.get('max_sm_mhz'))}"
    if reasons:
        clock += " " + ", ".join(reasons)
    link = "—"
    if pcie.get("gen_current") or pcie.get("width_current"):
        link = (
            f"{_n(pcie.get('gen_current'))}x{_n(pcie.get('width_current'))}"
            f"/{_n(pcie.get('gen_max'))}x{_n(pcie.get('width_max'))}"
        )
    procs = gpu.get("processes")
    return [
        "",
        f"{gpu.get('index', '?')} {_gpu_name(gpu.get('name'))}",
        _n(util.get("gpu_pct"), "{:.0f}%"),
        f"{_n((mem.get('used_mib') or 0) / 1024 if mem.get('used_mib') is not None else None, '{:.1f}')}"
        f"/{_n((mem.get('total_mib') or 0) / 1024 if mem.get('total_mib') else None, '{:.0f}')} GiB",
        _n(temp.get("gpu_c"), "{:.0f}°C"),
        f"{_n(power.get('draw_w'))}/{_n(power.get('limit_w'))} W",
        clock,
        link,
        _errors(gpu),
        "?" if procs is None else str(len(procs)),
        _verdict(str(gpu.get("verdict"))),
    ]


def _host_row(name: str, health: dict[str, Any]) -> list[Any]:
    host = health.get("host") or {}
    cpu = host.get("cpu") if isinstance(host.get("cpu"), dict) else {}
    mem = host.get("memory") if isinstance(host.get("memory"), dict) else {}
    data = host.get("data_dir") if isinstance(host.get("data_dir"), dict) else {}
    load = host.get("load_average") or [None]
    cpus = cpu.get("effective_cpus") or cpu.get("usable_cpus")
    gpus = health.get("gpus") or []
    driver = (health.get("nvidia") or {}).get("driver_version")
    device = f"{cpus or '?'} CPUs, " + (
        f"{len(gpus)} GPU(s)\ndriver {driver or '?'}" if gpus else "no GPU"
    )
    memory = (
        f"RAM {_gib(mem.get('effective_available_bytes'))}/{_gib(mem.get('effective_total_bytes'))}G free"
        f"\n{data.get('path') or 'data dir'} {_gib(data.get('free_bytes'))}G free"
    )
    unmatched = (health.get("kernel_log") or {}).get("unmatched_xid") or []
    errors = f"Xid x{len(unmatched)} on GPUs not visible" if unmatched else ""
    return [
        Text(name, style="bold"),
        device,
        f"load {_n(load[0], '{:.2f}')}",
        memory,
        "",
        "",
        "",
        "",
        errors,
        "",
        _verdict(str(host.get("verdict") or health.get("verdict"))),
    ]


def health_screen(
    outcomes: dict[str, HostOutcome[dict[str, Any]]],
    verbose: int = 0,
    footer: str = "",
) -> Group:
    """The table (host rows, GPU rows) and, below it, every reason for a verdict."""
    counts: dict[str, int] = {}
    for o in outcomes.values():
        key = (
            (o.value or {}).get("verdict", "?")
            if o.ok
            else ("unreachable" if o.unreachable else "error")
        )
        counts[key] = counts.get(key, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    title = f"Fleet health · {len(outcomes)} host(s): {summary} · {datetime.now():%H:%M:%S}"
    table = Table(
        title=title, title_justify="left", title_style="bold", pad_edge=False, expand=False
    )
    fixed = {"no_wrap": True, "overflow": "ellipsis"}
    for col, kw in (
        ("HOST", fixed),
        ("DEVICE", fixed),
        ("UTIL/LOAD", dict(fixed, justify="right")),
        ("MEMORY", fixed),
        ("TEMP", dict(fixed, justify="right")),
        ("POWER", dict(fixed, justify="right")),
        ("CLOCK MHz", {}),  # + throttle reasons: may wrap
        ("PCIe", fixed),
        ("ERRORS", {}),  # ECC, retired pages, remapped rows, Xid: may wrap
        ("PROCS", dict(fixed, justify="right")),
        ("VERDICT", fixed),
    ):
        table.add_column(col, **kw)
    lines: list[Text] = []
    notes: dict[str, list[str]] = {}
    for name, o in outcomes.items():
        if not o.ok:
            kind = "unreachable" if o.unreachable else "error"
            add_row(table, Text(name, style="bold"), kind, *[""] * 8, _verdict(kind))
            lines.append(Text(f"{name}: {kind}: {o.message}", style="red"))
            continue
        health = o.value or {}
        add_row(table, *_host_row(name, health))
        for gpu in health.get("gpus") or []:
            add_row(table, *_gpu_row(gpu))
        for reason in health.get("reasons") or []:
            style = "red" if health.get("verdict") == "failing" else "yellow"
            lines.append(Text(f"{name}: {reason}", style=style))
        if not health.get("gpus"):
            reason = (health.get("nvidia") or {}).get("reason") or "no NVIDIA GPU"
            notes.setdefault(f"no GPU: {reason}", []).append(name)
        if verbose:
            for note in (health.get("host") or {}).get("notes") or []:
                if note != (health.get("nvidia") or {}).get("reason"):  # shown as "no GPU"
                    notes.setdefault(note, []).append(name)
            for gpu in health.get("gpus") or []:
                for note in gpu.get("notes") or []:
                    notes.setdefault(f"GPU {gpu.get('index')}: {note}", []).append(name)
    parts: list[Any] = [table, *lines]
    for note, names in notes.items():
        who = (
            ", ".join(names)
            if len(names) <= 4
            else f"{names[0]} … {names[-1]} ({len(names)} hosts)"
        )
        parts.append(Text(f"{who}: {note}", style="dim"))
    if footer:
        parts.append(Text(footer, style="dim"))
    return Group(*parts)


# -- the command ---------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    from provision.inventory.loader import resolve_targets

    if args.watch is not None and not args.watch > 0:
        return usage_error(f"--watch takes a number of seconds > 0, got {args.watch:g}")
    if args.count is not None and args.watch is None:
        return usage_error("--count bounds the refreshes of --watch: give --watch SECONDS too")
    if args.count is not None and args.count < 1:
        return usage_error(f"--count must be >= 1, got {args.count}")
    if args.watch is not None and args.json:
        return usage_error(
            "--json prints one document: run without --watch (and poll from a script) for JSON"
        )
    if args.expect_gpus is not None and args.expect_gpus < 0:
        return usage_error(f"--expect-gpus must be >= 0, got {args.expect_gpus}")
    options = connect_options(args)
    hosts = resolve_targets(args.targets, args.inventory, options)
    poller = HealthPoller(hosts, options, args)
    try:
        if args.watch is None:
            outcomes = poller.poll()
            if args.json:
                emit_json(json_document(outcomes))
            else:
                console.print(health_screen(outcomes, args.verbose))
            return exit_code(outcomes)
        return watch(poller, args.watch, args.count, args.verbose)
    except KeyboardInterrupt as exc:
        if args.watch is not None and not getattr(exc, "outcomes", None):
            console.print("[yellow]stopped[/]")  # --watch: Ctrl-C between refreshes is the way out
        else:
            from provision.cli.common import report_interrupted

            report_interrupted(exc, as_json=args.json)
        return EXIT_INTERRUPTED
    finally:
        poller.close()


def watch(poller: HealthPoller, interval: float, count: int | None, verbose: int) -> int:
    """Refresh every `interval` seconds, `count` times (None: until Ctrl-C). In place on a
    terminal (rich Live); elsewhere (a log, a pipe) each refresh is printed after the last."""
    from rich.live import Live

    rounds = 0
    outcomes: dict[str, HostOutcome[dict[str, Any]]] = {}

    def footer() -> str:
        left = f", {count - rounds} more" if count is not None else ""
        return f"refresh {rounds} every {interval:g} s{left} · Ctrl-C to stop"

    live = Live(console=console, auto_refresh=False) if console.is_terminal else None
    if live is not None:
        live.start()
        live.update(Text(f"polling {len(poller.hosts)} host(s)…"), refresh=True)
    try:
        while count is None or rounds < count:
            started = time.monotonic()
            outcomes = poller.poll()
            rounds += 1
            screen = health_screen(outcomes, verbose, footer())
            if live is not None:
                live.update(screen, refresh=True)
            else:
                console.print(screen)
            if count is not None and rounds >= count:
                break
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
    finally:
        if live is not None:
            live.stop()
    return exit_code(outcomes)
