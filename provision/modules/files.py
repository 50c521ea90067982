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
from dataclasses import dataclass, field
from typing import Any

from provision.engine.template_vars import template_vars
from provision.engine.templating import LazyVars, ShellTemplate
from provision.modules.base import (
    Arg,
    Module,
    ModuleFailure,
    ModuleResult,
    TaskContext,
    register,
    unified_diff,
)
from provision.modules.command import shell_command
from provision.shell import Raw, sh, temp_beside
from provision.shell import path as host_path

_INLINE_LIMIT = 256 * 1024  # send content with the check in one round trip up to this size
_DIFF_LIMIT = 256 * 1024  # larger or binary files: "diff suppressed", like Ansible

# mode/owner/group of one path: $1 path, $2 mode, $3 owner, $4 group, $5 check (1 = report only).
# Symbolic modes are resolved on a scratch file so check mode can tell what would change.
ATTRS_FN = r"""
pv_attrs() {
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
  return 0
}
"""

ATTR_ARGS = {
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


def attrs_call(path_var: str, args: dict[str, Any], check: bool, *, in_function: bool = False) -> str:
    """The `pv_attrs` call for `$path_var`; a failure ends the script (`exit 1`), or, inside a
    shell function, returns from it (`return 1`)."""
    mode, owner, group = args.get("mode") or "", args.get("owner") or "", args.get("group") or ""
    if not (mode or owner or group):
        return ""
    return sh(
        "pv_attrs {path} {mode} {owner} {group} {check} || " + ("return 1" if in_function else "exit 1") + "\n",
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
    lines = [ATTRS_FN, sh("d={dest}", dest=host_path(dest))]
    if into_dir_name:
        lines.append(sh('if [ -d "$d" ]; then d="$d"/{name}; fi', name=into_dir_name))
    lines.append('echo "@@path $d"')
    lines.append(
        'if [ -e "$d" ] && [ ! -f "$d" ]; then echo "@@error $d exists and is not a regular file"; exit 1; fi'
    )
    lines.append('cur=""; if [ -f "$d" ]; then cur=$(sha1sum < "$d") || exit 1; cur=${cur%% *}; fi')
    if expect_old is not None:
        lines.append(
            sh(
                'if [ "$cur" != {old} ]; then echo "@@error $d changed while it was being edited; run again"; exit 1; fi',
                old=expect_old,
            )
        )
    lines.append(sh('if [ "$cur" != {sum} ]; then', sum=checksum))
    lines.append('  echo "@@changed content"')
    if want_before:
        lines.append(
            sh(
                '  if [ -f "$d" ] && [ "$(stat -c %s "$d")" -le {limit} ]; then ',
                limit=str(_DIFF_LIMIT),
            )
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
        lines.append("  t=''; trap 'rm -f \"$t\"' EXIT")
        lines.append("  " + temp_beside("t", "d") + " || exit 1")
        lines.append('  cat > "$t" || exit 1')
        # keep an existing file's mode and owner (Ansible does), new files get the umask
        lines.append(
            '  if [ -f "$d" ]; then chmod "$(stat -c %a "$d")" "$t"; '
            'if [ "$(id -u)" = 0 ]; then chown "$(stat -c %u:%g "$d")" "$t"; fi; fi'
        )
        if validate:
            lines.append(
                sh(
                    '  {validate} || { echo "@@error validation failed"; exit 1; }',
                    validate=Raw(validate),
                )
            )
        if args.get("backup"):
            lines.append(
                # mktemp: a backup name another user planted is not followed (cp would write through it)
                '  if [ -f "$d" ]; then b=$(mktemp --suffix="~" "$d.$(date +%Y%m%d%H%M%S).XXXXXX") && '
                'cp -p "$d" "$b" && echo "@@backup_file $b"; fi'
            )
        lines.append('  mv -f "$t" "$d" || exit 1')
        lines.append("  trap - EXIT")
    elif not check and not send_content:
        lines.append('  echo "@@need content"; exit 0')
    elif check and not args.get("force", True):
        lines.append('  if [ -e "$d" ]; then echo "@@kept exists"; exit 0; fi')
    lines.append("fi")
    attrs = attrs_call("$d", args, check)
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
    validate: Validate | None = None,
) -> ModuleResult:
    """Make `dest` hold `content` (+ mode/owner/group): the core of copy, template, lineinfile."""
    checksum = hashlib.sha1(content).hexdigest()
    args = ctx.args
    validate_text, env = validate if validate else (None, None)
    common = dict(into_dir_name=into_dir_name, expect_old=expect_old, validate=validate_text)
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
    result = ctx.run(script, stdin=content if inline and not ctx.check_mode else None, env=env)
    report = parse_report(result.stdout)
    if report.values.get("need") == "content":
        # big file that differs: now send it (the check above cost no transfer)
        script = write_script(
            dest, checksum, args, check=False, want_before=False, send_content=True, **common
        )
        result = ctx.run(script, stdin=content, env=env)
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
    **ATTR_ARGS,
}


# a validate command's text and the values it reads from the environment (sent on stdin)
Validate = tuple[str, dict[str, str]]


def validate_cmd(ctx: TaskContext) -> Validate | None:
    """`validate: visudo -cf %s`: the temp file's path replaces %s (quoted by the shell)."""
    validate = ctx.args.get("validate")
    if validate is None:
        return None

    tpl = validate if isinstance(validate, ShellTemplate) else ShellTemplate(str(validate))
    text, env = shell_command(tpl)
    if "%s" not in text:
        raise ModuleFailure("validate must contain %s (the path of the file to check)")
    # the values reach the write script's environment over stdin (ctx.run's env): a value in
    # the text would be in the host's process list
    return str(sh("({text})", text=Raw(text.replace("%s", '"$t"')))), env


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
            return put_content(ctx, data, args["dest"], validate=validate_cmd(ctx))
        src = ctx.find_file(args["src"], "files")
        if src.is_dir():
            raise ModuleFailure(
                f"src {args['src']} is a directory; copy takes files (use one task per file or a loop)"
            )
        data = src.read_bytes()
        # like Ansible: an existing directory as dest receives the file under its own name
        return put_content(
            ctx, data, str(args["dest"]), into_dir_name=src.name, validate=validate_cmd(ctx)
        )

    def _remote(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        if not args.get("src"):
            raise ModuleFailure("remote_src needs src (a path on the host)")
        script = "\n".join(
            [
                ATTRS_FN,
                sh("s={src}; d={dest}", src=host_path(args["src"]), dest=host_path(args["dest"])),
                'if [ ! -f "$s" ]; then echo "@@error source $s does not exist on the host"; exit 1; fi',
                'if [ -d "$d" ]; then d="$d/$(basename "$s")"; fi',
                'echo "@@path $d"',
                'a=$(sha1sum < "$s"); b=""; if [ -f "$d" ]; then b=$(sha1sum < "$d"); fi',
                'if [ "$a" != "$b" ]; then echo "@@changed content"; '
                + (
                    ""
                    if ctx.check_mode
                    # Ansible's rule (without `mode:`): a new file gets the default mode
                    # (0666 & ~umask: temp_beside gives it so); an existing one takes the
                    # source's exact mode (its copystat, umask not applied)
                    else temp_beside("t", "d") + ' && { cat "$s" > "$t" && { [ ! -e "$d" ] || '
                    'chmod "$(stat -c %a "$s")" "$t"; } && mv -f "$t" "$d"; } '
                    '|| { rm -f "$t"; exit 1; }; '
                )
                + "fi",
                'if [ -e "$d" ]; then '
                + (attrs_call("$d", args, ctx.check_mode).strip() or ":")
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
    path_args = ("src",)
    args = {
        "src": Arg("path", required=True),
        "dest": Arg("path", required=True),
        "force": Arg("bool", default=True),
        "backup": Arg("bool", default=False),
        "validate": Arg("raw"),
        **ATTR_ARGS,
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
        extra = template_vars(str(ctx.args["src"]), str(src), str(ctx.args["dest"]), ctx.vars)
        variables = dict_overlay(ctx.vars, extra)
        text = ctx.templar.render_text(source, variables, name=str(src))
        return put_content(
            ctx,
            text.encode(),
            ctx.args["dest"],
            into_dir_name=src.name.removesuffix(".j2"),
            validate=validate_cmd(ctx),
        )


def dict_overlay(base: Any, extra: dict[str, Any]) -> Any:
    from collections import ChainMap

    if isinstance(base, LazyVars):
        return LazyVars(ChainMap(extra, base.raw()), base._templar)  # noqa: SLF001
    return ChainMap(extra, base)
