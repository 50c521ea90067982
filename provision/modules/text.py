"""Text edits inside host files: `blockinfile`, `replace` and `lineinfile`, with Ansible's exact semantics.

Both read the file in one round trip, compute the new text here (Python's `re`, as Ansible does on
the host), and write only when it differs — a second round trip, guarded by the checksum read
first. An unchanged file costs one round trip; check mode never writes.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from typing import Any

from provision.modules._hostfile import attrs_differ, content_diff, read_host_file, write_edited
from provision.modules.base import (
    Arg,
    Module,
    ModuleFailure,
    ModuleResult,
    TaskContext,
    register,
    unified_diff,
)
from provision.modules.files import ATTR_ARGS, parse_report, put_content, validate_cmd
from provision.shell import path as host_path
from provision.shell import sh

_LINESEP = b"\n"


def block_edit(original: bytes | None, args: dict[str, Any]) -> bytes:
    """Ansible's blockinfile on bytes (None = file absent): the new content."""
    lines = original.splitlines(True) if original is not None else []
    insertbefore, insertafter = args.get("insertbefore"), args.get("insertafter")
    present = args.get("state", "present") == "present"
    block = str(args.get("block") or "").encode()
    marker = str(args.get("marker") or "# {mark} ANSIBLE MANAGED BLOCK").encode()
    if insertbefore is None and insertafter is None:
        insertafter = "EOF"
    if insertafter not in (None, "EOF"):
        insertre: re.Pattern[bytes] | None = re.compile(str(insertafter).encode())
    elif insertbefore not in (None, "BOF"):
        insertre = re.compile(str(insertbefore).encode())
    else:
        insertre = None
    begin = str(args.get("marker_begin") or "BEGIN").encode()
    end = str(args.get("marker_end") or "END").encode()
    marker0 = marker.replace(b"{mark}", begin) + _LINESEP
    marker1 = marker.replace(b"{mark}", end) + _LINESEP
    blocklines: list[bytes] = []
    if present and block:
        if not block.endswith(_LINESEP):
            block += _LINESEP
        blocklines = [marker0, *block.splitlines(True), marker1]
    n0 = n1 = None
    for i, line in enumerate(lines):
        if line == marker0:
            n0 = i
        if line == marker1:
            n1 = i
    if n0 is None or n1 is None:
        n0 = None
        if insertre is not None:
            if insertre.flags & re.MULTILINE and original is not None:
                match = insertre.search(original)
                if match:
                    at = match.end() if insertafter else match.start()
                    n0 = original.count(b"\n", 0, at)
            else:
                for i, line in enumerate(lines):
                    if insertre.search(line):
                        n0 = i
            if n0 is None:
                n0 = len(lines)
            elif insertafter is not None:
                n0 += 1
        elif insertbefore is not None:
            n0 = 0  # BOF
        else:
            n0 = len(lines)  # EOF
    elif n0 < n1:
        lines[n0 : n1 + 1] = []
    else:
        lines[n1 : n0 + 1] = []
        n0 = n1
    if n0 > 0 and not lines[n0 - 1].endswith(_LINESEP):
        lines[n0 - 1] += _LINESEP
    if args.get("prepend_newline") and present and n0 != 0 and lines[n0 - 1] != _LINESEP:
        lines[n0:n0] = [_LINESEP]
        n0 += 1
    lines[n0:n0] = blocklines
    if args.get("append_newline") and present:
        after = n0 + len(blocklines)
        if after < len(lines) and lines[after] != _LINESEP:
            lines[after:after] = [_LINESEP]
    return b"".join(lines)


