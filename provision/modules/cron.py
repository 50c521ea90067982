"""`cron`: one job or variable in a user's crontab (`crontab -l` / `crontab -`) or a `cron_file`.

The edit is ansible/modules/cron.py's, line for line (`#Ansible: NAME` header above the job, the
`user` column in cron files, `env: yes` for `NAME="value"` lines, a cron file left empty is
removed). One round trip reads, a second writes only when the text differs; the new crontab goes
on stdin. (Rented containers rarely run crond: the entry is written all the same, as Ansible does.)
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field
from typing import Any

from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.modules.files import parse_report, put_content
from provision.shell import path as host_path
from provision.shell import sh

_HEADER = "#Ansible: "
_ONE_LINE = ("name", "user", "job", "minute", "hour", "day", "month", "weekday", "insertafter", "insertbefore")


@dataclass
class CronTab:
    """The lines of one crontab and Ansible's edits on them."""

    lines: list[str] = field(default_factory=list)
    user: str | None = None
    cron_file: str | None = None

    def render(self) -> str:
        text = "\n".join(self.lines)
        return text.rstrip("\r\n") + "\n" if text else ""

    def job_line(self, a: dict[str, Any]) -> str:
        job = str(a["job"]).strip("\r\n")
        prefix = "#" if a.get("disabled") else ""
        user = f" {self.user}" if self.cron_file else ""
        if a.get("special_time"):
            return f"{prefix}@{a['special_time']}{user} {job}"
        when = " ".join(str(a[k]) for k in ("minute", "hour", "day", "month", "weekday"))
        return f"{prefix}{when}{user} {job}"

    def find_job(self, name: str, job: str | None = None) -> list[Any]:
        comment = None
        for line in self.lines:
            if comment is not None:
                if comment == name:
                    return [comment, line]
                comment = None
            elif line.startswith(_HEADER):
                comment = line[len(_HEADER) :]
        if job:
            for i, line in enumerate(self.lines):
                if line == job:
                    if i == 0 or not self.lines[i - 1].startswith(_HEADER):
                        self.lines.insert(i, _HEADER + name)
                        return [self.lines[i], line, True]
                    if name and self.lines[i - 1] == _HEADER + "None":
                        self.lines[i - 1] = _HEADER + name
                        return [self.lines[i - 1], line, True]
        return []

    def update_job(self, name: str, job: str | None) -> None:
        out, comment = [], None
        for line in self.lines:
            if comment is not None:
                if job is not None:
                    out += [comment, job]
                comment = None
            elif line == _HEADER + name:
                comment = line
            else:
                out.append(line)
        self.lines = out

    def find_env(self, name: str) -> list[Any]:
        for i, line in enumerate(self.lines):
            if re.match(rf"^{re.escape(name)}=", line):
                return [i, line]
        return []

    def set_env(self, name: str, decl: str | None) -> None:
        out = []
        for line in self.lines:
            if re.match(rf"^{re.escape(name)}=", line):
                if decl is not None:
                    out.append(decl)
            else:
                out.append(line)
        self.lines = out

    def job_names(self) -> list[str]:
        return [line[len(_HEADER) :] for line in self.lines if line.startswith(_HEADER)]

    def env_names(self) -> list[str]:
        return [line.split("=")[0] for line in self.lines if re.match(r"^\S+=", line)]


def edit_crontab(tab: CronTab, a: dict[str, Any]) -> bool:
    """Apply the task to `tab`; True when it changed (Ansible's main())."""
    name, present = str(a["name"]), a["state"] == "present"
    if a.get("env"):
        if " " in name:
            raise ModuleFailure("Invalid name for environment variable")
        decl = f'{name}="{a["job"]}"'
        old = tab.find_env(name)
        if present and not old:
            after, before = a.get("insertafter"), a.get("insertbefore")
            if not (after or before):
                tab.lines.insert(0, decl)
            else:
                other = tab.find_env(after or before)
                if not other:
                    raise ModuleFailure(f"Variable named '{after or before}' not found.")
                tab.lines.insert(other[0] + 1 if after else other[0], decl)
            return True
        if present and old[1] != decl:
            tab.set_env(name, decl)
            return True
        if not present and old:
            tab.set_env(name, None)
            return True
        return False
    if present:
        job = tab.job_line(a)
        old = tab.find_job(name, job)
        if not old:
            tab.lines += [_HEADER + name, job]
            return True
        if old[1] != job or len(old) > 2:
            tab.update_job(name, job)
            return True
        return False
    if tab.find_job(name):
        tab.update_job(name, None)
        return True
    return False


