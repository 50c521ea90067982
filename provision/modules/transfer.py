"""Files from the host to the controller: `fetch` and `slurp`.

fetch sends the SHA-1 of the controller's copy with the request; the host answers with its own
checksum and, only when they differ, the bytes — one round trip either way, and an unchanged file
never crosses the wire. It reads through the task's become like Ansible's slurp fallback does.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import tempfile
from pathlib import Path

from provision.connection.local import current_umask
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.modules.files import parse_report
from provision.paths import OutsideDestination, under_destination
from provision.shell import path as host_path
from provision.shell import sh


def _read_if_changed(ctx: TaskContext, src: str, have: str) -> tuple[str, str, bytes | None]:
    """(host path, kind or checksum state, bytes when the host's checksum differs from `have`)."""
    marker = "@@content-" + secrets.token_hex(6)
    script = sh(
        'p={p}; echo "@@path $p"; '
        'if [ -d "$p" ]; then echo "@@kind directory"; exit 0; fi; '
        'if [ ! -e "$p" ]; then echo "@@kind missing"; exit 0; fi; '
        'if [ ! -r "$p" ]; then echo "@@kind unreadable"; exit 0; fi; '
        'c=$(sha1sum < "$p") || exit 1; c=${c%% *}; echo "@@checksum $c"; echo "@@kind file"; '
        'if [ "$c" != {have} ]; then echo {marker}; base64 < "$p" || exit 1; fi',
        p=host_path(src),
        have=have,
        marker=marker,
    )
    result = ctx.run(script)
    head, found, body = result.stdout.partition(marker)
    report = parse_report(head)
    if not result.ok or "kind" not in report.values:
        raise ModuleFailure(
            f"cannot read {src} on the host: {result.stderr.strip() or f'exit code {result.exit_code}'}"
        )
    try:
        data = base64.b64decode("".join(body.split()), validate=True) if found else None
    except ValueError:  # binascii.Error, or text that isn't ASCII: not what `base64` prints
        raise ModuleFailure(f"cannot read {src} on {ctx.host.name}: its reply is not valid base64") from None
    kind = report.values["kind"]
    if kind == "file" and not report.values.get("checksum"):
        raise ModuleFailure(f"cannot read {src} on {ctx.host.name}: its reply lacks the file's checksum")
    return report.values.get("path", src), kind if kind != "file" else report.values["checksum"], data


@register
class Fetch(Module):
    name = "fetch"
    path_args = ("dest",)
    args = {
        "src": Arg("str", required=True),
        "dest": Arg("str", required=True),
        "flat": Arg("bool", default=False),
        "fail_on_missing": Arg("bool", default=True),
        "validate_checksum": Arg("bool", default=True),
    }
    supports_check_mode = False  # like Ansible: "check mode not (yet) supported"

    def _local_dest(self, ctx: TaskContext, source: str, *, reported: bool = False) -> Path:
        """Ansible's layout (dest/HOST/SOURCE, or flat). `reported`: `source` is the path the
        host said `~/...` is, so it is the host's word and must stay under the destination."""
        dest = os.path.expanduser(str(ctx.args["dest"]))
        base = ctx.search_paths[-2] if len(ctx.search_paths) >= 2 else Path.cwd()
        if ctx.args["flat"]:
            if os.path.isdir(dest) and not dest.endswith("/"):
                raise ModuleFailure(
                    "dest is an existing directory, use a trailing slash if you want to fetch src into that directory"
                )
            if dest.endswith("/"):
                folder = Path(dest) if dest.startswith("/") else base / dest
                out = self._contained(ctx, folder, os.path.basename(source), source)
            else:  # the user's own file name: nothing of the host's in it
                out = Path(os.path.normpath(Path(dest) if dest.startswith("/") else base / dest))
        else:
            root = Path(dest) if dest.startswith("/") else base / dest
            out = self._contained(ctx, root / ctx.host.name, source, source if reported else None)
        if out.is_dir():
            raise ModuleFailure(
                f"calculated dest '{out}' is an existing directory, use another path that does not point to an existing directory"
            )
        return out

    @staticmethod
    def _contained(ctx: TaskContext, root: Path, relative: str, reported: str | None) -> Path:
        try:
            return under_destination(root, relative, host=ctx.host.name, reported=reported or relative)
        except OutsideDestination as exc:
            raise ModuleFailure(f"fetch: {exc}") from None

    def run(self, ctx: TaskContext) -> ModuleResult:
        src = str(ctx.args["src"])
        if "\x00" in src or "\x00" in str(ctx.args["dest"]):  # no path holds one: say so, don't crash
            raise ModuleFailure(f"fetch: src {src!r} / dest {str(ctx.args['dest'])!r} contains a NUL byte")
        # the local path needs the host's absolute path: `~/x` is resolved on the host first
        probe_dest = self._local_dest(ctx, src) if not src.startswith("~") else None
        have = _sha1(probe_dest) if probe_dest is not None else ""
        source, state, data = _read_if_changed(ctx, src, have)
        if state in ("missing", "directory", "unreadable"):
            msg = {
                "missing": "the remote file does not exist, not transferring, ignored",
                "directory": "remote file is a directory, fetch cannot work on directories",
                "unreadable": "file is not readable, not transferring, ignored",
            }[state]
            if ctx.args["fail_on_missing"]:
                return ModuleResult(failed=True, msg=msg, data={"file": source})
            return ModuleResult(msg=msg, data={"file": source})
        if not src.startswith("~"):
            source = src  # the host only echoes it: a different `@@path` is a lie, never a local path
        elif not source.startswith("/"):
            raise ModuleFailure(f"fetch: {ctx.host.name} reported {source!r} as the path of {src}: not an "
                                "absolute path (its $HOME is not one); refusing to name a local file after it")
        dest = self._local_dest(ctx, source, reported=src.startswith("~"))
        if dest != probe_dest:  # `~/x`: the host's path was needed to name the local copy
            have = _sha1(dest)
        if data is None or hashlib.sha1(data).hexdigest() == have:
            return ModuleResult(
                data={"file": source, "dest": str(dest), "checksum": have, "md5sum": _md5(dest)}
            )
        got = hashlib.sha1(data).hexdigest()
        if ctx.args["validate_checksum"] and got != state:
            return ModuleResult(
                failed=True,
                msg="checksum mismatch",
                data={"file": source, "dest": str(dest), "checksum": got, "remote_checksum": state},
            )
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{dest.name}.pvtmp.", dir=dest.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(name, 0o666 & ~current_umask())
        os.replace(name, dest)
        return ModuleResult(
            changed=True,
            data={
                "dest": str(dest),
                "checksum": got,
                "remote_checksum": state,
                "md5sum": hashlib.md5(data).hexdigest(),  # noqa: S324 - Ansible's field
                "remote_md5sum": None,
            },
        )


def _sha1(path: Path) -> str:
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return ""


def _md5(path: Path) -> str | None:
    try:
        return hashlib.md5(path.read_bytes()).hexdigest()  # noqa: S324
    except OSError:
        return None


@register
class Slurp(Module):
    name = "slurp"
    args = {"src": Arg("path", required=True, aliases=("path",))}

    def run(self, ctx: TaskContext) -> ModuleResult:
        src = str(ctx.args["src"])
        source, state, data = _read_if_changed(ctx, src, "")
        if state == "missing":
            raise ModuleFailure(f"File not found: {source}")
        if state == "directory":
            raise ModuleFailure(f"Source is a directory and must be a file: {source}")
        if state == "unreadable" or data is None:
            raise ModuleFailure(f"File is not readable: {source}")
        return ModuleResult(
            data={"content": base64.b64encode(data).decode(), "source": source, "encoding": "base64"}
        )


__all__ = ["Fetch", "Slurp"]