def _check_regex(args: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    errors = []
    for key in keys:
        value = args.get(key)
        if value and value not in ("EOF", "BOF"):
            try:
                re.compile(str(value))
            except re.error as exc:
                errors.append(f"{key} {value!r} is not a valid regular expression: {exc}")
    return errors


def _finish(
    ctx: TaskContext, current: Any, new: bytes, changed: bool, msg: str, header: str
) -> ModuleResult:
    """Write when changed (else only fix mode/owner/group), with Ansible's diff and message."""
    args = ctx.args
    attrs = args.get("mode") or args.get("owner") or args.get("group")
    attr_note = "ownership, perms or SE linux context changed"
    if changed:
        res = write_edited(ctx, current, new, validate=validate_cmd(ctx))
        res.changed = True
        if attrs and attrs_differ(current, args):
            msg = f"{msg} and {attr_note}" if msg else attr_note
    elif attrs and current.kind == "file":
        res = put_content(ctx, current.data or b"", current.path, expect_old=current.checksum)
        if res.changed:
            msg = attr_note
    else:
        res = ModuleResult()
    res.msg = ""
    # Ansible's keys: msg (also when empty), changed, backup_file; no path
    res.data = {k: v for k, v in res.data.items() if k == "backup_file"}
    res.data["msg"] = msg
    res.diff = content_diff(current.data, new, header) if ctx.diff and changed else None
    return res


@register
class BlockInFile(Module):
    name = "blockinfile"
    args = {
        "path": Arg("path", required=True, aliases=("dest", "destfile", "name")),
        "state": Arg("str", default="present", choices=("absent", "present")),
        "marker": Arg("str", default="# {mark} ANSIBLE MANAGED BLOCK"),
        "block": Arg("str", default="", aliases=("content",)),
        "insertafter": Arg("str"),
        "insertbefore": Arg("str"),
        "create": Arg("bool", default=False),
        "backup": Arg("bool", default=False),
        "validate": Arg("raw"),
        "marker_begin": Arg("str", default="BEGIN"),
        "marker_end": Arg("str", default="END"),
        "append_newline": Arg("bool", default=False),
        "prepend_newline": Arg("bool", default=False),
        **ATTR_ARGS,
    }
    mutually_exclusive = (("insertbefore", "insertafter"),)
    shell_args = ("validate",)

    def check_args(self, args: dict[str, Any]) -> list[str]:
        return _check_regex(args, ("insertafter", "insertbefore"))

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        current = read_host_file(ctx, args["path"])
        if current.kind == "directory":
            raise ModuleFailure(f"Path {current.path} is a directory !", rc=256)
        if current.kind == "other":
            raise ModuleFailure(f"Path {current.path} is not a regular file")
        if current.kind == "missing":
            if args["state"] == "absent":
                return ModuleResult(msg=f"File {current.path} not present")
            if not args["create"]:
                raise ModuleFailure(f"Path {current.path} does not exist !", rc=257)
        new = block_edit(current.data, args)
        changed = new != current.data
        if not changed:
            msg = ""
        elif current.data is None:
            msg = "File created"
        elif args["state"] == "absent" or not args.get("block"):
            msg = "Block removed"
        else:
            msg = "Block inserted"
        return _finish(ctx, current, new, changed, msg, f"{current.path} (content)")


@register
class Replace(Module):
    name = "replace"
    args = {
        "path": Arg("path", required=True, aliases=("dest", "destfile", "name")),
        "regexp": Arg("str", required=True),
        "replace": Arg("str", default=""),
        "after": Arg("str"),
        "before": Arg("str"),
        "backup": Arg("bool", default=False),
        "validate": Arg("raw"),
        "encoding": Arg("str", default="utf-8"),
        **ATTR_ARGS,
    }
    shell_args = ("validate",)

    def check_args(self, args: dict[str, Any]) -> list[str]:
        return _check_regex(args, ("regexp",))

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        current = read_host_file(ctx, args["path"])
        if current.kind == "directory":
            raise ModuleFailure(f"Path {current.path} is a directory !", rc=256)
        if current.kind != "file" or current.data is None:
            raise ModuleFailure(f"Path {current.path} does not exist !", rc=257)
        encoding = args["encoding"]
        try:
            contents = current.data.decode(encoding, "surrogateescape")
        except LookupError:
            raise ModuleFailure(f"encoding {encoding!r} is not known") from None
        after, before = args.get("after"), args.get("before")
        pattern = ""
        if after and before:
            pattern = f"{after}(?P<subsection>.*?){before}"
        elif after:
            pattern = f"{after}(?P<subsection>.*)"
        elif before:
            pattern = f"(?P<subsection>.*){before}"
        start, stop = 0, len(contents)
        if pattern:
            try:
                match = re.search(re.compile(pattern, re.DOTALL), contents)
            except re.error as exc:
                raise ModuleFailure(
                    f"after/before do not form a valid regular expression: {exc}"
                ) from None
            if not match:
                return ModuleResult(
                    msg=f"Pattern for before/after params did not match the given file: {pattern}",
                    rc=0,
                )
            start, stop = match.start("subsection"), match.end("subsection")
        section = contents[start:stop]
        try:
            replaced, count = re.subn(
                re.compile(args["regexp"], re.MULTILINE), args["replace"] or "", section
            )
        except re.error as exc:
            raise ModuleFailure(f"Unable to process replace due to error: {exc}") from None
        changed = count > 0 and replaced != section
        text = contents[:start] + replaced + contents[stop:] if changed else contents
        new = text.encode(encoding, "surrogateescape")
        res = _finish(
            ctx,
            current,
            new,
            changed,
            f"{count} replacements made" if changed else "",
            current.path,
        )
        res.rc = 0
        return res


__all__ = ["BlockInFile", "Replace", "block_edit"]


@register
class LineInFile(Module):
    name = "lineinfile"
    args = {
        "path": Arg("path", required=True, aliases=("dest", "destfile", "name")),
        "line": Arg("str", aliases=("value",)),
        "regexp": Arg("str", aliases=("regex",)),
        "search_string": Arg("str"),
        "state": Arg("str", default="present", choices=("present", "absent")),
        "insertafter": Arg("str"),
        "insertbefore": Arg("str"),
        "create": Arg("bool", default=False),
        "backrefs": Arg("bool", default=False),
        "firstmatch": Arg("bool", default=False),
        "backup": Arg("bool", default=False),
        "validate": Arg("raw"),
        **ATTR_ARGS,
    }
    shell_args = ("validate",)
    mutually_exclusive = (("insertafter", "insertbefore"), ("regexp", "search_string"))

    def check_args(self, args: dict[str, Any]) -> list[str]:
        errors = []
        if args.get("state") == "present" and args.get("line") is None:
            errors.append("state=present requires 'line'")
        if (
            args.get("state") == "absent"
            and args.get("line") is None
            and args.get("regexp") is None
            and args.get("search_string") is None
        ):
            errors.append("state=absent requires 'line', 'regexp' or 'search_string'")
        for key in ("regexp", "insertafter", "insertbefore"):
            value = args.get(key)
            if value and value not in ("EOF", "BOF"):
                try:
                    re.compile(value)
                except re.error as exc:
                    errors.append(f"{key} {value!r} is not a valid regular expression: {exc}")
        return errors

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        marker = "@@content-" + secrets.token_hex(4)
        read = ctx.run(
            sh(
                'p={p}; echo "@@path $p"; if [ -f "$p" ]; then echo {marker}; base64 < "$p" || exit 1; ',
                p=host_path(args["path"]),
                marker=marker,
            )
            + 'elif [ -e "$p" ]; then echo "@@error $p is not a regular file"; else echo "@@missing 1"; fi'
        )
        report = parse_report(read.stdout.split(marker, 1)[0])
        if report.errors or not read.ok:
            raise ModuleFailure("; ".join(report.errors) or read.stderr.strip())
        path = report.values.get("path", args["path"])
        exists = "missing" not in report.values
        if exists:
            raw = base64.b64decode("".join(read.stdout.split(marker, 1)[1].split()))
            before = raw.decode("utf-8", "surrogateescape")
        else:
            if args["state"] == "absent":
                return ModuleResult(changed=False, msg="file not present", data={"path": path})
            if not args["create"]:
                raise ModuleFailure(f"{path} does not exist (create: yes makes it)", rc=257)
            raw, before = b"", ""
        after, msg = edit_lines(before, args)
        if after == before and exists:
            # content unchanged; mode/owner may still differ
            if args.get("mode") or args.get("owner") or args.get("group"):
                res = put_content(ctx, raw, path, expect_old=hashlib.sha1(raw).hexdigest())
                return ModuleResult(
                    changed=res.changed,
                    msg="ownership, perms or SE linux context changed" if res.changed else "",
                    data={"path": path},
                )
            return ModuleResult(changed=False, data={"path": path})
        new = after.encode("utf-8", "surrogateescape")
        old_sum = hashlib.sha1(raw).hexdigest() if exists else ""
        res = put_content(ctx, new, path, expect_old=old_sum, validate=validate_cmd(ctx))
        res.msg = msg
        res.data["path"] = path
        if ctx.diff:
            res.diff = unified_diff(before, after, path)
        return res


def edit_lines(text: str, args: dict[str, Any]) -> tuple[str, str]:
    """Ansible's lineinfile on a string: returns (new text, message)."""
    lines = text.splitlines(keepends=True)
    line = args.get("line")
    regexp = re.compile(args["regexp"]) if args.get("regexp") else None
    search = args.get("search_string")

    def matches(candidate: str) -> bool:
        body = candidate.rstrip("\r\n")
        if regexp is not None:
            return regexp.search(body) is not None
        if search is not None:
            return search in body
        return body == line

    if args["state"] == "absent":
        kept = [ln for ln in lines if not matches(ln)]
        removed = len(lines) - len(kept)
        return "".join(kept), f"{removed} line(s) removed" if removed else ""

    found = [i for i, ln in enumerate(lines) if matches(ln)]
    if found:
        index = found[0] if args.get("firstmatch") else found[-1]
        newline = line
        if args.get("backrefs") and regexp is not None:
            m = regexp.search(lines[index].rstrip("\r\n"))
            newline = m.expand(line) if m else line
        eol = lines[index][len(lines[index].rstrip("\r\n")) :] or "\n"
        if lines[index].rstrip("\r\n") == newline:
            return text, ""
        lines[index] = newline + eol
        return "".join(lines), "line replaced"
    if args.get("backrefs"):
        return text, ""  # backrefs: no match → no change (Ansible)
    if any(ln.rstrip("\r\n") == line for ln in lines):
        return text, ""
    newline = line + "\n"
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    after_re, before_re = args.get("insertafter"), args.get("insertbefore")
    position = len(lines)
    if before_re == "BOF":
        position = 0
    elif before_re:
        hits = [i for i, ln in enumerate(lines) if re.search(before_re, ln.rstrip("\r\n"))]
        if hits:
            position = hits[0] if args.get("firstmatch") else hits[-1]
    elif after_re and after_re != "EOF":
        hits = [i for i, ln in enumerate(lines) if re.search(after_re, ln.rstrip("\r\n"))]
        if hits:
            position = (hits[0] if args.get("firstmatch") else hits[-1]) + 1
    lines.insert(position, newline)
    return "".join(lines), "line added"
