"""`sysctl` (ansible.posix.sysctl semantics): a kernel setting in `sysctl_file`, and live with
`sysctl_set` / `reload`.

Container aware: in most rented containers /proc/sys is mounted read-only (the kernel belongs to
the machine's owner). Then the file is still written, and the task fails with a message that says
so — or, with `ignoreerrors: yes`, succeeds with that message as a warning, as Ansible's
ignoreerrors does for `sysctl -p`. One round trip reads the file, the live value and whether it
can be written; a second applies what differs.
"""

from __future__ import annotations

import base64
from typing import Any

from provision.modules._hostfile import content_diff
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.modules.files import parse_report, put_content
from provision.shell import path as host_path
from provision.shell import sh

_READ = (
    'f={f}; k={k}; p=/proc/sys/$(printf %s "$k" | tr . /)\n'
    'if [ -f "$f" ]; then echo "@@data $(base64 < "$f" | tr -d \'\\n\')"; else echo "@@missing 1"; fi\n'
    'if [ -e "$p" ]; then echo "@@live $(tr -s \' \\t\' \' \' < "$p")"; if [ -w "$p" ]; then echo "@@writable 1"; fi; '
    'else echo "@@unknown 1"; fi\n'
)


def normalize_key(name: str) -> str:
    return str(name).strip().replace("/", ".")


def _norm_value(value: Any) -> str:
    return " ".join(str(value).split())


def edit_sysctl_file(text: str, key: str, value: str | None, present: bool) -> str:
    """ansible.posix.sysctl's fix_lines: the key's first line becomes `key=value`, later
    duplicates go, comments and other keys stay; a missing key is appended."""
    out, found = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")) or "=" not in line:
            out.append(line)
            continue
        k = normalize_key(line.split("=", 1)[0])
        if k != key:
            out.append(line)
            continue
        if present and not found:
            out.append(f"{key}={value}")
            found = True
    if present and not found:
        out.append(f"{key}={value}")
    return "\n".join(out) + "\n" if out else ""


@register
class Sysctl(Module):
    name = "sysctl"
    aliases = ("ansible.posix.sysctl",)
    args = {
        "name": Arg("str", required=True, aliases=("key",)),
        "value": Arg("str", aliases=("val",)),
        "state": Arg("str", default="present", choices=("present", "absent")),
        "ignoreerrors": Arg("bool", default=False),
        "reload": Arg("bool", default=True),
        "sysctl_file": Arg("path", default="/etc/sysctl.conf"),
        "sysctl_set": Arg("bool", default=False),
    }

    def check_args(self, args: dict[str, Any]) -> list[str]:
        if args.get("state") == "present" and args.get("value") is None:
            return ["value cannot be None (state=present needs value)"]
        return []

    def run(self, ctx: TaskContext) -> ModuleResult:
        a = ctx.args
        key = normalize_key(a["name"])
        present = a["state"] == "present"
        value = _norm_value(a["value"]) if a.get("value") is not None else None
        if value is not None and value.lower() in ("true", "yes", "on"):
            value = "1"  # Ansible maps booleans
        elif value is not None and value.lower() in ("false", "no", "off"):
            value = "0"
        fpath = str(a["sysctl_file"])
        probe = ctx.run(sh(_READ, f=host_path(fpath), k=key))
        report = parse_report(probe.stdout)
        if not probe.ok:
            raise ModuleFailure(f"cannot read {fpath}: {probe.stderr.strip() or f'exit code {probe.exit_code}'}")
        before = base64.b64decode(report.values.get("data", "")).decode("utf-8", "surrogateescape")
        after = edit_sysctl_file(before, key, value, present)
        file_changed = after != before
        live = report.values.get("live")
        live_norm = _norm_value(live) if live is not None else None
        want_live = present and (a["sysctl_set"] or (a["reload"] and file_changed))
        live_changed = want_live and live_norm != value
        problems = []
        if "unknown" in report.values and present:
            problems.append(f"setting {key!r} does not exist on this kernel (no /proc/sys entry)")
        elif live_changed and "writable" not in report.values:
            problems.append(
                f"/proc/sys is read-only on this host (a container: kernel settings belong to the machine's "
                f"owner), so {key}={value} cannot take effect (it is {live_norm}); "
                f"{'the line is written to ' + fpath if file_changed else fpath + ' already has it'}. "
                "Set ignoreerrors: yes to accept that, or ask the provider to set it"
            )
        out = ModuleResult(changed=file_changed or (live_changed and not problems))
        if ctx.diff and file_changed:
            out.diff = content_diff(before.encode(), after.encode(), fpath)
        if not ctx.check_mode:
            if file_changed:
                put_content(ctx.__class__(**{**ctx.__dict__, "args": {}}), after.encode(), fpath)
            if live_changed and not problems:
                done = ctx.run(sh("sysctl -q -w {kv}", kv=f"{key}={value}"))
                if not done.ok:
                    problems.append(f"setting {key} failed: {done.stderr.strip() or done.stdout.strip()}")
                    out.changed = file_changed
        if problems:
            if a["ignoreerrors"]:
                out.data["warnings"] = problems
            else:
                out.failed = True
                out.msg = "; ".join(problems)
        return out


__all__ = ["Sysctl", "edit_sysctl_file"]
