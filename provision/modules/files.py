"""Files on the host: `copy`, `template`, `file`, `lineinfile`, `stat`.

Each is one shell script sent over the open connection — no interpreter start-up on the host.
`copy`/`template` compare the SHA-1 of the file on the host with the content's and write (content
on stdin, temp file + rename) only when they differ: one round trip either way for files up to
256 KiB; larger ones are checked first so unchanged big files never cross the wire.
Every path is quoted; a file named `$(touch /root/PWNED)` or `o'brien` is just a name.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision.modules.base import (
    Arg,
    Module,
    ModuleFailure,
    ModuleResult,
    TaskContext,
    register,
    unified_diff,
)
from provision.shell import Raw, env_exports, sh
from provision.shell import path as host_path

_INLINE_LIMIT = 256 * 1024  # send content with the check in one round trip up to this size
_DIFF_LIMIT = 256 * 1024  # larger or binary files: "diff suppressed", like Ansible

# mode/owner/group of one path: $1 path, $2 mode, $3 owner, $4 group, $5 check (1 = report only).
# Symbolic modes are resolved on a scratch file so check mode can tell what would change.
_ATTRS_FN = r"""
pv_attrs() {
  if [ -n "$2" ]; then
    cur=$(stat -c %a "$1") || return 1
    case "$2" in
      *[!0-7]*)
        if [ -d "$1" ]; then t=$(mktemp -d); else t=$(mktemp); fi
        chmod "$cur" "$t" && chmod "$2" "$t" || { rm -rf "$t"; echo "@@error invalid mode $2"; return 1; }
        want=$(stat -c %a "$t"); rm -rf "$t" ;;
      *) want=$2 ;;
    esac
    if [ "$cur" != "$want" ]; then
      echo "@@changed mode $cur -> $want"
      [ "$5" = 1 ] || chmod "$2" "$1" || return 1
    fi
  fi
  if [ -n "$3" ]; then
    if [ "$(stat -c %U "$1")" != "$3" ] && [ "$(stat -c %u "$1")" != "$3" ]; then
      echo "@@changed owner $(stat -c %U "$1") -> $3"
      [ "$5" = 1 ] || chown -h "$3" "$1" || return 1
    fi
  fi
  if [ -n "$4" ]; then
    if [ "$(stat -c %G "$1")" != "$4" ] && [ "$(stat -c %g "$1")" != "$4" ]; then
      echo "@@changed group $(stat -c %G "$1") -> $4"
      [ "$5" = 1 ] || chgrp -h "$4" "$1" || return 1
    fi
  fi
  return 0
}
"""

_ATTR_ARGS = {
    "mode": Arg("mode"),
    "owner": Arg("str"),
    "group": Arg("str"),
}


@dataclass
class Report:
    """Parsed `@@` lines of a file script."""

    changed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    before: bytes | None = None


def parse_report(stdout: str) -> Report:
    report = Report()
    for line in stdout.splitlines():
        if not line.startswith("@@"):
            continue
        key, _, rest = line[2:].partition(" ")
        if key == "changed":
            report.changed.append(rest)
        elif key == "error":
            report.errors.append(rest)
        elif key == "before":
            try:
                report.before = base64.b64decode(rest)
            except ValueError:
                report.before = None
        else:
            report.values[key] = rest
    return report


def _attrs_call(path_var: str, args: dict[str, Any], check: bool) -> str:
    mode, owner, group = args.get("mode") or "", args.get("owner") or "", args.get("group") or ""
    if not (mode or owner or group):
        return ""
    return sh(
        "pv_attrs {path} {mode} {owner} {group} {check} || exit 1\n",
        path=Raw(f'"{path_var}"'),
        mode=mode,
        owner=owner,
        group=group,
        check="1" if check else "0",
    )


def _text_for_diff(data: bytes | None) -> str | None:
    if data is None:
        return ""
    if len(data) > _DIFF_LIMIT or b"\0" in data:
        return None
    return data.decode("utf-8", "replace")


def write_script(
    dest: str,
    checksum: str,
    args: dict[str, Any],
    *,
    check: bool,
    want_before: bool,
    send_content: bool,
    into_dir_name: str | None = None,
    expect_old: str | None = None,
    validate: str | None = None,
    validate_env: dict[str, str] | None = None,
) -> str:
    """One script: compare checksums, optionally report the old content, write from stdin when
    different (and not check mode), then fix mode/owner/group."""
    lines = [_ATTRS_FN, sh("d={dest}", dest=host_path(dest))]
    if into_dir_name:
        lines.append(sh('if [ -d "$d" ]; then d="$d"/{name}; fi', name=into_dir_name))
    lines.append('echo "@@path $d"')
    lines.append(
        'if [ -e "$d" ] && [ ! -f "$d" ]; then echo "@@error $d exists and is not a regular file"; exit 1; fi'
    )
    lines.append('cur=""; if [ -f "$d" ]; then cur=$(sha1sum < "$d") || exit 1; cur=${cur%% *}; fi')
    if expect_old is not None:
        lines.append(
            sh('if [ "$cur" != {old} ]; then echo "@@error $d changed while it was being edited; run again"; exit 1; fi', old=expect_old)
        )
    lines.append(sh('if [ "$cur" != {sum} ]; then', sum=checksum))
    lines.append('  echo "@@changed content"')
    if want_before:
        lines.append(
            sh('  if [ -f "$d" ] && [ "$(stat -c %s "$d")" -le {limit} ]; then ', limit=str(_DIFF_LIMIT))
            + 'echo "@@before $(base64 < "$d" | tr -d \'\\n\')"; elif [ -f "$d" ]; then echo "@@bigbefore 1"; fi'
        )
    if not check and send_content:
        force = args.get("force", True)
        if not force:
            lines.append('  if [ -e "$d" ]; then echo "@@kept exists"; exit 0; fi')
        lines.append('  dir=$(dirname "$d")')
        lines.append(
            '  if [ ! -d "$dir" ]; then echo "@@error destination directory $dir does not exist"; exit 1; fi'
        )
        lines.append('  t="$dir/.$(basename "$d").pvtmp.$$"')
        lines.append("  trap 'rm -f \"$t\"' EXIT")
        lines.append('  cat > "$t" || exit 1')
        # keep an existing file's mode and owner (Ansible does), new files get the umask
        lines.append(
            '  if [ -f "$d" ]; then chmod "$(stat -c %a "$d")" "$t"; '
            'if [ "$(id -u)" = 0 ]; then chown "$(stat -c %u:%g "$d")" "$t"; fi; fi'
        )
        if validate:
            lines.append(sh('  {validate} || { echo "@@error validation failed"; exit 1; }', validate=Raw(validate)))
        if args.get("backup"):
            lines.append(
                '  if [ -f "$d" ]; then b="$d.$(date +%Y%m%d%H%M%S).$$~"; cp -p "$d" "$b" && echo "@@backup_file $b"; fi'
            )
        lines.append('  mv -f "$t" "$d" || exit 1')
        lines.append("  trap - EXIT")
    elif not check and not send_content:
        lines.append('  echo "@@need content"; exit 0')
    elif check and not args.get("force", True):
        lines.append('  if [ -e "$d" ]; then echo "@@kept exists"; exit 0; fi')
    lines.append("fi")
    attrs = _attrs_call("$d", args, check)
    if attrs:
        lines.append(sh('if [ -e "$d" ]; then {attrs}; fi', attrs=Raw(attrs.strip())))
    return "\n".join(lines) + "\n"


def put_content(
    ctx: TaskContext,
    content: bytes,
    dest: str,
    *,
    into_dir_name: str | None = None,
    expect_old: str | None = None,
    validate: str | None = None,
) -> ModuleResult:
    """Make `dest` hold `content` (+ mode/owner/group): the core of copy, template, lineinfile."""
    checksum = hashlib.sha1(content).hexdigest()
    args = ctx.args
    common = dict(into_dir_name=into_dir_name, expect_old=expect_old, validate=validate)
    inline = len(content) <= _INLINE_LIMIT
    script = write_script(
        dest,
        checksum,
        args,
        check=ctx.check_mode,
        want_before=ctx.diff,
        send_content=inline,
        **common,
    )
    result = ctx.run(script, stdin=content if inline and not ctx.check_mode else None)
    report = parse_report(result.stdout)
    if report.values.get("need") == "content":
        # big file that differs: now send it (the check above cost no transfer)
        script = write_script(
            dest, checksum, args, check=False, want_before=False, send_content=True, **common
        )
        result = ctx.run(script, stdin=content)
        second = parse_report(result.stdout)
        second.before, second.changed = (
            report.before,
            sorted(set(report.changed) | set(second.changed)),
        )
        report = second
    path = report.values.get("path", dest)
    if report.errors or not result.ok:
        msg = "; ".join(report.errors) or (result.stderr.strip() or f"exit code {result.exit_code}")
        raise ModuleFailure(msg, dest=path)
    data: dict[str, Any] = {"dest": path, "checksum": checksum, "size": len(content)}
    if "backup_file" in report.values:
        data["backup_file"] = report.values["backup_file"]
    changed = bool(report.changed) and "kept" not in report.values
    result_obj = ModuleResult(changed=changed, data=data)
    if ctx.diff and "content" in report.changed:
        before = None if "bigbefore" in report.values else _text_for_diff(report.before)
        after = _text_for_diff(content)
        if before is None or after is None:
            result_obj.diff = [
                {
                    "before": "",
                    "after": "",
                    "before_header": path,
                    "after_header": path,
                    "note": "diff suppressed (binary or larger than 256 KiB)",
                }
            ]
        else:
            result_obj.diff = unified_diff(before, after, path)
    return result_obj


_COPY_ARGS = {
    "dest": Arg("path", required=True),
    "src": Arg("path"),
    "content": Arg("raw"),
    "remote_src": Arg("bool", default=False),
    "force": Arg("bool", default=True),
    "backup": Arg("bool", default=False),
    "validate": Arg("raw"),
    **_ATTR_ARGS,
}


def _validate_cmd(ctx: TaskContext) -> str | None:
    """`validate: visudo -cf %s`: the temp file's path replaces %s (quoted by the shell)."""
    validate = ctx.args.get("validate")
    if validate is None:
        return None
    from provision.engine.templating import ShellTemplate
    from provision.modules.command import shell_command

    tpl = validate if isinstance(validate, ShellTemplate) else ShellTemplate(str(validate))
    text, env = shell_command(tpl)
    if "%s" not in text:
        raise ModuleFailure("validate must contain %s (the path of the file to check)")
    # the values are exported for the whole validate command line, in a subshell
    return sh("({exports}{text})", exports=env_exports(env), text=Raw(text.replace("%s", '"$t"')))


