"""`python -m provision.cli.ansible_playbook`: provision's playbook engine behind ansible-playbook's
command line and output, so a script written for ansible-playbook (a CI job, ansible-core's own
`runme.sh` integration tests) runs unchanged with provision in its place:

    printf '#!/bin/sh\\nexec python3 -m provision.cli.ansible_playbook "$@"\\n' > bin/ansible-playbook

- the same flags (`-i`, `-e`, `-l`, `-t`, `--skip-tags`, `-C`, `-D`, `-v`, `-f`, `-b`, `-u`,
  `--private-key`, `-T`, `-c local|ssh`, `--syntax-check`, `--list-tasks`, `--force-handlers`,
  `--flush-cache`, `--start-at-task`); one that provision does not implement (vault, `--step`,
  prompts) is refused by name, exit 5, as Ansible's option errors;
- several playbooks run as one run with one recap, as Ansible's;
- the default callback's text on stdout (`provision/engine/ansible_display.py`);
- Ansible's exit codes: 0, 2 a host failed, 4 unreachable, 1 an error, 5 a bad option.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

OPTIONS_ERROR = 5
_UNSUPPORTED = (
    "--vault-password-file", "--vault-pass-file", "--vault-id", "--ask-vault-pass",
    "--ask-vault-password", "-J", "--step", "-k", "--ask-pass", "-K",
    "--ask-become-pass", "--list-hosts", "--list-tags", "-M", "--module-path",
    "--become-method", "--become-user", "--ssh-common-args", "--ssh-extra-args",
    "--scp-extra-args", "--sftp-extra-args", "--playbook-dir",
)


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # exit 5 (Ansible's AnsibleOptionsError), not 2
        raise _Refused(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ansible-playbook", add_help=True)
    p.add_argument("playbooks", nargs="+", metavar="playbook")
    p.add_argument("-i", "--inventory", "--inventory-file", action="append", default=[])
    p.add_argument("-e", "--extra-vars", action="append", default=[])
    p.add_argument("-l", "--limit")
    p.add_argument("-t", "--tags", action="append", default=[])
    p.add_argument("--skip-tags", action="append", default=[])
    p.add_argument("-C", "--check", action="store_true")
    p.add_argument("-D", "--diff", action="store_true")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("-f", "--forks", type=int, default=None)
    p.add_argument("-b", "--become", action="store_true")
    p.add_argument("-u", "--user")
    p.add_argument("--private-key", "--key-file", dest="key")
    p.add_argument("-T", "--timeout", type=float, default=None)
    p.add_argument("-c", "--connection")
    p.add_argument("--syntax-check", action="store_true")
    p.add_argument("--list-tasks", action="store_true")
    p.add_argument("--start-at-task")
    p.add_argument("--force-handlers", action="store_true")
    p.add_argument("--flush-cache", action="store_true")  # provision keeps no fact cache
    return p


def _refused(argv: list[str]) -> str | None:
    for word in argv:
        flag = word.split("=", 1)[0]
        if flag in _UNSUPPORTED:
            return flag
    return None


def provision_args(ns: argparse.Namespace, playbook: str) -> argparse.Namespace:
    """The `provision run` namespace these ansible-playbook options mean."""
    from provision.cli.main import build_parser as provision_parser

    argv = ["run", playbook]
    targets: list[str] = []
    for inv in ns.inventory:
        if "," in inv and not os.path.exists(inv):  # `-i host1,host2,`: a host list
            targets += [h.strip() for h in inv.split(",") if h.strip()]
        else:
            argv += ["-i", inv]
    for value in ns.extra_vars:
        argv += ["-e", value]
    for value in ns.tags:
        argv += ["-t", value]
    for value in ns.skip_tags:
        argv += ["--skip-tags", value]
    if ns.limit:
        argv += ["-l", ns.limit]
    if ns.check:
        argv.append("--check")
    if ns.diff:
        argv.append("--diff")
    if ns.forks is not None:
        argv += ["-f", str(ns.forks)]
    if ns.become:
        argv.append("-b")
    if ns.user:
        argv += ["--user", ns.user]
    if ns.key:
        argv += ["--key", ns.key]
    if ns.timeout:
        argv += ["--connect-timeout", str(ns.timeout)]
    argv += ["-v"] * ns.verbose
    args = provision_parser(only="run").parse_args(argv)
    args.targets = targets
    return args


def main(argv: list[str] | None = None) -> int:
    from provision.cli.common import connect_options
    from provision.cli.run import parse_extra_vars, playbook_inventory
    from provision.engine.ansible_display import AnsibleDisplay, banner, recap_lines
    from provision.engine.playbook import Playbook, load_playbook
    from provision.engine.runner import run_playbook
    from provision.engine.start_at import start_at_task
    from provision.errors import ConfigError, ProvisionError

    argv = sys.argv[1:] if argv is None else argv
    try:
        flag = _refused(argv)
        if flag:
            raise _Refused(f"{flag} is not supported by provision's ansible-playbook")
        ns = build_parser().parse_args(argv)
        if ns.connection not in (None, "local", "ssh", "smart", "paramiko"):
            raise _Refused(f"--connection {ns.connection} is not supported (local or ssh)")
    except _Refused as exc:
        print(f"[ERROR]: {exc}", file=sys.stderr)
        return OPTIONS_ERROR
    if ns.force_handlers:
        os.environ["ANSIBLE_FORCE_HANDLERS"] = "true"
    display = AnsibleDisplay(ns.verbose)
    try:
        args = provision_args(ns, ns.playbooks[0])
        options = connect_options(args)
        loaded = [load_playbook(p) for p in ns.playbooks]
        if ns.syntax_check:
            print("\nplaybook: " + "\nplaybook: ".join(ns.playbooks))
            return 0
        if ns.list_tasks:
            from provision.cli.run import _list_tasks

            for book in loaded:
                _list_tasks(book, frozenset(), frozenset())
            return 0
        if ns.verbose >= 2:  # what Ansible's -vv says before the plays
            for name, book in zip(ns.playbooks, loaded, strict=True):
                print(banner(f"PLAYBOOK: {os.path.basename(name)}").lstrip("\n"))
                print(f"{len(book.plays)} plays in {name}")
        plays = [p for b in loaded for p in b.plays]
        if ns.start_at_task:
            plays = start_at_task(plays, ns.start_at_task)
        playbook = Playbook(path=loaded[0].path, plays=plays)
        inventory, limit = playbook_inventory(args, options)
        if ns.connection == "local":
            import dataclasses

            for name, host in inventory.hosts.items():
                inventory.hosts[name] = dataclasses.replace(host, local=True)
        tags = frozenset(t.strip() for v in ns.tags for t in v.split(",") if t.strip())
        skip = frozenset(t.strip() for v in ns.skip_tags for t in v.split(",") if t.strip())
        result = run_playbook(
            playbook, inventory, extra_vars=parse_extra_vars(ns.extra_vars), options=options,
            check=ns.check, diff=ns.diff, forks=args.forks, limit=limit, tags=tags or None,
            skip_tags=skip or None, display=display,
        )
    except ConfigError as exc:
        print(f"[ERROR]: {exc}", file=sys.stderr)
        return 1
    except ProvisionError as exc:
        print(f"[ERROR]: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("[ERROR]: User interrupted execution", file=sys.stderr)
        return 99
    print("\n".join(recap_lines(result)))
    code = result.exit_code()
    return {0: 0, 1: 2, 4: 4}.get(code, 1 if code != 130 else 99)


if __name__ == "__main__":
    sys.exit(main())
