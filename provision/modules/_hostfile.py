"""Helpers the builtin modules share (not a module file: the registry skips `_` names).

- `read_host_file`: one round trip that says whether a host path is a file, a directory or
  missing, and returns a file's bytes (base64 after a per-call marker, so a login banner or a
  file that happens to contain `@@` lines cannot be mistaken for the answer).
- `write_edited`: the write half of an edit (blockinfile, replace, cron_file): the file's new
  bytes go on stdin, guarded by the checksum read before, with mode/owner/group and backup.
- `run_host_python`: host-side work that needs Python (find, uri, slurp of big files): the
  code is one quoted word, the request JSON goes on stdin (secrets included), the answer is
  one JSON line after a marker. Code must run on the host's Python 3.8+.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

from provision.modules.base import ModuleFailure, ModuleResult, TaskContext
from provision.modules.files import Validate, parse_report, put_content
from provision.shell import path as host_path
from provision.shell import sh


@dataclass
class HostFile:
    path: str  # as the host resolved it (`~/x` → /root/x)
    kind: str  # "file" | "directory" | "missing" | "other"
    data: bytes | None = None
    mode: int | None = None  # of the file; for a missing one, what a new file would get (umask)
    owner: str = ""
    group: str = ""

    @property
    def checksum(self) -> str:
        return hashlib.sha1(self.data).hexdigest() if self.data is not None else ""


def read_host_file(ctx: TaskContext, file_path: str) -> HostFile:
    """One round trip: what is at `file_path` on the host, and its bytes when it is a file."""
    marker = "@@content-" + secrets.token_hex(6)
    script = sh(
        'p={p}; echo "@@path $p"; echo "@@umask $(umask)"; '
        'if [ -d "$p" ]; then echo "@@kind directory"; '
        'elif [ -f "$p" ]; then echo "@@kind file"; echo "@@attrs $(stat -c \'%a %U %G\' "$p")"; '
        'echo {marker}; base64 < "$p" || exit 1; '
        'elif [ -e "$p" ]; then echo "@@kind other"; else echo "@@kind missing"; fi',
        p=host_path(file_path),
        marker=marker,
    )
    result = ctx.run(script)
    head, _, body = result.stdout.partition(marker)
    report = parse_report(head)
    if not result.ok or "kind" not in report.values:
        raise ModuleFailure(
            f"cannot read {file_path} on the host: {result.stderr.strip() or f'exit code {result.exit_code}'}"
        )
    kind = report.values["kind"]
    data = base64.b64decode("".join(body.split())) if kind == "file" else None
    found = HostFile(report.values.get("path", file_path), kind, data)
    attrs = report.values.get("attrs", "").split()
    if len(attrs) == 3:
        found.mode, found.owner, found.group = int(attrs[0], 8), attrs[1], attrs[2]
    elif kind == "missing" and report.values.get("umask", "").isdigit():
        found.mode = 0o666 & ~int(report.values["umask"], 8)
    return found


def attrs_differ(current: HostFile, args: dict[str, Any]) -> bool:
    """Would mode/owner/group change `current`? (Ansible's "ownership, perms or SE linux context
    changed".) A symbolic mode counts as differing only when it is not a no-op for the mode."""
    mode, owner, group = args.get("mode"), args.get("owner"), args.get("group")
    if mode and current.mode is not None:
        text = str(mode)
        if text.isdigit() and int(text, 8) != current.mode:
            return True
    if owner and current.kind == "file" and owner not in (current.owner,):
        return True
    if group and current.kind == "file" and group not in (current.group,):
        return True
    return False


def ensure_parent_dir(ctx: TaskContext, file_path: str) -> None:
    """`create: yes` makes missing parent directories (blockinfile, cron_file)."""
    result = ctx.run(sh('mkdir -p -- "$(dirname -- {p})"', p=host_path(file_path)))
    if not result.ok:
        raise ModuleFailure(f"cannot create the directory of {file_path}: {result.stderr.strip()}")


def write_edited(
    ctx: TaskContext, current: HostFile, new: bytes, *, validate: Validate | None = None
) -> ModuleResult:
    """Write `new` where `current` was read (refusing when the file changed in between)."""
    if current.kind == "missing":
        ensure_parent_dir(ctx, current.path)
    return put_content(ctx, new, current.path, expect_old=current.checksum, validate=validate)


def content_diff(before: bytes | None, after: bytes, header: str) -> list[dict[str, str]]:
    """Ansible's diff shape: whole texts before and after."""
    return [
        {
            "before": (before or b"").decode("utf-8", "replace"),
            "after": after.decode("utf-8", "replace"),
            "before_header": header,
            "after_header": header,
        }
    ]


def run_host_python(
    ctx: TaskContext,
    code: str,
    request: dict[str, Any],
    *,
    timeout: float | None = None,
    what: str = "",
) -> dict[str, Any]:
    """Run `code` with the host's python3; it reads the request (JSON) from stdin and prints
    `MARKER` then one JSON object. Returns that object; a traceback becomes a clear failure."""
    marker = "@@json-" + secrets.token_hex(6)
    python = ctx.host.python or "python3"
    script = sh(
        'if ! command -v {py} >/dev/null 2>&1; then echo "@@error no" {py} "on the host:" {what} '
        '"needs it"; exit 1; fi; exec {py} -c {code} {marker}',
        py=python,
        what=what or "this module",
        code=code,
        marker=marker,
    )
    result = ctx.run(script, stdin=json.dumps(request).encode(), timeout=timeout)
    head, found, body = result.stdout.partition(marker + "\n")
    report = parse_report(head)
    if report.errors:
        raise ModuleFailure("; ".join(report.errors))
    if not found:
        tail = result.stderr.strip().splitlines()[-3:]
        raise ModuleFailure(
            f"{what or 'host python'} failed on the host (exit {result.exit_code}): "
            + (" | ".join(tail) or "no output")
        )
    try:
        answer = json.loads(body.strip().splitlines()[0])
    except (ValueError, IndexError):
        raise ModuleFailure(f"{what or 'host python'}: unreadable answer from the host") from None
    if not isinstance(answer, dict):
        raise ModuleFailure(f"{what or 'host python'}: unexpected answer from the host")
    return answer


__all__ = [
    "HostFile",
    "attrs_differ",
    "content_diff",
    "ensure_parent_dir",
    "read_host_file",
    "run_host_python",
    "write_edited",
]
