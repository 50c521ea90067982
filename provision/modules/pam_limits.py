"""`pam_limits` (community.general.pam_limits): one `domain type item value` line of
/etc/security/limits.conf (or `dest`), with the collection module's rules: the first matching
line is changed in place (tabs, the line's comment kept unless `comment` is given), else a line is
appended; `use_max` / `use_min` keep the larger / smaller of the old and new value (unlimited,
infinity and -1 mean no limit); values are checked as limits.conf(5) wants them. `msg` is the line
the file now has; `diff` is always returned, as the module returns it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from provision.modules._hostfile import read_host_file
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.modules.files import put_content

ITEMS = (
    "core data fsize memlock nofile rss stack cpu nproc as maxlogins maxsyslogins priority locks "
    "sigpending msgqueue nice rtprio chroot"
).split()
_UNLIMITED = ("unlimited", "infinity", "-1")
_SPACE = re.compile(r"\s+")


def check_value(item: str, value: str, prefix: str = "") -> None:
    if item in ("nice", "priority"):
        try:
            valid = -20 <= int(value) <= 19
        except ValueError:
            valid = False
        if not valid:
            raise ModuleFailure(
                f"{prefix} Value of {value!r} for item {item!r} is invalid. Value must be a number "
                "in the range -20 to 19 inclusive. Refer to the limits.conf(5) manual pages for "
                "more details."
            )
    elif not (value in _UNLIMITED or value.isdigit()):
        raise ModuleFailure(
            f"{prefix} Value of {value!r} for item {item!r} is invalid. Value must either be "
            "'unlimited', 'infinity' or -1, all of which indicate no limit, or a limit of 0 or "
            "larger. Refer to the limits.conf(5) manual pages for more details."
        )


def _pick(old: str, new: str, use_max: bool, use_min: bool) -> str:
    old_inf, new_inf = old in _UNLIMITED, new in _UNLIMITED
    if use_max:
        return old if old_inf else new if new_inf else str(max(int(new), int(old)))
    if use_min:
        if old_inf and new_inf:
            return old
        return new if old_inf else old if new_inf else str(min(int(new), int(old)))
    return new


@dataclass
class Edit:
    text: str
    changed: bool
    message: str


def edit_limits(lines: list[str], a: dict[str, Any], dest: str) -> Edit:
    """The file's new text. Like the module, a line's own comment becomes the comment of the line
    written when `comment` is empty (the first commented limit line's, as the module reads it)."""
    domain, kind, item, value = a["domain"], a["limit_type"], a["limit_item"], a["value"]
    comment = a["comment"] or ""
    out: list[str] = []
    found = changed = False
    message = ""
    for line in lines:
        if line.startswith("#"):
            out.append(line)
            continue
        squeezed = _SPACE.sub(" ", line).strip()
        if not squeezed:
            out.append(line)
            continue
        fields_text, _, _ = squeezed.partition("#")
        own_comment = line.split("#", 1)[1] if "#" in line else ""
        if not comment:
            comment = own_comment
        fields = fields_text.rstrip().split(" ")
        if len(fields) != 4:
            out.append(line)
            continue
        check_value(fields[2], fields[3], prefix=f"Invalid configuration found in '{dest}'.")
        if (fields[0], fields[1], fields[2]) != (domain, kind, item):
            out.append(line)
            continue
        found = True
        new_value = (
            value if value == fields[3] else _pick(fields[3], value, a["use_max"], a["use_min"])
        )
        if new_value == fields[3]:
            message = line
            out.append(line)
            continue
        changed = True
        if comment:
            comment = f"\t#{comment}"
        message = f"{domain}\t{kind}\t{item}\t{new_value}{comment}\n"
        out.append(message)
    if not found:
        changed = True
        if comment:
            comment = f"\t#{comment}"
        message = f"{domain}\t{kind}\t{item}\t{value}{comment}\n"
        out.append(message)
    return Edit("".join(out), changed, message)


@register
class PamLimits(Module):
    name = "pam_limits"
    aliases = ("community.general.pam_limits",)
    args = {
        "domain": Arg("str", required=True),
        "limit_type": Arg("str", required=True, choices=("soft", "hard", "-")),
        "limit_item": Arg("str", required=True, choices=tuple(ITEMS)),
        "value": Arg("str", required=True),
        "use_max": Arg("bool", default=False),
        "use_min": Arg("bool", default=False),
        "backup": Arg("bool", default=False),
        "dest": Arg("str", default="/etc/security/limits.conf"),
        "comment": Arg("str", default=""),
    }

    def run(self, ctx: TaskContext) -> ModuleResult:
        a = ctx.args
        dest = a["dest"]
        current = read_host_file(ctx, dest)
        if current.kind not in ("file", "missing"):
            raise ModuleFailure(f"{dest} is not a regular file")
        if current.kind == "missing":
            parent = read_host_file(ctx, dest.rsplit("/", 1)[0] or "/")
            if parent.kind != "directory":
                raise ModuleFailure(
                    f"directory {dest.rsplit('/', 1)[0]} is not writable (check presence, access "
                    "rights, use sudo)"
                )
        if a["use_max"] and a["use_min"]:
            raise ModuleFailure("Cannot use use_min and use_max at the same time.")
        check_value(a["limit_item"], a["value"])
        before = (current.data or b"").decode("utf-8", "surrogateescape")
        edit = edit_limits(before.splitlines(True), a, dest)
        out = ModuleResult(
            changed=edit.changed or current.kind == "missing",
            msg=edit.message,
            diff=[{"before": before, "after": edit.text}],
        )
        out.data["diff"] = {"before": before, "after": edit.text}  # registered as a dict, as there
        if out.changed and not ctx.check_mode:
            args = {"backup": a["backup"] and current.kind == "file"}
            wrote = put_content(
                ctx.__class__(**{**ctx.__dict__, "args": args}), edit.text.encode(), dest
            )
            if "backup_file" in wrote.data:
                out.data["backup_file"] = wrote.data["backup_file"]
        return out
