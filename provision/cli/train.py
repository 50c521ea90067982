"""`provision train TARGET... [options] -- COMMAND [ARGS...]`: run your training on the hosts,
detached (it survives this command), follow its log, then diagnose and report it."""

from __future__ import annotations

import argparse
from typing import Any

from provision.cli import train_distributed
from provision.cli.common import (
    EXIT_HOST_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    connect_options,
    console,
    emit_json,
    exit_code_for,
)
from provision.connection.factory import connect
from provision.errors import ConfigError
from provision.inventory.loader import resolve_targets
from provision.inventory.model import Host
from provision.parallel import for_each_host
from provision.report.render import SEVERITY_STYLE
from provision.terminal import markup, text
from provision.train.launch import HostTrainer, TrainSpec, new_run_id
from provision.train.live import RunView
from provision.train.options import (
    env_from,
    parse_duration,
    parse_env,
    stop_command_hint,
    with_exit_codes,
)

describe = "run a training command on hosts, detached; follow it, diagnose why it is slow, report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "provision train TARGET... [options] -- COMMAND [ARGS...]"
    parser.add_argument("targets", nargs="+", metavar="TARGET")
    parser.add_argument("--dir", default=".", help="folder with the code to ship (default: here); honours .gitignore")
    parser.add_argument("--no-code", action="store_true", help="ship nothing; run in --workdir (or the home dir)")
    parser.add_argument("--workdir", help="where the code goes and the command runs on the host "
                        "(default <data_dir>/runs/RUN_ID/code)")
    parser.add_argument("--python", help="interpreter on the host (default: the managed env's, else python3 on PATH)")
    parser.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE", help="run environment; repeatable")
    parser.add_argument("--env-from", action="append", default=[], metavar="VAR",
                        help="pass this controller env var's value (a secret: sent over stdin, never shown)")
    parser.add_argument("--detach", action="store_true", help="start and return at once")
    parser.add_argument("--no-instrument", action="store_true", help="no sitecustomize timing of the DataLoader")
    parser.add_argument("--sample-interval", type=float, default=1.0, metavar="S", help="sampler interval (default 1 s)")
    parser.add_argument("--stop-when-idle", metavar="DURATION",
                        help="after the job ends and the GPUs stay idle this long, run the host's stop_command var")
    parser.add_argument("--max-code-size", type=float, default=256, metavar="MB", help="code size guard (default 256 MB)")
    parser.add_argument("--run-id", help="name the run (default: time-based)")
    parser.add_argument("--out", default="provision-reports", metavar="DIR", help="where reports are written")
    parser.add_argument("--no-live", action="store_true", help="plain prefixed log lines, no live table")
    train_distributed.add_arguments(parser)
    with_exit_codes(parser)


def spec_from_args(args: argparse.Namespace) -> TrainSpec:
    command = list(getattr(args, "command_argv", None) or [])
    if not command:
        raise ConfigError("provision train: give the command after --, e.g. `provision train gpu1 -- python train.py`")
    if args.sample_interval <= 0:
        raise ConfigError(f"--sample-interval must be > 0 seconds, got {args.sample_interval:g}")
    if args.max_code_size <= 0:
        raise ConfigError(f"--max-code-size must be > 0 MB, got {args.max_code_size:g}")
    return TrainSpec(
        command=command, code_dir=None if args.no_code else args.dir, workdir=args.workdir,
        python=args.python, env=parse_env(args.env), secret_env=env_from(args.env_from),
        instrument=not args.no_instrument, interval=args.sample_interval,
        stop_when_idle=parse_duration(args.stop_when_idle, "--stop-when-idle") if args.stop_when_idle else None,
        max_code_bytes=int(args.max_code_size * 1e6), run_id=args.run_id or new_run_id(),
    )


def finish(trainer: HostTrainer, run: dict[str, Any], out: str) -> dict[str, Any]:
    """After the run ended: profile -> findings -> report (written, recorded) -> the JSON entry."""
    from provision.report import history
    from provision.report.document import now_iso, price_of
    from provision.train.diagnosis import diagnose_run
    from provision.train.report import build_document, run_entry, write

    summary = trainer.summary(run["run_id"])
    bench = history.previous(trainer.host, now_iso(), train=False)
    findings = diagnose_run(summary, trainer.facts, bench, trainer.host)
    doc = build_document(trainer.host, summary["run"], summary, findings, trainer.facts,
                         price_of(trainer.connection.host))
    paths = write(doc, out)
    history.record(doc)
    return run_entry(summary["run"], summary, findings, paths)


def follow_and_finish(trainer: HostTrainer, run: dict[str, Any], view: RunView, out: str,
                      offset: int = 0) -> dict[str, Any]:
    host = trainer.host
    view.update(host, run_id=run["run_id"], state=run.get("state"), started=run.get("started"))
    def tick() -> None:
        if not view.live:
            return
        from provision.train.report import profile

        s = trainer.summary(run["run_id"], points=1, lines=0)
        view.update(host, state=s["run"].get("state"), **profile(s))

    final = trainer.follow_to_end(run["run_id"], on_lines=lambda lines: view.lines(host, lines), offset=offset,
                                  on_tick=tick, call_seconds=5.0 if view.live else 300.0)
    view.update(host, state=final.get("state"))
    return finish(trainer, final, out)


