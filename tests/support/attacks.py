"""Hostile values and the places they are fed to (tests/unit/test_attacks.py on LocalConnection,
tests/fleet/test_attacks_ssh.py on an SSH host).

Every payload, if it ever ran as shell code, would create the file named by `$PV_CANARY` (an
environment variable every attacked task has). Treated as data it is just text. The tests check
that the canary never appears.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from tests.support.hostile_names import HOSTILE_NAMES

# hypothesis keeps caches (its unicode tables) in ./.hypothesis by default: tests write only
# under temp dirs (the example database is off: settings(database=None) in the tests)
set_hypothesis_home_dir(str(Path(tempfile.gettempdir()) / "provision-tests-hypothesis"))

CANARY_VAR = "PV_CANARY"
_T = 'touch "$PV_CANARY"'

# Code that runs if a value is pasted into shell text, in each quoting context it could land in.
PAYLOADS = [
    f"$({_T})",
    f"`{_T}`",
    f"; {_T}; ",
    f"\n{_T}\n",
    f"' ; {_T}; '",
    f'" ; {_T}; "',
    f"'\"$({_T})\"'",
    f"| {_T}",
    f"&& {_T} #",
    f"& {_T} &",
    f"\nEOF\n{_T}\nEOF\n",  # ends a here-document delimited by EOF
    f"EOF\n{_T}",
    f"\\\n{_T}",
    f"${{x:-$({_T})}}",
    f"-o /dev/null; {_T}",
    f"--help; {_T}",
    f"\r\n{_T}\r\n",
    f"}}; {_T}; {{",
    f"$(({_T}))",
    f"<({_T})",
    f"%s; {_T}",  # validate's %s
]

# The hand-written corpus: each payload alone, wrapped, and a few that combine many.
CORPUS: list[str] = [
    *PAYLOADS,
    *(f"name{p}tail" for p in PAYLOADS[:6]),
    "".join(PAYLOADS),
    "-" + "".join(reversed(PAYLOADS)),
    "中文 ünï\u202ecode " + PAYLOADS[0],
    "EOF",
    *HOSTILE_NAMES,
    "x" * 60_000 + PAYLOADS[0],  # huge, still under the kernel's one-argument limit
]

# Fewer, longer values: each carries every payload, for the slower per-module sweep.
CORPUS_COMBINED: list[str] = [
    "".join(PAYLOADS),
    "-" + "".join(reversed(PAYLOADS)),
    "EOF",
    "中文 ünï\u202ecode " + PAYLOADS[0],
    *HOSTILE_NAMES[:4],
    CORPUS[-1],
]

_ALPHABET = st.characters(codec="utf-8", exclude_characters="\x00")


def hostile_text(max_size: int = 40) -> st.SearchStrategy[str]:
    """Random text with a payload spliced in somewhere (no NUL: see `nul_text`)."""
    noise = st.text(_ALPHABET, max_size=max_size)
    return st.one_of(
        st.tuples(noise, st.sampled_from(PAYLOADS), noise).map("".join),
        st.lists(st.sampled_from(PAYLOADS + ["EOF", "'", '"', "\\", "\n", "-", " "]), max_size=6).map(
            "".join
        ),
        noise,
    )


def nul_text() -> st.SearchStrategy[str]:
    return st.tuples(st.text(_ALPHABET, max_size=8), st.text(_ALPHABET, max_size=8)).map(
        lambda p: p[0] + "\x00" + p[1] + PAYLOADS[0]
    )


def path_safe(value: str) -> str:
    """A hostile value usable as ONE path component under a temp dir (no `/`, not `.`/`..`)."""
    value = value.replace("/", "_")[:200]
    return value if value not in ("", ".", "..") else value + "_x"


# Shell text around a `{{ v }}`: bare, "…", '…', $( ), backticks, here-documents, comments.
SHELL_CONTEXTS = [
    "printf '%s|' {{ v }}",
    "printf '%s|' \"{{ v }}\"",
    "printf '%s|' '{{ v }}'",
    "printf '%s|' \"a$(printf %s {{ v }})b\"",
    "printf '%s|' `printf %s {{ v }}`",
    "cat <<'EOF'\n{{ v }}\nEOF",
    "cat <<EOF\n{{ v }}\nEOF",
    "cat <<-'EOF'\n\t{{ v }}\n\tEOF\nprintf after",
    "true # {{ v }}\nprintf done",
    "x={{ v }}; printf '%s|' \"$x\"",
    "case {{ v }} in *) printf matched ;; esac",
]

# For these the output is known exactly: the value round-trips as data.
EXACT_OUTPUT = {
    "printf '%s|' \"{{ v }}\"": lambda v: v + "|",
    "printf '%s|' '{{ v }}'": lambda v: v + "|",
    "cat <<'EOF'\n{{ v }}\nEOF": lambda v: v + "\n",
    "cat <<EOF\n{{ v }}\nEOF": lambda v: v + "\n",
    "x={{ v }}; printf '%s|' \"$x\"": lambda v: v + "|",
}


def module_cases(tmp: str, value: str) -> list[tuple[str, dict[str, Any]]]:
    """(module, args) for every module argument that reaches a shell, `value` in one of them.
    Strings in shell arguments (`cmd`, `validate`) refer to the value as `{{ v }}`; paths keep
    the value as one component under `tmp`, so nothing is written anywhere else."""
    p = f"{tmp}/{path_safe(value)}"
    url = "http://127.0.0.1:9/"  # the discard port: refused at once, nothing leaves the machine
    return [
        ("command", {"cmd": "printf %s {{ v }}"}),
        ("command", {"argv": ["printf", "%s", value]}),
        ("command", {"cmd": "true", "chdir": p}),
        ("command", {"cmd": "true", "creates": value}),
        ("command", {"cmd": "true", "removes": value}),
        ("command", {"cmd": "cat", "stdin": value}),
        ("shell", {"cmd": "printf %s {{ v }}", "chdir": p}),
        ("shell", {"cmd": "printf %s {{ v }}", "executable": value}),
        ("shell", {"cmd": "printf %s \"{{ v }}\" '{{ v }}' {{ v | quote }}", "creates": value}),
        ("copy", {"content": value, "dest": f"{tmp}/copied", "owner": value}),
        ("copy", {"content": "x", "dest": p, "group": value}),
        ("copy", {"content": "x", "dest": f"{tmp}/v", "validate": "test -f %s && printf %s {{ v }}"}),
        ("file", {"path": p, "state": "touch"}),
        ("file", {"path": f"{tmp}/link", "src": value, "state": "link", "force": True}),
        ("file", {"path": p, "state": "directory", "mode": "0755"}),
        ("lineinfile", {"path": f"{tmp}/lines", "line": value, "create": True}),
        ("lineinfile", {"path": p, "line": "x", "create": True}),
        ("stat", {"path": value}),
        ("stat", {"path": p}),
        ("get_url", {"url": url + value, "dest": f"{tmp}/dl", "timeout": 1}),
        ("get_url", {"url": url, "dest": p, "headers": {"X-Hostile": value}, "timeout": 1}),
        ("get_url", {"url": url, "dest": f"{tmp}/dl2", "url_username": value, "url_password": value}),
        ("wait_for", {"path": p, "timeout": 0}),
        # (capped: grep -E compiling a 60 kB hostile pattern takes seconds and proves nothing more)
        ("wait_for", {"path": f"{tmp}/lines", "search_regex": value[:2000], "timeout": 0}),
        ("pip", {"name": [value], "python": value}),
        ("pip", {"name": ["x"], "executable": value}),
        ("venv", {"path": p, "python": value}),
        ("apt", {"name": [value]}),
    ]


def builtin_module_cases(tmp: str, value: str, fx: dict[str, str]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(module, args, how) for the builtin modules of issue 11: every argument that can reach a
    shell or a host command. `how`: {"check": True} runs in check mode (modules that would
    change this machine's accounts, services, apt sources or crontab only read it then),
    {"env": "rhel"} puts the fake rpm/dnf of `fx["rhel_path"]` first on PATH. `fx` names the
    controller files the cases need: `script` (a shell script), `tar` (a small archive).
    Non-path strings come in as `{{ v }}` so the value arrives intact; `raw`'s text and
    `script`'s command are code by definition: only the values templated into them are attacked.
    (`extra_opts` of unarchive are tar/unzip options by definition, like Ansible's: not here.)"""
    p = f"{tmp}/{path_safe(value)}"
    url = "http://127.0.0.1:9/"  # the discard port: refused at once, nothing leaves the machine
    v = "{{ v }}"
    check, rhel = {"check": True}, {"env": "rhel"}
    return [
        ("blockinfile", {"path": f"{tmp}/block", "block": v, "create": True}, {}),
        ("blockinfile", {"path": p, "block": "x", "marker": "# {mark} " + v, "create": True}, {}),
        ("blockinfile", {"path": f"{tmp}/block", "block": "x", "create": True, "marker_begin": v,
                         "validate": "test -f %s && printf %s {{ v }}"}, {}),
        # the block's own line only: `x` everywhere, with the marker holding the value, costs
        # len(value)^2 (18 GB for the corpus's longest value)
        ("replace", {"path": f"{tmp}/block", "regexp": "^x$", "replace": v}, {}),
        ("replace", {"path": p, "regexp": "x", "validate": "printf %s {{ v }} %s"}, {}),
        ("unarchive", {"src": fx["tar"], "dest": p}, {}),
        ("unarchive", {"src": fx["tar"], "dest": tmp, "exclude": [value]}, {}),
        ("unarchive", {"src": fx["tar"], "dest": tmp, "include": [value, "a.txt"]}, {}),
        ("unarchive", {"src": fx["tar"], "dest": tmp, "creates": value}, {}),
        ("unarchive", {"src": value, "dest": tmp, "remote_src": True}, {}),
        ("unarchive", {"src": url + value, "dest": tmp, "remote_src": True}, {}),
        ("fetch", {"src": p, "dest": f"{tmp}/fetched"}, {}),
        ("fetch", {"src": fx["tar"], "dest": p, "flat": True}, {}),
        ("slurp", {"src": value}, {}),
        ("slurp", {"src": p}, {}),
        ("find", {"paths": [p, tmp], "patterns": [value], "excludes": [value], "contains": value[:2000]}, {}),
        ("find", {"paths": [tmp], "patterns": [value[:2000]], "use_regex": True, "recurse": True}, {}),
        ("script", {"cmd": fx["script"] + " {{ v }}", "chdir": p}, {}),
        ("script", {"cmd": fx["script"], "creates": value}, {}),
        ("script", {"cmd": fx["script"], "removes": p}, {}),
        ("script", {"cmd": fx["script"] + " {{ v }}", "executable": value}, {}),
        ("script", {"cmd": fx["script"], "creates": value, "removes": value}, check),
        ("raw", {"cmd": "printf %s {{ v }} \"{{ v }}\""}, {}),
        ("raw", {"cmd": "printf %s {{ v }}", "executable": value}, {}),
        ("git", {"repo": value, "dest": p}, {}),
        ("git", {"repo": url + value, "dest": f"{tmp}/g", "version": value}, {}),
        ("git", {"repo": value, "dest": f"{tmp}/g", "remote": value}, check),
        ("uri", {"url": url + value, "timeout": 1}, {}),
        ("uri", {"url": url, "method": "POST", "body": v, "headers": {"X-Hostile": value},
                 "dest": p, "timeout": 1, "url_username": value, "url_password": value}, {}),
        ("uri", {"url": url, "creates": value, "removes": p, "timeout": 1}, {}),
        ("dnf", {"name": [value], "state": "present"}, rhel),
        ("yum", {"name": ["bash", value], "state": "latest", "enablerepo": [value], "exclude": [value]}, rhel),
        ("dnf", {"name": ["bash"], "disablerepo": [value], "update_cache": True}, rhel),
        ("package", {"name": [value], "state": "present"}, rhel),
        ("package", {"name": ["bash"], "state": "present", "use": value}, rhel),
        # (capped: parsing a 60 kB sources line takes ~18 s, see parse_source; proves nothing more)
        ("apt_repository", {"repo": value[:2000], "update_cache": False}, check),
        ("apt_repository", {"repo": "deb http://127.0.0.1:9/x stable main", "filename": value,
                            "update_cache": False, "codename": value}, check),
        ("deb822_repository", {"name": value, "uris": [url + value], "suites": [value],
                               "components": [value], "signed_by": value}, check),
        ("apt_key", {"data": value, "keyring": p}, check),
        ("apt_key", {"id": value, "keyring": p, "state": "absent"}, check),
        ("apt_key", {"id": value, "state": "absent"}, check),
        ("apt_key", {"url": value, "keyring": p}, check),
        ("apt_key", {"url": url + value, "keyring": p}, check),
        ("apt_key", {"file": value, "keyring": p}, check),
        ("systemd", {"name": value, "state": "started", "enabled": True}, check),
        ("systemd", {"name": value, "scope": "user", "masked": True, "daemon_reload": True}, check),
        ("service", {"name": value, "state": "restarted", "pattern": value, "arguments": value}, check),
        ("service", {"name": value, "enabled": False, "runlevel": value, "use": value}, check),
        ("cron", {"name": value, "job": v, "cron_file": f"{tmp}/cronf", "user": value}, {}),
        ("cron", {"name": "pv", "job": "true", "cron_file": f"{tmp}/cronf", "user": "root",
                  "minute": value, "hour": value, "weekday": value}, {}),
        ("cron", {"name": value, "job": v, "user": value}, check),
        ("cron", {"name": value, "value": v, "env": True, "cron_file": p, "user": "root"}, {}),
        ("user", {"name": value, "group": value, "groups": [value], "comment": value,
                  "home": p, "shell": value}, check),
        ("user", {"name": "root", "comment": value, "shell": value, "home": p}, check),
        ("user", {"name": value, "state": "absent", "remove": True}, check),
        ("group", {"name": value, "gid": 4243}, check),
        ("group", {"name": value, "state": "absent"}, check),
        ("sysctl", {"name": value, "value": value, "sysctl_file": f"{tmp}/sysctl.conf", "reload": False}, {}),
        ("sysctl", {"name": "vm.swappiness", "value": value, "sysctl_file": p, "reload": True, "sysctl_set": True}, check),
        ("mount", {"path": p, "src": value, "fstype": value, "opts": value, "state": "present",
                   "fstab": f"{tmp}/fstab"}, {}),
        ("mount", {"path": p, "src": value, "fstype": "xfs", "state": "mounted", "fstab": f"{tmp}/fstab"}, check),
        ("mount", {"path": value, "state": "unmounted", "fstab": f"{tmp}/fstab"}, check),
        ("mount_facts", {"devices": [value], "fstypes": [value]}, {}),
    ]
