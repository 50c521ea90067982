"""`provision check`: which PyTorch fits a host, and does the installed one work?

    provision check --offline --gpu "NVIDIA GeForce RTX 3090" --driver 535.104.05 --python 3.10
    provision check --offline --cc 8.6 --cc 9.0 --driver 550.54.14 --python 3.12 --torch 2.5 --json
    provision check HOST...            facts + resolver + verify_torch on each host: OK / WARN / BROKEN

Offline, nothing is contacted: the answer comes from provision/compat/data alone.
"""

from __future__ import annotations

import argparse
import platform
from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.text import Text

from provision.cli.common import (
    EXIT_HOST_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    connect_options,
    console,
    emit_json,
    usage_error,
)
from provision.compat import (
    GpuFact,
    HostFacts,
    InstallPlan,
    NoPlan,
    ResolveInputError,
    TorchRequest,
    find_gpu,
    resolve_install_plan,
    result_document,
)
from provision.compat.gpus import suggest
from provision.remote.compat import BROKEN, OK, WARN, HostCheck, check_host
from provision.shell import argv
from provision.terminal import markup

describe = "check driver/CUDA/PyTorch compatibility: plan offline, or verify hosts"

_VERDICT_STYLE = {OK: "green", WARN: "yellow", BROKEN: "red"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="hosts to check (inventory host/group, user@host:port, ssh alias, localhost)",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="describe a host with --gpu/--cc/--driver/--python instead of contacting one",
    )
    h = parser.add_argument_group("host description (with --offline)")
    h.add_argument("--gpu", action="append", default=[], metavar="NAME",
                   help='GPU model as nvidia-smi prints it, e.g. "NVIDIA A100-SXM4-80GB"; repeat per GPU')  # fmt: skip
    h.add_argument("--cc", action="append", default=[], metavar="X.Y",
                   help="compute capability of a GPU; repeat per GPU (pairs with --gpu in order)")  # fmt: skip
    h.add_argument("--driver", metavar="VERSION", help="NVIDIA driver version, e.g. 535.104.05")
    h.add_argument("--cuda-max", metavar="X.Y", help="the 'CUDA Version' nvidia-smi shows (if the driver version is unknown)")  # fmt: skip
    h.add_argument("--python", metavar="X.Y", help="Python version of the target env (default: this one's)")  # fmt: skip
    h.add_argument(
        "--arch", default="x86_64", choices=["x86_64", "aarch64"], help="CPU architecture"
    )
    h.add_argument(
        "--installed", metavar="VERSION", help="torch already installed, e.g. 2.5.1+cu124"
    )
    r = parser.add_argument_group("what to install")
    r.add_argument("--torch", default="latest", metavar="SPEC",
                   help="latest (default), any (keep what works), 2.5, 2.5.1, or '>=2.4,<2.6'")  # fmt: skip
    r.add_argument("--variant", metavar="TAG", help="force a build: cu126, cu130, cpu, ...")
    r.add_argument("--no-minor-version-compat", dest="allow_minor_version_compat", action="store_false",
                   help="only builds the driver fully supports (no CUDA minor-version compatibility)")  # fmt: skip
    r.add_argument("--mirror", choices=["pytorch", "pypi"], default="pytorch",
                   help="pytorch: download.pytorch.org or a mirror of it (every variant); "
                   "pypi: PyPI or a PyPI-only mirror (TUNA, Aliyun...; only PyPI's default CUDA build)")  # fmt: skip
    r.add_argument("--index-url", metavar="URL",
                   help="with --mirror pytorch: base URL holding /<tag>/ indexes; with pypi: the simple index")  # fmt: skip
    r.add_argument("--no-torchaudio", dest="torchaudio", action="store_false", help="plan torch + torchvision only")  # fmt: skip
    r.add_argument("--allow-cuda-build-on-cpu", action="store_true",
                   help="on a host without an NVIDIA GPU, accept a multi-GB CUDA build (PyPI's) that runs on the CPU")  # fmt: skip
    parser.add_argument("--env", metavar="PATH",
                        help="check the torch in this managed env (default: host var provision_env, else the host's python3)")  # fmt: skip


def _request(args: argparse.Namespace) -> TorchRequest:
    return TorchRequest(
        spec=args.torch,
        variant=args.variant,
        allow_minor_version_compat=args.allow_minor_version_compat,
        mirror=args.mirror,
        index_base=args.index_url,
        torchaudio=args.torchaudio,
        allow_cuda_build_on_cpu=args.allow_cuda_build_on_cpu,
    )