@register
class Copy(Module):
    name = "copy"
    args = _COPY_ARGS
    mutually_exclusive = (("src", "content"),)
    required_one_of = (("src", "content"),)
    shell_args = ("validate",)

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        if args.get("remote_src"):
            return self._remote(ctx)
        if args.get("content") is not None:
            content = args["content"]
            if not isinstance(content, (str, bytes)):
                import json

                content = json.dumps(content, indent=4)  # Ansible writes dicts/lists as JSON
            data = content.encode() if isinstance(content, str) else content
            if str(args["dest"]).endswith("/"):
                raise ModuleFailure(
                    "dest must be a file path when content is given, not a directory"
                )
            return put_content(ctx, data, args["dest"], validate=_validate_cmd(ctx))
        src = ctx.find_file(args["src"], "files")
        if src.is_dir():
            raise ModuleFailure(
                f"src {args['src']} is a directory; copy takes files (use one task per file or a loop)"
            )
        data = src.read_bytes()
        # like Ansible: an existing directory as dest receives the file under its own name
        return put_content(
            ctx, data, str(args["dest"]), into_dir_name=src.name, validate=_validate_cmd(ctx)
        )

    def _remote(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        if not args.get("src"):
            raise ModuleFailure("remote_src needs src (a path on the host)")
        script = "\n".join(
            [
                _ATTRS_FN,
                sh("s={src}; d={dest}", src=host_path(args["src"]), dest=host_path(args["dest"])),
                'if [ ! -f "$s" ]; then echo "@@error source $s does not exist on the host"; exit 1; fi',
                'if [ -d "$d" ]; then d="$d/$(basename "$s")"; fi',
                'echo "@@path $d"',
                'a=$(sha1sum < "$s"); b=""; if [ -f "$d" ]; then b=$(sha1sum < "$d"); fi',
                'if [ "$a" != "$b" ]; then echo "@@changed content"; '
                + (
                    ""
                    if ctx.check_mode
                    else 'cp -f "$s" "$d.pvtmp.$$" && mv -f "$d.pvtmp.$$" "$d" || exit 1; '
                )
                + "fi",
                'if [ -e "$d" ]; then '
                + (_attrs_call("$d", args, ctx.check_mode).strip() or ":")
                + "; fi",
            ]
        )
        result = ctx.run(script)
        report = parse_report(result.stdout)
        if report.errors or not result.ok:
            raise ModuleFailure("; ".join(report.errors) or result.stderr.strip())
        return ModuleResult(
            changed=bool(report.changed), data={"dest": report.values.get("path", args["dest"])}
        )


@register
class Template(Module):
    name = "template"
    args = {
        "src": Arg("path", required=True),
        "dest": Arg("path", required=True),
        "force": Arg("bool", default=True),
        "backup": Arg("bool", default=False),
        "validate": Arg("raw"),
        **_ATTR_ARGS,
    }
    shell_args = ("validate",)

    def run(self, ctx: TaskContext) -> ModuleResult:
        src = ctx.find_file(ctx.args["src"], "templates")
        if ctx.templar is None:
            raise ModuleFailure("template needs the playbook's templar")
        try:
            source = src.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ModuleFailure(f"cannot read template {src}: {exc}") from None
        variables = dict_overlay(
            ctx.vars,
            {
                "template_path": str(src),
                "template_host": ctx.host.name,
                "ansible_managed": "Managed by provision: local changes will be overwritten",
            },
        )
        text = ctx.templar.render_text(source, variables, name=str(src))
        return put_content(
            ctx,
            text.encode(),
            ctx.args["dest"],
            into_dir_name=src.name.removesuffix(".j2"),
            validate=_validate_cmd(ctx),
        )


def dict_overlay(base: Any, extra: dict[str, Any]) -> Any:
    from collections import ChainMap

    from provision.engine.templating import LazyVars

    if isinstance(base, LazyVars):
        return LazyVars(ChainMap(extra, base.raw()), base._templar)  # noqa: SLF001
    return ChainMap(extra, base)


@register
class File(Module):
    name = "file"
    args = {
        "path": Arg("path", required=True, aliases=("dest", "name")),
        "state": Arg("str", choices=("file", "directory", "absent", "touch", "link", "hard")),
        "src": Arg("path"),
        "recurse": Arg("bool", default=False),
        "force": Arg("bool", default=False),
        "access_time": Arg("str"),
        "modification_time": Arg("str"),
        **_ATTR_ARGS,
    }
    required_if = (("state", "link", ("src",)), ("state", "hard", ("src",)))

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        check = ctx.check_mode
        state = args.get("state") or ("link" if args.get("src") else None)
        lines = [_ATTRS_FN, sh("p={p}", p=host_path(args["path"]))]

        def act(command: str) -> str:
            """The changing command, or a no-op in check mode."""
            return ":" if check else command + " || exit 1"

        if state is None:
            # Ansible: keep whatever exists (file or directory), fail when nothing does
            lines.append(
                'if [ ! -e "$p" ] && [ ! -L "$p" ]; then echo "@@error file $p does not exist '
                '(use state=touch or state=directory to create it)"; exit 1; fi'
            )
            state = "file"
        elif state == "file":
            lines.append(
                'if [ ! -e "$p" ]; then echo "@@error file $p does not exist (use state=touch to create it)"; exit 1; fi'
            )
            lines.append(
                'if [ -d "$p" ]; then echo "@@error $p is a directory, not a file"; exit 1; fi'
            )
        elif state == "directory":
            lines.append(
                'if [ -e "$p" ] && [ ! -d "$p" ]; then echo "@@error $p exists and is not a directory"; exit 1; fi'
            )
            lines.append(
                'if [ ! -d "$p" ]; then echo "@@changed created"; '
                + act('mkdir -p -- "$p"')
                + "; fi"
            )
        elif state == "absent":
            lines.append(
                'if [ -e "$p" ] || [ -L "$p" ]; then echo "@@changed removed"; '
                + act('rm -rf -- "$p"')
                + "; fi"
            )
        elif state == "touch":
            preserve = (
                args.get("modification_time") == "preserve"
                and args.get("access_time") == "preserve"
            )
            lines.append(
                'dir=$(dirname "$p"); if [ ! -d "$dir" ]; then echo "@@error directory $dir does not exist"; exit 1; fi'
            )
            if preserve:
                lines.append(
                    'if [ ! -e "$p" ]; then echo "@@changed created"; '
                    + act('touch -- "$p"')
                    + "; fi"
                )
            else:
                # like Ansible: touching updates the times, so it always reports a change
                lines.append(
                    'if [ ! -e "$p" ]; then echo "@@changed created"; else echo "@@changed touched"; fi'
                )
                lines.append(act('touch -- "$p"'))
        elif state == "link":
            src = str(args["src"])
            lines.append(sh("s={src}", src=host_path(src) if src.startswith("~") else src))
            replace = (
                act('rm -rf -- "$p"')
                if args.get("force")
                else 'echo "@@error $p exists and is not a link (force: yes replaces it)"; exit 1'
            )
            lines.append('if [ -L "$p" ] && [ "$(readlink "$p")" = "$s" ]; then :; else')
            lines.append(sh('  if [ -e "$p" ] && [ ! -L "$p" ]; then {replace}; fi', replace=Raw(replace)))
            lines.append('  echo "@@changed linked"; ' + act('ln -sfn -- "$s" "$p"') + "")
            lines.append("fi")
        elif state == "hard":
            lines.append(sh("s={src}", src=host_path(str(args["src"]))))
            lines.append(
                'if [ ! -e "$s" ]; then echo "@@error hard link source $s does not exist"; exit 1; fi'
            )
            lines.append(
                'if [ -e "$p" ] && [ "$(stat -c %d:%i "$p")" = "$(stat -c %d:%i "$s")" ]; then :; else'
            )
            lines.append('  echo "@@changed linked"; ' + act('ln -f -- "$s" "$p"') + "")
            lines.append("fi")
        if state not in ("absent", "link") and (
            args.get("mode") or args.get("owner") or args.get("group")
        ):
            attrs = _attrs_call("$p", args, check).strip()
            if args.get("recurse") and state == "directory":
                attrs = self._recurse(args, check)
            lines.append(sh('if [ -e "$p" ]; then {attrs}; fi', attrs=Raw(attrs)))
        if state == "link" and (args.get("owner") or args.get("group")):
            lines.append(
                sh(
                    'if [ -L "$p" ]; then pv_attrs "$p" "" {owner} {group} {check} || exit 1; fi',
                    owner=args.get("owner") or "",
                    group=args.get("group") or "",
                    check="1" if check else "0",
                )
            )
        result = ctx.run("\n".join(lines) + "\n")
        report = parse_report(result.stdout)
        if report.errors or not result.ok:
            raise ModuleFailure(
                "; ".join(report.errors)
                or result.stderr.strip()
                or f"exit code {result.exit_code}",
                path=args["path"],
            )
        changed = bool(report.changed)
        out = ModuleResult(changed=changed, data={"path": args["path"], "state": state})
        if ctx.diff and changed:
            out.diff = [
                {
                    "before_header": args["path"],
                    "after_header": args["path"],
                    "before": "",
                    "after": "",
                    "note": ", ".join(report.changed),
                }
            ]
        return out

    @staticmethod
    def _recurse(args: dict[str, Any], check: bool) -> str:
        """chmod/chown -R, reporting a change only when some entry differs. Modes are compared
        per distinct (type, mode) pair in the tree, so symbolic modes and check mode work."""
        parts = []
        mode, owner, group = args.get("mode"), args.get("owner"), args.get("group")
        if mode:
            parts.append(
                "c=0; "
                'for km in $(find "$p" ! -type l -exec stat -c %F:%a {} + | tr " " _ | sort -u); do '
                "k=${km%:*}; cur=${km##*:}; "
                'if [ "$k" = directory ]; then t=$(mktemp -d); else t=$(mktemp); fi; '
                + sh('m={mode}; ', mode=mode)
                + 'chmod "$cur" "$t" && chmod "$m" "$t" || { rm -rf "$t"; echo "@@error invalid mode $m"; exit 1; }; '
                '[ "$(stat -c %a "$t")" != "$cur" ] && c=1; rm -rf "$t"; done; '
                'if [ $c = 1 ]; then echo "@@changed mode"; '
                + ("" if check else 'chmod -R "$m" "$p" || exit 1; ')
                + "fi"
            )
        if owner:
            parts.append(
                sh('o={owner}; ', owner=owner)
                + 'if [ -n "$(find "$p" ! -user "$o" -print -quit)" ]; then echo "@@changed owner"; '
                + ("" if check else 'chown -R -- "$o" "$p" || exit 1; ')
                + "fi"
            )
        if group:
            parts.append(
                sh('g={group}; ', group=group)
                + 'if [ -n "$(find "$p" ! -group "$g" -print -quit)" ]; then echo "@@changed group"; '
                + ("" if check else 'chgrp -R -- "$g" "$p" || exit 1; ')
                + "fi"
            )
        return "; ".join(parts) or ":"


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
        **_ATTR_ARGS,
    }
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
            sh('p={p}; echo "@@path $p"; if [ -f "$p" ]; then echo {marker}; base64 < "$p" || exit 1; ', p=host_path(args["path"]), marker=marker)
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
        res = put_content(ctx, new, path, expect_old=old_sum)
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


