"""`provision run PLAYBOOK [TARGET...]`: run an Ansible-style playbook.

The whole playbook is validated before any host is contacted. Targets (or the inventory's
hosts) are what the plays' `hosts:` patterns select from. Live status on stderr, one line per
host; failures in full; a recap table. `--json`: one document on stdout.
"""

from __future__ import annotations

import argparse
from typing import Any

from provision.cli.common import EXIT_USAGE, connect_options, console, emit_json
from provision.cli.playbook_args import parse_extra_vars, playbook_inventory

describe = "run an Ansible-style playbook (plays, tasks, when, loop, handlers, check mode) on hosts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("playbook", metavar="PLAYBOOK", help="playbook file (YAML)")
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="hosts to run on: inventory host/group, user@host:port, 'ssh -p PORT user@host', "
        "ssh_config alias, localhost (default: the inventory's hosts)",
    )
    parser.add_argument(
        "-l", "--limit", metavar="PATTERN", help="further limit hosts (pattern or @file)"
    )
    parser.add_argument(
        "-t",
        "--tags",
        action="append",
        default=[],
        metavar="TAGS",
        help="only tasks with these tags (comma-separated; repeatable)",
    )
    parser.add_argument(
        "--skip-tags",
        action="append",
        default=[],
        metavar="TAGS",
        help="skip tasks with these tags (comma-separated; repeatable)",
    )
    parser.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="VARS",
        help="k=v [k2=v2], @vars.yml or a JSON/YAML mapping; highest precedence; repeatable",
    )
    parser.add_argument(
        "-C", "--check", action="store_true", help="report what would change; change nothing"
    )
    parser.add_argument("-D", "--diff", action="store_true", help="show file differences")
    parser.add_argument(
        "--syntax-check", action="store_true", help="validate the playbook and exit"
    )
    parser.add_argument(
        "--list-tasks", action="store_true", help="list the tasks each play would run and exit"
    )


def _split_tags(values: list[str]) -> frozenset[str]:
    return frozenset(t.strip() for v in values for t in v.split(",") if t.strip())


def _list_tasks(playbook: Any, tags: frozenset[str], skip: frozenset[str]) -> None:
    from provision.engine.playbook import Block, Include, Meta, Task
    from provision.engine.runner import tags_selected

    def walk(nodes: list[Any], depth: int) -> None:
        for node in nodes:
            pad = "  " * depth
            if isinstance(node, Task):
                if tags_selected(node.tags, tags, skip):
                    tag_text = (
                        f"  [dim]tags: {', '.join(sorted(node.tags))}[/]" if node.tags else ""
                    )
                    console.print(f"{pad}{node.display_name}  [dim]{node.pos}[/]{tag_text}")
            elif isinstance(node, Block):
                walk(node.block + node.rescue + node.always, depth)
            elif isinstance(node, Include):
                console.print(f"{pad}{node.display_name}  [dim]{node.pos}[/]")
                if node.static_children:
                    walk(node.static_children, depth + 1)
            elif isinstance(node, Meta):
                console.print(f"{pad}{node.display_name}")

    for play in playbook.plays:
        console.print(f"[bold]play {play.name}[/] (hosts: {play.hosts})")
        walk(play.pre_tasks + play.roles + play.tasks + play.post_tasks, 1)


def run(args: argparse.Namespace) -> int:
    from provision.engine.display import RichDisplay, print_recap
    from provision.engine.playbook import load_playbook
    from provision.engine.runner import run_playbook

    options = connect_options(args)
    extra_vars = parse_extra_vars(args.extra_vars)
    tags, skip_tags = _split_tags(args.tags), _split_tags(args.skip_tags)
    playbook = load_playbook(args.playbook)  # every problem reported before any host is touched
    if args.syntax_check:
        console.print(f"playbook {args.playbook}: OK ({len(playbook.plays)} play(s))")
        return 0
    if args.list_tasks:
        _list_tasks(playbook, tags, skip_tags)
        return 0
    inventory, limit = playbook_inventory(args, options)
    if args.forks < 1:
        console.print("[bold red]error:[/] --forks must be >= 1")
        return EXIT_USAGE
    display = RichDisplay(
        console, verbosity=args.verbose, live=None if not args.json else False, diff=args.diff
    )
    result = run_playbook(
        playbook,
        inventory,
        extra_vars=extra_vars,
        options=options,
        check=args.check,
        diff=args.diff,
        forks=args.forks,
        limit=limit,
        tags=tags,
        skip_tags=skip_tags,
        display=display,
    )
    if args.json:
        emit_json(result.to_json())
    print_recap(console, result)
    return result.exit_code()