@register
class Cron(Module):
    name = "cron"
    args = {
        "name": Arg("str", required=True),
        "user": Arg("str"),
        "job": Arg("str", aliases=("value",)),
        "cron_file": Arg("path"),
        "state": Arg("str", default="present", choices=("absent", "present")),
        "backup": Arg("bool", default=False),
        "minute": Arg("str", default="*"),
        "hour": Arg("str", default="*"),
        "day": Arg("str", default="*", aliases=("dom",)),
        "month": Arg("str", default="*"),
        "weekday": Arg("str", default="*", aliases=("dow",)),
        "special_time": Arg(
            "str", choices=("annually", "daily", "hourly", "monthly", "reboot", "weekly", "yearly")
        ),
        "disabled": Arg("bool", default=False),
        "env": Arg("bool", default=False),
        "insertafter": Arg("str"),
        "insertbefore": Arg("str"),
    }
    mutually_exclusive = (("insertafter", "insertbefore"),)

    def check_args(self, a: dict[str, Any]) -> list[str]:
        errors = []
        # one value, one crontab line: a line break would add a line of its own (a job)
        for key in _ONE_LINE:
            value = a.get(key)
            inner = str(value).strip("\r\n") if key == "job" else str(value)  # job's ends are trimmed
            if value is not None and ("\n" in inner or "\r" in inner):
                errors.append(f"cron {key} {value!r} holds a line break: it would add a line of its own to the crontab")
        if a.get("cron_file") == "/etc/crontab":
            errors.append("Will not manage /etc/crontab via cron_file, see documentation.")
        if a.get("special_time") and any(a.get(k) != "*" for k in ("minute", "hour", "day", "month", "weekday")):
            errors.append("You cannot combine special_time with any of the time or day/date parameters.")
        if a.get("state") == "present":
            if a.get("cron_file") and not a.get("user"):
                errors.append("To use cron_file=... parameter you must specify user=... as well")
            if a.get("job") is None:
                errors.append("You must specify 'job' to install a new cron job or variable")
            if (a.get("insertafter") or a.get("insertbefore")) and not a.get("env"):
                errors.append("Insertafter and insertbefore parameters are valid only with env=yes")
        return errors

    def run(self, ctx: TaskContext) -> ModuleResult:
        a = ctx.args
        cron_file = a.get("cron_file")
        if cron_file and not str(cron_file).startswith(("/", "~")):
            cron_file = os.path.join("/etc/cron.d", str(cron_file))
        user = a.get("user")
        if cron_file:
            read = sh(
                'f={f}; if [ -f "$f" ]; then echo "@@data $(base64 < "$f" | tr -d \'\\n\')"; else echo "@@missing 1"; fi',
                f=host_path(cron_file),
            )
        else:
            read = sh(
                'command -v crontab >/dev/null 2>&1 || { echo "@@error crontab is not installed on the host (apt-get install cron)"; exit 1; }; '
                't=$(mktemp) || exit 1; if crontab {u} -l > "$t" 2>/dev/null; then '
                'echo "@@data $(base64 < "$t" | tr -d \'\\n\')"; else echo "@@data "; fi; rm -f "$t"',
                u=["-u", user] if user else [],
            )
        result = ctx.run(read)
        report = parse_report(result.stdout)
        if report.errors or not result.ok:
            raise ModuleFailure("; ".join(report.errors) or result.stderr.strip())
        existing = base64.b64decode(report.values.get("data", "")).decode("utf-8", "surrogateescape")
        lines = existing.splitlines()
        if not cron_file:  # old crontab versions print a 3-line "DO NOT EDIT" header
            while lines and re.match(r"# (DO NOT EDIT THIS FILE|\(\S+ installed on|\(Cron version)", lines[0]):
                lines.pop(0)
        tab = CronTab(lines=lines, user=user, cron_file=cron_file)
        changed = edit_crontab(tab, a)
        header = cron_file or (f'crontab for user "{user}"' if user else "crontab")
        if not changed and existing and not existing.endswith(("\n", "\r")):
            changed = True
        data: dict[str, Any] = {"jobs": tab.job_names(), "envs": tab.env_names()}
        if cron_file:
            data["cron_file"] = a.get("cron_file")
        remove_file = bool(cron_file and a["state"] == "absent" and changed and not tab.lines)
        out = ModuleResult(changed=changed, data=data)
        if ctx.diff and changed:
            after = "" if remove_file else tab.render()
            out.diff = [
                {"before": existing, "after": after, "before_header": header,
                 "after_header": "/dev/null" if remove_file else header}
            ]  # fmt: skip
        if not changed or ctx.check_mode:
            return out
        if remove_file:
            done = ctx.run(sh("rm -f -- {f}", f=host_path(cron_file)))
            if not done.ok:
                raise ModuleFailure(f"cannot remove {cron_file}: {done.stderr.strip()}")
            out.data = {"cron_file": a.get("cron_file"), "state": a["state"]}
        elif cron_file:
            sub = TaskContext(**{**ctx.__dict__, "args": {"backup": a["backup"], "mode": None if existing else "644"}})
            res = put_content(sub, tab.render().encode(), str(cron_file))
            if "backup_file" in res.data:
                out.data["backup_file"] = res.data["backup_file"]
        else:
            done = ctx.run(sh("crontab {u} -", u=["-u", user] if user else []), stdin=tab.render().encode())
            if not done.ok:
                raise ModuleFailure(f"crontab rejected the new table: {done.stderr.strip() or done.stdout.strip()}")
        return out


__all__ = ["Cron", "CronTab", "edit_crontab"]