@register
class Stat(Module):
    name = "stat"
    args = {
        "path": Arg("path", required=True, aliases=("dest", "name")),
        "get_checksum": Arg("bool", default=True),
        "follow": Arg("bool", default=False),
    }

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        fmt = "%F|%a|%u|%g|%U|%G|%s|%Y|%h|%i|%d"
        checksum = (
            'if [ -f "$p" ] && [ -r "$p" ]; then c=$(sha1sum < "$p"); echo "@@checksum ${c%% *}"; fi'
            if args["get_checksum"]
            else ":"
        )
        script = (
            sh(
                'p={p}\nif [ -e "$p" ] || [ -L "$p" ]; then echo "@@stat $(stat {flags} -c {fmt} "$p")"; ',
                p=host_path(args["path"]),
                flags=["-L"] if args["follow"] else [],
                fmt=fmt,
            )
            + 'if [ -L "$p" ]; then echo "@@lnk_source $(readlink -f "$p")"; fi; '
            f'{checksum}; else echo "@@missing 1"; fi\n'
        )
        result = ctx.run(script)
        report = parse_report(result.stdout)
        if not result.ok:
            raise ModuleFailure(result.stderr.strip() or f"exit code {result.exit_code}")
        if "missing" in report.values:
            return ModuleResult(data={"stat": {"exists": False}})
        kind, mode, uid, gid, user, group, size, mtime, nlink, inode, dev = report.values[
            "stat"
        ].split("|")
        info: dict[str, Any] = {
            "exists": True,
            "path": args["path"],
            "mode": mode.zfill(4),
            "isdir": kind == "directory",
            "isreg": kind.startswith("regular"),
            "islnk": kind == "symbolic link",
            "uid": int(uid),
            "gid": int(gid),
            "pw_name": user,
            "gr_name": group,
            "size": int(size),
            "mtime": float(mtime),
            "nlink": int(nlink),
            "inode": int(inode),
            "dev": int(dev),
        }
        if "checksum" in report.values:
            info["checksum"] = report.values["checksum"]
        if "lnk_source" in report.values:
            info["lnk_source"] = report.values["lnk_source"]
        return ModuleResult(data={"stat": info})


__all__ = ["Copy", "File", "LineInFile", "Stat", "Template", "edit_lines", "put_content", "Path"]