def run(args: argparse.Namespace) -> int:
    if args.offline and args.targets:
        return usage_error(
            "--offline describes a host with --gpu/--cc/--driver; give no TARGET with it"
        )
    if not args.offline:
        if not args.targets:
            return usage_error(
                "give TARGETs to check, or --offline with --gpu/--cc/--driver/--python"
            )
        if args.gpu or args.cc or args.driver or args.cuda_max or args.python or args.installed:
            return usage_error(
                "--gpu/--cc/--driver/--cuda-max/--python/--installed describe a host: use them with --offline"
            )
        return _run_hosts(args)
    return _run_offline(args)


# -- offline ----------------------------------------------------------------------------------


def _offline_facts(args: argparse.Namespace) -> HostFacts:
    """Raises ValueError with the option at fault."""
    names, ccs = list(args.gpu), list(args.cc)
    if names and ccs and len(names) != len(ccs):
        raise ValueError(
            f"{len(names)} --gpu but {len(ccs)} --cc: give one --cc per --gpu, or only one kind"
        )
    gpus: list[GpuFact] = []
    for i in range(max(len(names), len(ccs))):
        name = names[i] if names else None
        cc = ccs[i] if ccs else None
        if name and not cc:
            spec = find_gpu(name)
            if spec is None:
                close = suggest(name)
                hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
                raise ValueError(f"--gpu {name!r} is not in the GPU table{hint} (or give --cc X.Y)")
            cc = spec.cc
        gpus.append(GpuFact(name=name, cc=cc))
    if gpus and not (args.driver or args.cuda_max):
        raise ValueError("--driver VERSION (or --cuda-max X.Y) is needed with --gpu/--cc")
    return HostFacts(
        gpus=tuple(gpus),
        driver_version=args.driver,
        cuda_max=args.cuda_max,
        python_version=args.python or platform.python_version(),
        arch=args.arch,
        torch_version=args.installed,
    )


def _run_offline(args: argparse.Namespace) -> int:
    try:
        facts = _offline_facts(args)
        result = resolve_install_plan(facts, _request(args))
    except (ValueError, ResolveInputError) as exc:
        return usage_error(str(exc))
    if not args.python:
        result.reasons.insert(
            0, f"--python not given: using this interpreter's {facts.python_version}"
        )
    if args.json:
        emit_json(result_document(result))
    else:
        console.print(result_panel("torch plan", result), soft_wrap=False)  # wrap, never crop
        print_command(result)
    return EXIT_OK if isinstance(result, InstallPlan) else EXIT_HOST_FAILED


def _bullets(title: str, items: list[str], style: str) -> list[Text]:
    if not items:
        return []
    out = [Text(title, style="bold")]
    out += [Text(f"  • {item}", style=style) for item in items]
    return out


def plan_lines(
    result: InstallPlan | NoPlan,
    python: str = "python3",
    reasons: bool = True,
    warnings: bool = True,
) -> list[Text]:
    if isinstance(result, NoPlan):
        lines = [Text(result.explanation, style="bold red")]
        lines += _bullets("options", result.options, "bold")
        lines += _bullets("why", result.reasons if reasons else [], "dim")
        lines += _bullets("warnings", result.warnings if warnings else [], "yellow")
        return lines
    p = result
    extras = ", ".join(x for x in (f"CUDA {p.cuda}" if p.cuda else "", f"cuDNN {p.cudnn}" if p.cudnn else "",
                                   f"NCCL {p.nccl}" if p.nccl else "", p.mode) if x)  # fmt: skip
    head = Text(f"{p.action} torch {p.torch}+{p.variant}", style="bold green")
    head.append(f"  ({extras})", style="green")
    lines = [head]
    companions = " ".join(
        f"{n} {v}" for n, v in (("torchvision", p.torchvision), ("torchaudio", p.torchaudio)) if v
    )
    if companions:
        lines.append(Text(f"with {companions}"))
    lines += _bullets("why", p.reasons if reasons else [], "dim")
    lines += _bullets("warnings", p.warnings if warnings else [], "yellow")
    return lines


def print_command(result: InstallPlan | NoPlan, python: str = "python3") -> None:
    """The pip command in full, outside any box: a panel crops long lines, and a cropped
    command (one without its --index-url) installs the wrong build when copied."""
    if isinstance(result, InstallPlan) and result.pip_args:
        line = Text("run: ", style="bold")
        line.append(str(argv(result.pip_command(python))), style="cyan")
        console.print(line, soft_wrap=True)


