"""`provision install HOST...`: the PyTorch build that runs on each host, in a managed env, verified.

Builds the new environment beside the current one and switches only after it verifies on the
host; a second identical install does nothing. See docs/install.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from provision.cli.common import connect_options, console, emit_json, exit_code_for
from provision.errors import ConfigError
from provision.terminal import markup, text

describe = "install the PyTorch build each host can run into a managed env, verified on the host"

_PIP_CHATTER = ("Collecting", "Downloading", "Installing collected")


def add_index_arguments(parser: argparse.ArgumentParser) -> None:
    """What to install and from where: shared by `install` and `lock`."""
    from provision.install.mirrors import PRESETS

    what = parser.add_argument_group("what to install")
    what.add_argument(
        "--torch", metavar="SPEC", help="latest (default) | 2.5 | 2.5.1 | '>=2.4,<2.6'"
    )
    what.add_argument(
        "--variant",
        metavar="TAG",
        help="force a build: cpu, cu118, cu126, ... (default: the resolver's)",
    )
    what.add_argument(
        "--with",
        dest="with_",
        metavar="LIST",
        help="companions at the matching versions: torchvision,torchaudio",
    )
    what.add_argument(
        "--extra",
        action="append",
        nargs="+",
        default=[],
        metavar="PKG",
        help="more pip requirements (repeatable)",
    )
    what.add_argument(
        "-r",
        "--requirement",
        action="append",
        default=[],
        metavar="FILE",
        help="a requirements file on this machine (repeatable)",
    )
    what.add_argument(
        "--python",
        metavar="PATH",
        help="the host interpreter to build the env from (default: python3; a conda Python works: "
        "/root/miniconda3/bin/python)",
    )
    what.add_argument(
        "--no-minor-version-compat",
        action="store_true",
        help="never plan a build that needs CUDA minor-version compatibility",
    )
    what.add_argument(
        "--allow-cuda-build-on-cpu",
        action="store_true",
        help="on a host without an NVIDIA GPU, accept a multi-GB CUDA build that runs on the CPU "
        "(default: the CPU build, or stop with the options)",
    )
    what.add_argument(
        "--project", metavar="FILE", help="project file (default: ./provision.yml if present)"
    )
    what.add_argument("--no-project", action="store_true", help="ignore provision.yml")
    src = parser.add_argument_group("where packages come from")
    src.add_argument(
        "--mirror",
        choices=sorted(PRESETS),
        help="mirror preset (PyPI mirror + PyTorch wheel mirror, probed)",
    )
    src.add_argument("--index-url", metavar="URL", help="the index to use instead (PEP 503)")
    src.add_argument(
        "--index-url-env",
        metavar="VAR",
        help="env var holding the index URL (for URLs with credentials: keeps them out of argv)",
    )
    src.add_argument(
        "--extra-index-url", action="append", default=[], metavar="URL", help="repeatable"
    )
    src.add_argument(
        "--find-links",
        action="append",
        default=[],
        metavar="URL|DIR",
        help="a flat wheel listing or a directory on the host (repeatable)",
    )
    src.add_argument(
        "--trusted-host", action="append", default=[], metavar="HOST", help="repeatable"
    )
    src.add_argument(
        "--proxy", metavar="URL", help="proxy for pip on the host (default: the host's own env)"
    )
    src.add_argument(
        "--proxy-env", metavar="VAR", help="env var holding the proxy URL (with credentials)"
    )
    src.add_argument(
        "--network-turbo",
        action="store_true",
        help="AutoDL: source /etc/network_turbo on the host before pip runs",
    )
    src.add_argument(
        "--pip-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="pip's network timeout per request (default 30)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="HOST",
        help="inventory host/group, user@host:port, ssh_config alias, localhost",
    )
    add_index_arguments(parser)
    env = parser.add_argument_group("environment")
    env.add_argument(
        "--env",
        metavar="PATH",
        help="managed env path on the host (default ~/.provision/envs/provision; with --become "
        "/opt/provision/envs/provision; host var provision_env_root changes the folder; /workspace/... on RunPod)",
    )
    env.add_argument("--conda", metavar="NAME", help=argparse.SUPPRESS)  # removed: says what to do
    env.add_argument(
        "--no-keep",
        action="store_true",
        help="build the managed env even when the active or base conda env already has a torch "
        "that fits (default: keep that one; --env or --python also build the managed env)",
    )
    env.add_argument(
        "--relay",
        action="store_true",
        help="download wheels here once and push them to the hosts (slow/no index access there)",
    )
    env.add_argument(
        "--locked", metavar="FILE", help="install exactly this lock file (provision lock)"
    )
    env.add_argument(  # H8 (issue 14)
        "--installer",
        choices=("auto", "uv", "pip"),
        default="auto",
        help="what fills the env: auto (uv where it can be had on the host, pip otherwise "
        "and after a uv failure), uv, or pip",
    )
    env.add_argument(  # H5 (issue 14)
        "--force",
        action="store_true",
        help="build a new generation even when the env already has the request and verifies "
        "(with uv's cache warm: seconds; docs/install.md)",
    )


def _from_env(var: str | None, what: str) -> str | None:
    if not var:
        return None
    value = os.environ.get(var)
    if not value:
        raise ConfigError(f"{what}: environment variable {var} is not set")
    return value


def build_options(args: argparse.Namespace, *, allow_locked: bool = True) -> tuple[Any, Any]:
    """InstallOptions from the command line over provision.yml (command line wins)."""
    from provision.install.installer import InstallOptions
    from provision.install.lockfile import read_lock
    from provision.install.mirrors import IndexOptions
    from provision.install.project import find_project, load_project, python_for

    project = None
    if not args.no_project:
        path = Path(args.project) if args.project else find_project()
        if args.project and not path.is_file():
            raise ConfigError(f"--project {args.project}: no such file")
        if path is not None:
            project = load_project(path)
            console.print(markup("[dim]project file: {}[/]", path))
    p = project
    index_url = args.index_url or _from_env(getattr(args, "index_url_env", None), "--index-url-env")
    if args.index_url and args.index_url_env:
        raise ConfigError("--index-url and --index-url-env both given; pick one")
    mirror = args.mirror
    if p and not mirror and not index_url:
        mirror, index_url = p.mirror, p.index_url
    index = IndexOptions(
        mirror=mirror,
        index_url=index_url,
        extra_index_urls=list(args.extra_index_url) or (list(p.extra_index_urls) if p else []),
        find_links=list(args.find_links) or (list(p.find_links) if p else []),
        trusted_hosts=list(args.trusted_host),
        proxy=args.proxy or _from_env(args.proxy_env, "--proxy-env"),
        network_turbo=args.network_turbo,
    )
    with_ = [w.strip() for w in (args.with_ or "").split(",") if w.strip()] or (
        list(p.with_) if p else []
    )
    extras = [e for group in args.extra for e in group] or (list(p.packages) if p else [])
    requirements = list(args.requirement) or ([str(p.requirements)] if p and p.requirements else [])
    python = args.python or (python_for(p.python) if p and p.python else None)
    locked_path = getattr(args, "locked", None) if allow_locked else None
    if allow_locked and not locked_path and p and p.locked and not args.torch:
        locked_path = str(p.locked)
    if locked_path and not (
        args.torch or args.variant or args.with_ or args.extra or args.requirement
    ):
        # the lock IS the request: the project's torch/with/packages described how it was made
        with_, extras, requirements, p_torch, p_variant = [], [], [], None, None
    else:
        p_torch, p_variant = (p.torch, p.variant) if p else (None, None)
    options = InstallOptions(
        torch=args.torch or p_torch or "latest",
        variant=args.variant or p_variant,
        with_=with_,
        extras=extras,
        requirements=requirements,
        env=getattr(args, "env", None) or (p.env if p else None),
        python=python,
        conda=getattr(args, "conda", None),
        index=index,
        relay=getattr(args, "relay", False),
        locked=read_lock(locked_path) if locked_path else None,
        allow_minor_version_compat=not args.no_minor_version_compat,
        allow_cuda_build_on_cpu=args.allow_cuda_build_on_cpu,
        pip_timeout=args.pip_timeout,
        installer=getattr(args, "installer", "auto"),
        force=getattr(args, "force", False),
    )
    if args.pip_timeout <= 0:
        raise ConfigError(f"--pip-timeout must be > 0, got {args.pip_timeout}")
    options.validate()
    return options, project


@contextlib.contextmanager
def cancel_on_interrupt(cancel: threading.Event) -> Iterator[None]:
    """Ctrl-C sets `cancel` (every host's install stops pip and cleans up within a poll) and then
    interrupts as usual."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: object) -> None:
        cancel.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def progress_printer(name: str, verbose: int, quiet: bool):
    def say(message: str) -> None:
        if quiet or (not verbose and message.startswith(_PIP_CHATTER)):
            return
        console.print(markup("[dim]{}: {}[/]", name, message))  # the host's pip lines: text

    return say


def run(args: argparse.Namespace) -> int:
    from provision.connection.factory import connect
    from provision.install.installer import InstallError, install
    from provision.inventory.loader import resolve_targets
    from provision.parallel import for_each_host
    from provision.remote.agent import Agent

    options, _ = build_options(args)
    copts = connect_options(args)
    hosts = resolve_targets(args.targets, args.inventory, copts)
    cancel = threading.Event()

    def work(host):
        # a working torch in the active/base conda env (AutoDL's) is kept, as `up` does, unless
        # the user named the env or interpreter to build, or said --no-keep
        keep_conda = not (args.no_keep or options.env or options.python or options.locked)
        opts = dataclasses.replace(options, cancel=cancel, keep_conda=keep_conda)
        with connect(host, copts) as conn:
            return install(
                conn,
                Agent(conn),
                opts,
                progress=progress_printer(host.name, args.verbose, args.json),
            )

    with cancel_on_interrupt(cancel):
        outcomes = for_each_host(hosts, work, forks=args.forks)

    documents: dict[str, Any] = {}
    for name, outcome in outcomes.items():
        if outcome.ok:
            documents[name] = outcome.value.as_dict()
        elif isinstance(outcome.error, InstallError):
            documents[name] = dict(outcome.error.result.as_dict(), error=outcome.message)
        else:
            documents[name] = {
                "action": "failed",
                "error": outcome.message,
                "unreachable": outcome.unreachable,
            }
    if args.json:
        emit_json({"hosts": documents})
    else:
        for name, doc in documents.items():
            print_result(name, doc, args.verbose)
    return exit_code_for(outcomes)


def print_result(name: str, doc: dict[str, Any], verbose: int) -> None:
    action = doc.get("action")
    seconds = (doc.get("seconds") or {}).get("total")
    took = f" ({seconds:.1f}s)" if isinstance(seconds, (int, float)) else ""
    if action == "installed":
        torch = (doc.get("verify") or {}).get("torch") or {}
        gpus = len((doc.get("verify") or {}).get("devices") or [])
        detail = f"torch {torch.get('version')}, cuDNN {torch.get('cudnn') or '-'}, {gpus} GPU(s) checked"
        reused = (doc.get("verify") or {}).get("reused")
        if reused:  # H5: file-for-file the generation verified before (install --force, warm)
            detail += f" (the same files as {reused.get('from')}: its verification stands)"
        console.print(markup("[bold green]{}[/]: installed and verified in {} — {}{}", name, doc.get("env"), detail, took))
        console.print(text(f"  activate: source {doc.get('env')}/bin/activate"))
    elif action == "unchanged":
        console.print(markup("[bold green]{}[/]: {}{}", name, doc.get("message"), took))
    else:
        what = (
            "unreachable"
            if doc.get("unreachable")
            else "refused"
            if action == "refused"
            else "FAILED"
        )
        console.print(markup("[bold red]{}: {}[/]: {}", name, what, doc.get("error") or doc.get("message")))
        for line in doc.get("pip_lines") or []:
            console.print(markup("  [red]pip[/] {}", line))
    for warning in doc.get("warnings") or []:
        console.print(markup("  [yellow]warning[/] {}", warning))
    if verbose:
        for reason in doc.get("reasons") or []:
            console.print(markup("  [dim]reason: {}[/]", reason))
        if doc.get("pip_command"):
            console.print(markup("  [dim]pip: {}[/]", doc["pip_command"]))
