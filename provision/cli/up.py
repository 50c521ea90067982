"""`provision up HOST...`: the main job. Runs playbooks/up.yml — facts → compatibility check →
base setup → install → stage → bench → report — on the same engine as `provision run`."""

from __future__ import annotations

import argparse
from typing import Any

from provision.cli.common import connect_options, console, emit_json

describe = "provision a fresh rental end to end: check, set up, install, stage, bench, report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="*", metavar="TARGET", default=[],
                        help="hosts (default with no inventory: localhost)")
    parser.add_argument("--dataset", metavar="SRC",
                        help="folder/archive on this machine, path on the host, or URL (default: an embedded sample)")
    parser.add_argument("--dataset-name", metavar="NAME", help="LMDB name on the host")
    parser.add_argument("--torch", default="any", metavar="SPEC",
                        help="any (default: keep a torch that works here, else install the newest that fits), "
                             "latest, 2.5, '>=2.4,<2.6'")
    parser.add_argument("--variant", help="force a build variant (cu126, cpu, ...)")
    parser.add_argument("--env", help="managed environment path on the host")
    parser.add_argument("--mirror", help="pypi | tuna | aliyun | ustc | huawei | tencent")
    parser.add_argument("--index-url", help="package index URL (credentials are masked everywhere)")
    parser.add_argument("--find-links", action="append", default=[], metavar="DIR")
    parser.add_argument("--trusted-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--quick", action="store_true", help="short benchmark (under a minute on a CPU)")
    parser.add_argument("--no-bench", action="store_true", help="skip the benchmark and report")
    parser.add_argument("--out", default="provision-reports", metavar="DIR", help="report directory")
    parser.add_argument("-C", "--check", action="store_true", help="report what would change; change nothing")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                        help="more playbook vars (k=v, @file, mapping)")


def up_vars(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "up_torch": args.torch,
        "up_variant": args.variant or "",
        "up_env": args.env or "",
        "up_mirror": args.mirror or "",
        "up_index_url": args.index_url or "",
        "up_find_links": list(args.find_links),
        "up_trusted_hosts": list(args.trusted_host),
        "up_dataset": args.dataset or "",
        "up_dataset_name": args.dataset_name or "",
        "up_bench": not args.no_bench,
        "up_quick": bool(args.quick),
        "up_report_dir": args.out,
    }


def run(args: argparse.Namespace) -> int:
    from provision.cli.run import _inventory, parse_extra_vars
    from provision.engine.display import RichDisplay, print_recap
    from provision.engine.runner import run_playbook
    from provision.paths import bundle_dir

    options = connect_options(args)
    extra = up_vars(args)
    extra.update(parse_extra_vars(args.extra_vars))
    if not args.targets and not args.inventory:
        args.targets = ["localhost"]
    args.limit = None
    inventory, limit = _inventory(args, options)
    display = RichDisplay(console, verbosity=args.verbose, live=None if not args.json else False)
    result = run_playbook(bundle_dir("playbooks") / "up.yml", inventory, extra_vars=extra, options=options,
                          check=args.check, forks=args.forks, limit=limit, display=display)
    reports = _report_paths(result)
    if args.json:
        doc = result.to_json()
        doc["reports"] = reports
        emit_json(doc)
    print_recap(console, result)
    for host, paths in reports.items():
        console.print(f"[bold]{host}[/]: report {paths.get('html')} (JSON: {paths.get('json')})")
    return result.exit_code()


def _report_paths(result: Any) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for item in result.to_json().get("results", []):
        data = item.get("result") or {}
        if item.get("action") == "report" and isinstance(data.get("paths"), dict):
            out[item.get("host")] = data["paths"]
    return out