def result_panel(title: str, result: InstallPlan | NoPlan) -> Panel:
    ok = isinstance(result, InstallPlan)
    return Panel(Group(*plan_lines(result)), title=title, title_align="left",
                 border_style="green" if ok else "red", expand=False)  # fmt: skip


# -- on hosts ---------------------------------------------------------------------------------


def _run_hosts(args: argparse.Namespace) -> int:
    from provision.connection.factory import connect
    from provision.inventory.loader import resolve_targets
    from provision.parallel import for_each_host
    from provision.remote.agent import Agent
    from provision.remote.facts import gather_facts

    try:
        request = _request(args)
        resolve_install_plan(HostFacts(), request)  # validate the request once, before any host
    except ResolveInputError as exc:
        return usage_error(str(exc))
    options = connect_options(args)
    hosts = resolve_targets(args.targets, args.inventory, options)

    def work(host: Any) -> HostCheck:
        with connect(host, options) as conn:
            agent = Agent(conn)
            return check_host(agent, host, gather_facts(agent), request, env=args.env)

    outcomes = for_each_host(hosts, work, forks=args.forks)
    if args.json:
        emit_json({"hosts": {
            name: o.value.to_dict() if o.ok and o.value else {"error": o.message, "unreachable": o.unreachable}
            for name, o in outcomes.items()
        }})  # fmt: skip
    else:
        for name, o in outcomes.items():
            if o.ok and o.value:
                console.print(host_panel(name, o.value, verbose=args.verbose), soft_wrap=False)
                if o.value.fix:  # in full, outside the box (see print_command)
                    console.print(Text(f"fix: {o.value.fix}", style="bold"), soft_wrap=True)
            else:
                kind = "unreachable" if o.unreachable else "failed"
                console.print(markup("[bold red]{}: {}[/]: {}", name, kind, o.message))
    broken = any(o.ok and o.value and o.value.verdict == BROKEN for o in outcomes.values())
    failed = any(not o.ok and not o.unreachable for o in outcomes.values())
    if broken or failed:
        return EXIT_HOST_FAILED
    return EXIT_UNREACHABLE if any(o.unreachable for o in outcomes.values()) else EXIT_OK


def host_panel(name: str, check: HostCheck, verbose: int = 0) -> Panel:
    s = check.summary
    gpus = (
        ", ".join(f"{g['name'] or '?'} (cc {g['compute_capability'] or '?'})" for g in s["gpus"])
        or "no GPU"
    )
    lines = [Text(f"{gpus} · driver {s['driver'] or '-'} (CUDA ≤ {s['cuda_max'] or '-'}) · "
                  f"Python {s['python']} {s['arch']} · {check.python}")]  # fmt: skip
    v = check.verify or {}
    t = v.get("torch") or {}
    if v.get("installed"):
        line = Text(f"installed torch {t.get('version')} · CUDA {t.get('cuda') or '-'} · cuDNN {t.get('cudnn') or '-'}"
                    f" · cuda available: {t.get('cuda_available')}")  # fmt: skip
        lines.append(line)
        for d in v.get("devices") or []:
            checks = {
                "matmul": d.get("matmul"),
                "conv": d.get("conv"),
                **{f"autocast {k}": r for k, r in (d.get("autocast") or {}).items()},
            }
            marks = " ".join(
                f"{k} {'✓' if (r or {}).get('ok') else '✗'}" for k, r in checks.items()
            )
            lines.append(
                Text(
                    f"  GPU {d['index']} {d['name']} sm_{d['capability'].replace('.', '')}: {marks}"
                )
            )
    elif v:
        lines.append(Text("torch: not installed in this Python", style="yellow"))
    # One screen per host: the plan, what is wrong, the fix; the reasons with -v.
    lines += plan_lines(check.result, check.python, reasons=bool(verbose), warnings=False)
    lines += _bullets("problems", check.problems, "red")
    if verbose or check.verdict != OK:
        lines += _bullets("warnings", check.warnings, "yellow")
    style = _VERDICT_STYLE[check.verdict]
    return Panel(Group(*lines), title=markup(f"[{style}]{{}}[/] {{}}", check.verdict, name), title_align="left",
                 border_style=style, expand=False)  # fmt: skip
