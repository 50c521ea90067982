"""`provision up HOST...`: the main job. Runs playbooks/up.yml — facts → compatibility check →
base setup → install → stage → bench → report — on the same engine as `provision run`.

What to install and stage comes from the options, over ./provision.yml (or the nearest parent's)
when there is one: the command line wins key by key, `-e` vars win over both.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from provision.cli.common import connect_options, console, emit_json
from provision.cli.playbook_args import parse_extra_vars, playbook_inventory
from provision.errors import ConfigError

describe = "provision a fresh rental end to end: check, set up, install, stage, bench, report"

_DATASET_KEYS = ("name", "source", "src", "layout", "labels")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        default=[],
        help="hosts (default with no inventory: localhost)",
    )
    parser.add_argument(
        "--dataset",
        metavar="SRC",
        help="folder/archive on this machine, path on the host, or URL (default: "
        "provision.yml's datasets, else an embedded sample)",
    )
    parser.add_argument("--dataset-name", metavar="NAME", help="LMDB name on the host")
    parser.add_argument(
        "--torch",
        metavar="SPEC",
        help="any (default: keep a torch that works here, else install the newest that fits), "
        "latest, 2.5, '>=2.4,<2.6'",
    )
    parser.add_argument("--variant", help="force a build variant (cu126, cpu, ...)")
    parser.add_argument(
        "--python", metavar="PATH", help="host interpreter to build the env from (default python3)"
    )
    parser.add_argument(
        "--with",
        dest="with_",
        metavar="LIST",
        help="companions at the matching versions: torchvision,torchaudio",
    )
    parser.add_argument(
        "--extra",
        action="append",
        nargs="+",
        default=[],
        metavar="PKG",
        help="more pip requirements for the env (repeatable)",
    )
    parser.add_argument("--env", help="managed environment path on the host")
    parser.add_argument(
        "--allow-cuda-build-on-cpu",
        action="store_true",
        help="on a host without an NVIDIA GPU, accept a multi-GB CUDA build that runs on the CPU",
    )
    parser.add_argument("--mirror", help="pypi | tuna | aliyun | ustc | huawei | tencent")
    parser.add_argument("--index-url", help="package index URL (credentials are masked everywhere)")
    parser.add_argument("--extra-index-url", action="append", default=[], metavar="URL")
    parser.add_argument("--find-links", action="append", default=[], metavar="DIR")
    parser.add_argument("--trusted-host", action="append", default=[], metavar="HOST")
    parser.add_argument(
        "--project", metavar="FILE", help="project file (default: ./provision.yml if present)"
    )
    parser.add_argument("--no-project", action="store_true", help="ignore provision.yml")
    parser.add_argument(
        "--quick", action="store_true",
        help="the short benchmark (under a minute on a CPU): the default for up",
    )
    parser.add_argument(
        "--full-bench", action="store_true",
        help="the whole benchmark (`provision bench` without --quick; minutes) instead",
    )
    parser.add_argument("--no-bench", action="store_true", help="skip the benchmark and report")
    parser.add_argument(
        "--out", default="provision-reports", metavar="DIR", help="report directory"
    )
    parser.add_argument(
        "-C", "--check", action="store_true", help="report what would change; change nothing"
    )
    parser.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="VARS",
        help="more playbook vars (k=v, @file, mapping)",
    )


def find_up_project(args: argparse.Namespace) -> Any:
    """The Project to read (--project FILE, else ./provision.yml or a parent's), or None."""
    from provision.install.project import find_project, load_project

    if getattr(args, "no_project", False):
        return None
    given = getattr(args, "project", None)
    path = Path(given) if given else find_project()
    if given and not path.is_file():
        raise ConfigError(f"--project {given}: no such file")
    return load_project(path) if path is not None else None


def project_datasets(project: Any) -> list[dict[str, str]]:
    """provision.yml `datasets:` as the playbook's up_datasets. A relative local source is
    relative to provision.yml, like its other paths; host paths (host:/...) and URLs stay."""
    out = []
    where = project.where("datasets")
    for i, entry in enumerate(project.datasets):
        if isinstance(entry, str):
            entry = {"source": entry}
        if not isinstance(entry, dict):
            raise ConfigError(
                f"{where}: datasets[{i}] must be a source string or {{name: ..., source: ...}}, got {entry!r}"
            )
        unknown = sorted(set(map(str, entry)) - set(_DATASET_KEYS))
        if unknown:
            raise ConfigError(
                f"{where}: datasets[{i}]: unknown key {unknown[0]!r}; known: name, source, layout, labels"
            )
        src = entry.get("source", entry.get("src"))
        if not isinstance(src, str) or not src.strip():
            raise ConfigError(
                f"{where}: datasets[{i}] needs a source (a folder, archive, host:/PATH or URL)"
            )
        if not src.startswith(("http://", "https://", "host:", "remote:", "/", "~")):
            local = project.path.parent / src
            if not local.exists():
                raise ConfigError(
                    f"{where}: datasets[{i}]: {src}: no such file or folder next to provision.yml "
                    f"({local}); for a path on the host write host:/ABSOLUTE/PATH"
                )
            src = str(local.resolve())
        item = {"src": src}
        for key in ("name", "layout", "labels"):
            if entry.get(key) is not None:
                item[key] = str(entry[key])
        out.append(item)
    return out


def up_vars(args: argparse.Namespace, project: Any = None) -> dict[str, Any]:
    """The playbook's extra vars: the command line over provision.yml over up.yml's defaults."""
    from provision.install.project import python_for

    p = project
    index_given = bool(args.mirror or args.index_url)
    extras = [e for group in getattr(args, "extra", []) for e in group]
    with_ = [w.strip() for w in (getattr(args, "with_", None) or "").split(",") if w.strip()]
    python = getattr(args, "python", None) or (python_for(p.python) if p and p.python else "")
    out: dict[str, Any] = {
        "up_torch": args.torch or (p.torch if p else None) or "any",
        "up_variant": args.variant or (p.variant if p else None) or "",
        "up_python": python,
        "up_env": args.env or (p.env if p else None) or "",
        "up_with": with_ or (list(p.with_) if p else []),
        "up_packages": extras or (list(p.packages) if p else []),
        "up_requirements": [str(p.requirements)] if p and p.requirements else [],
        "up_mirror": args.mirror or ("" if index_given or not p else p.mirror or ""),
        "up_index_url": args.index_url or ("" if index_given or not p else p.index_url or ""),
        "up_extra_index_urls": list(getattr(args, "extra_index_url", []))
        or (list(p.extra_index_urls) if p else []),
        "up_find_links": list(args.find_links) or (list(p.find_links) if p else []),
        "up_trusted_hosts": list(args.trusted_host),
        "up_allow_cuda_build_on_cpu": bool(getattr(args, "allow_cuda_build_on_cpu", False)),
        "up_dataset": args.dataset or "",
        "up_dataset_name": args.dataset_name or "",
        # --dataset replaces the project's list; without either, the embedded sample
        "up_datasets": [] if args.dataset or not p else project_datasets(p),
        "up_bench": not args.no_bench,
        "up_quick": not getattr(args, "full_bench", False),
        "up_report_dir": args.out,
    }
    if out["up_mirror"] and out["up_index_url"]:
        raise ConfigError("--mirror and --index-url both given; pick one")
    return out


def run(args: argparse.Namespace) -> int:
    # start-up time: the playbook stack only once the options parsed; the report's sections
    # register on import (the bench's, choose's prediction; the timings with provision.engine)
    # for the report add_timings renders again
    import provision.bench  # noqa: F401
    import provision.choose  # noqa: F401
    from provision.engine.display import RichDisplay, print_recap
    from provision.engine.runner import run_playbook
    from provision.paths import bundle_dir
    from provision.report.document import add_timings
    from provision.report.render import diagnosis_headline
    from provision.terminal import markup

    options = connect_options(args)
    project = find_up_project(args)
    if project is not None:
        console.print(markup("[dim]project file: {}[/]", project.path))
        if project.locked is not None:
            console.print(
                f"[yellow]{project.where('locked')}: 'locked' is for `provision install`; "
                "`up` installs from the torch spec[/]"
            )
    extra = up_vars(args, project)
    extra.update(parse_extra_vars(args.extra_vars))
    if not args.targets and not args.inventory:
        args.targets = ["localhost"]
    args.limit = None
    inventory, limit = playbook_inventory(args, options)
    display = RichDisplay(console, verbosity=args.verbose, live=None if not args.json else False)
    started = time.monotonic()
    background = {}
    if not args.check and not extra.get("up_datasets") and not extra.get("up_dataset"):
        background = _sample_meanwhile()
    result = run_playbook(
        bundle_dir("playbooks") / "up.yml",
        inventory,
        extra_vars=extra,
        options=options,
        check=args.check,
        forks=args.forks,
        limit=limit,
        display=display,
    )
    reports = _report_paths(result)
    timings = step_timings(result, time.monotonic() - started, background)  # per host
    for host, paths in reports.items():
        if host in timings and not args.check:
            try:
                add_timings(paths, timings[host])  # the report's "Timings" table
            except (ConfigError, OSError, ValueError) as exc:  # the report itself stays as written
                console.print(markup("[yellow]{}: timings not added to the report: {}[/]", host, exc))
    if args.json:
        doc = result.to_json()
        doc["reports"] = reports
        doc["timings"] = timings
        doc["skipped_optional"] = [
            {"host": h, "task": t, "why": w} for h, t, w in skipped_optional_steps(result)
        ]
        emit_json(doc)
    print_recap(console, result)
    for host, t in timings.items():
        line = ", ".join(
            f"{s['step']} {s['seconds']:.1f}s" for s in t["steps"] if s["seconds"] >= 0.05
        )
        console.print(markup("[dim]{}: {}s: {}[/]", host, f"{t['total_seconds']:.1f}", line), soft_wrap=True)
    for host, message in _install_warnings(result).items():
        console.print(markup("[yellow][bold]{}[/]: {}[/]", host, message), soft_wrap=True)
    for host, task, why in skipped_optional_steps(result):
        console.print(
            markup("[yellow][bold]{}[/]: skipped optional step '{}': {}[/]", host, task, why),
            soft_wrap=True,
        )
    # where the report is and what it found, on the console whether or not it is a terminal
    for host, (paths, findings) in _reports(result).items():
        console.print(markup("[bold]{}[/]: report {} (JSON: {})", host, paths.get("html"), paths.get("json")),
                      soft_wrap=True)
        console.print(markup("[bold]{}[/]: diagnosis: {}", host, diagnosis_headline(findings)), soft_wrap=True)
    return result.exit_code()


def _install_warnings(result: Any) -> dict[str, str]:
    """{host: why no torch was installed} where none fits and the bench was off (install_torch
    with required=false): the play went on, and the reason and options must still be seen."""
    out: dict[str, str] = {}
    for item in result.to_json().get("results", []):
        data = item.get("result") or {}
        if item.get("action") == "install_torch" and data.get("action") == "no-fit":
            out[item.get("host")] = str(data.get("message") or item.get("msg") or "")
    return out


def skipped_optional_steps(result: Any) -> list[tuple[str, str, str]]:
    """(host, task, why) for each step that failed and was let go (`ignore_errors`, e.g. the
    tools base.yml installs when no apt mirror answers): `up` went on and says so."""
    out = []
    for item in result.to_json().get("results", []):
        if item.get("status") == "failed" and item.get("ignored"):
            lines = str(item.get("msg") or "failed").strip().splitlines() or ["failed"]
            why = lines[-1]
            stderr = str((item.get("result") or {}).get("stderr") or "").strip().splitlines()
            if stderr and stderr[-1] not in why:  # the tool's own reason (apt's "E: ...")
                why = f"{why}: {stderr[-1]}"
            out.append((str(item.get("host")), str(item.get("task")), why[:300]))
    return out


def _reports(result: Any) -> dict[str, tuple[dict[str, str], list[dict[str, Any]]]]:
    out: dict[str, tuple[dict[str, str], list[dict[str, Any]]]] = {}
    for item in result.to_json().get("results", []):
        data = item.get("result") or {}
        if item.get("action") == "report" and isinstance(data.get("paths"), dict):
            findings = [f for f in data.get("diagnosis") or [] if isinstance(f, dict)]
            out[item.get("host")] = (data["paths"], findings)
    return out


def step_timings(
    result: Any, total_seconds: float, background: dict[str, float] | None = None
) -> dict[str, dict[str, Any]]:
    """{host: {total_seconds, steps: [{step, action, status, seconds, share, phases, parallel}],
    background, ...}} in run order (provision/engine/timings.py)."""
    # start-up time: as run's imports
    from provision.engine.timings import host_timings

    return host_timings(result.to_json().get("results", []), total_seconds, dict(background or {}))


def _sample_meanwhile() -> dict[str, float]:
    """Generate the embedded sample (seconds of controller CPU, once per machine) while facts,
    the compatibility check and the install wait on the hosts, instead of in the stage step.
    Returns {what: seconds}, filled in when it finishes; a failure is left to the stage step,
    which asks again and reports it."""
    import threading

    from provision.modules.datasets import sample_source

    done: dict[str, float] = {}

    def work() -> None:
        t0 = time.monotonic()
        try:
            sample_source()
        except Exception:  # the stage step repeats it and says what failed
            return
        done["embedded sample (controller)"] = round(time.monotonic() - t0, 3)

    threading.Thread(target=work, name="sample", daemon=True).start()
    return done


def _report_paths(result: Any) -> dict[str, dict[str, str]]:
    return {host: paths for host, (paths, _) in _reports(result).items()}
