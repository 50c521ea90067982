"""`file` (state, mode, owner, links, touch, absent) and `stat`: one shell script each, every path quoted."""

from __future__ import annotations

from typing import Any

from provision.modules.base import (
    Arg,
    Module,
    ModuleFailure,
    ModuleResult,
    TaskContext,
    register,
)
from provision.modules.files import ATTR_ARGS, ATTRS_FN, attrs_call, parse_report
from provision.shell import Raw, sh
from provision.shell import path as host_path


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
        **ATTR_ARGS,
    }
    required_if = (("state", "link", ("src",)), ("state", "hard", ("src",)))

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        check = ctx.check_mode
        state = args.get("state") or ("link" if args.get("src") else None)
        lines = [ATTRS_FN, sh("p={p}", p=host_path(args["path"]))]

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
            # Ansible creates the missing directories one by one, giving each new one the
            # task's mode/owner/group and stopping at the first that fails (an unknown owner
            # leaves just the top new directory behind, as Ansible's does)
            attrs = attrs_call("$1", args, check, in_function=True).strip()
            lines.append(
                "pv_mkdirs() { [ -d \"$1\" ] && return 0; "
                'd=$(dirname -- "$1"; echo x); pv_mkdirs "${d%??}" || return 1; '
                'mkdir -- "$1" || return 1; ' + (attrs + "; " if attrs else "") + "}"
            )
            lines.append(
                'if [ ! -d "$p" ]; then echo "@@changed created"; '
                + act('pv_mkdirs "$p"')
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
            lines.append(
                sh('  if [ -e "$p" ] && [ ! -L "$p" ]; then {replace}; fi', replace=Raw(replace))
            )
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
            attrs = attrs_call("$p", args, check).strip()
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
                + sh("m={mode}; ", mode=mode)
                + 'chmod "$cur" "$t" && chmod "$m" "$t" || { rm -rf "$t"; echo "@@error invalid mode $m"; exit 1; }; '
                '[ "$(stat -c %a "$t")" != "$cur" ] && c=1; rm -rf "$t"; done; '
                'if [ $c = 1 ]; then echo "@@changed mode"; '
                + ("" if check else 'chmod -R "$m" "$p" || exit 1; ')
                + "fi"
            )
        if owner:
            parts.append(
                sh("o={owner}; ", owner=owner)
                + 'if [ -n "$(find "$p" ! -user "$o" -print -quit)" ]; then echo "@@changed owner"; '
                + ("" if check else 'chown -R -- "$o" "$p" || exit 1; ')
                + "fi"
            )
        if group:
            parts.append(
                sh("g={group}; ", group=group)
                + 'if [ -n "$(find "$p" ! -group "$g" -print -quit)" ]; then echo "@@changed group"; '
                + ("" if check else 'chgrp -R -- "$g" "$p" || exit 1; ')
                + "fi"
            )
        return "; ".join(parts) or ":"


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