def report_entries(outcomes: dict[str, Any], as_json: bool) -> int:
    """Print each host's run and findings (or the --json document); the exit code."""
    failed = False
    for name, o in outcomes.items():
        if not o.ok:
            failed = True
            console.print(markup("[bold red]{}: {}[/]: {}", name, "unreachable" if o.unreachable else "failed", o.message))
            continue
        e = o.value
        if e.get("state") in ("failed", "stopped"):
            failed = True
        if not as_json:
            code = "" if e.get("exit_code") is None else f", exit code {e['exit_code']}"
            after = f" after {e['seconds']:.1f}s" if e.get("seconds") else ""
            console.print(markup("[bold]{}[/]: run {} {}{}{}", name, e["run_id"], e["state"], code, after))
            for f in e.get("findings") or []:
                # the entry, its log lines in the evidence included, is the host's: text, never markup
                console.print(markup("  {} {}\n    {}\n    do: {}", text(f["severity"], SEVERITY_STYLE.get(f["severity"], "")),
                                     f["title"], f["evidence"], f["recommendation"]), highlight=False)
            if e.get("report"):
                console.print(f"  report {e['report']['html']}", markup=False)
    if as_json:
        emit_json({"runs": {n: (o.value if o.ok else {"error": o.message, "unreachable": o.unreachable})
                            for n, o in outcomes.items()}})
    code = exit_code_for(outcomes)
    return EXIT_HOST_FAILED if failed and code == EXIT_OK else code


def run(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    options = connect_options(args)
    hosts = resolve_targets(args.targets, args.inventory, options)
    spec.hosts = [h.name for h in hosts]
    files = None
    if spec.code_dir is not None:
        from provision.train.codefiles import list_code

        files = list_code(spec.code_dir, spec.max_code_bytes)  # once, for every host; errors before connecting
        console.print(f"code: {len(files)} files, {sum(f.size for f in files) / 1e6:.2f} MB from {spec.code_dir}",
                      markup=False)
    view = RunView(console, live=False if (args.no_live or args.json) else None)
    if args.distributed:
        with view:
            doc = train_distributed.run_distributed(args, spec, hosts, files, options, view)
        return train_distributed.print_distributed(doc, args.json)
    train_distributed.check_single_host_args(args)

    def one(host: Host) -> dict[str, Any]:
        import dataclasses

        with connect(host, options) as conn:
            trainer = HostTrainer(conn)
            host_spec = dataclasses.replace(spec, rank=spec.hosts.index(host.name))
            if spec.stop_when_idle is not None:
                host_spec.stop_command = host.vars.get("stop_command") and str(host.vars["stop_command"])
                if not host_spec.stop_command:
                    raise ConfigError(stop_command_hint(host.name, trainer.facts))
            started = trainer.start(host_spec, files)
            run_state = started["run"]
            sync = started.get("sync") or {}
            console.print(f"{host.name}: run {run_state['run_id']} {run_state['state']} in {run_state['workdir']}"
                          + (f" (code: {sync.get('sent')} sent, {sync.get('kept')} unchanged)" if sync else ""),
                          markup=False)
            if args.detach or run_state.get("state") not in ("running", "finished", "failed", "stopped"):
                from provision.train.report import run_entry

                if not args.json:
                    console.print(f"{host.name}: follow with `provision attach {host.name} {run_state['run_id']}`",
                                  markup=False)
                return run_entry(run_state, None, [], None)
            return follow_and_finish(trainer, run_state, view, args.out)

    try:
        with view:
            outcomes = for_each_host(hosts, one, args.forks)
    except KeyboardInterrupt:
        console.print(f"[yellow]detached: run {spec.run_id} goes on on {', '.join(spec.hosts)}; "
                      f"`provision attach HOST {spec.run_id}` follows it again, `provision stop HOST "
                      f"{spec.run_id}` stops it[/]")
        return EXIT_INTERRUPTED
    return report_entries(outcomes, args.json)


def on_hosts(args: argparse.Namespace, targets: list[str], work: Any) -> dict[str, Any]:
    """work(trainer) on each target host, in parallel: {name: HostOutcome}."""
    options = connect_options(args)
    hosts = resolve_targets(targets, args.inventory, options)

    def one(host: Host) -> Any:
        with connect(host, options) as conn:
            return work(HostTrainer(conn))

    return for_each_host(hosts, one, args.forks)


def print_failures(outcomes: dict[str, Any]) -> None:
    for name, o in outcomes.items():
        if not o.ok:
            console.print(markup("[bold red]{}: {}[/]: {}", name, "unreachable" if o.unreachable else "failed", o.message))
