"""`unarchive`: tar (plain, gz, bz2, xz, zstd) and zip, from the controller or already on the host.

One round trip: a controller archive travels on stdin (one stream); the host extracts it into a
hidden scratch directory inside `dest`, applies mode/owner/group there, compares every entry
(type, content, link target, mode, owner) with what `dest` holds and copies over only when
something differs. So a second run reports no change. Check mode compares zip archives and, as
Ansible does, skips tar ones.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.modules.files import ATTR_ARGS, parse_report
from provision.shell import Raw, sh
from provision.shell import path as host_path

# $d dest, $a archive, $x scratch dir, $check, $keep: set before this runs.
_BODY = r"""
if [ ! -d "$d" ]; then echo "@@error dest '$d' must be an existing dir"; exit 1; fi
magic=$(od -An -tx1 -N6 "$a" 2>/dev/null | tr -d ' \n')
case "$magic" in
  504b*) kind=zip; handler=ZipArchive ;;
  1f8b*) kind=tar; handler=TgzArchive ;;
  425a68*) kind=tar; handler=TarBzipArchive ;;
  fd377a585a00) kind=tar; handler=TarXzArchive ;;
  28b52ffd*) kind=tar; handler=TarZstdArchive ;;
  *) kind=tar; handler=TarArchive ;;
esac
echo "@@handler $handler"
# like Ansible: its tar handlers do not support check mode (the task is skipped); zip does
if [ $kind = tar ] && [ "$check" = 1 ]; then echo "@@tar_check 1"; exit 0; fi
if [ $kind = zip ]; then
  if command -v unzip >/dev/null 2>&1; then lister="unzip -Z1"; else lister=""; fi
  [ -n "$lister" ] || { echo "@@error Failed to find handler for \"$a\": unzip is not installed on the host (apt-get install unzip)"; exit 1; }
else
  tar -tf "$a" >/dev/null 2>&1 || { echo "@@error Failed to find handler for \"$a\". Make sure the required command to extract the file is installed (tar, gzip, bzip2, xz, zstd) and that it is an archive."; exit 1; }
fi
x=$(mktemp -d "$d/.pv-unarchive.XXXXXX") || exit 1
trap 'rm -rf "$x" "$x.report"; [ -n "$tmpa" ] && rm -f "$tmpa"' EXIT
if [ $kind = zip ]; then
  unzip -Z1 "$a" | sed 's/^/@@file /'
  pv_extract_zip || { echo "@@error extracting $a failed"; exit 1; }
else
  tar -tf "$a" | sed 's/^/@@file /'
  pv_extract_tar || { echo "@@error extracting $a failed"; exit 1; }
fi
pv_attrs || exit 1
(cd "$x" && find . -mindepth 1) | while IFS= read -r f; do
  s="$x/${f#./}"; t="$d/${f#./}"
  if [ -L "$s" ]; then
    [ -L "$t" ] && [ "$(readlink "$s")" = "$(readlink "$t")" ] || echo "@@changed $f"
    continue
  fi
  if [ -d "$s" ]; then [ -d "$t" ] && [ ! -L "$t" ] || { echo "@@changed $f"; continue; }
  else
    if [ "$keep" = 1 ] && [ -e "$t" ] && [ "$t" -nt "$s" ]; then continue; fi
    [ -f "$t" ] && [ ! -L "$t" ] && cmp -s "$s" "$t" || { echo "@@changed $f"; continue; }
  fi
  [ "$(stat -c %a:%u:%g "$s")" = "$(stat -c %a:%u:%g "$t")" ] || echo "@@changed $f"
done > "$x.report" || exit 1
if [ -s "$x.report" ]; then
  head -n 20 "$x.report"; echo "@@count $(wc -l < "$x.report")"
  if [ "$check" = 0 ]; then
    # entry by entry: copying "$x/." would give dest the scratch dir's own mode (0700)
    u=""; [ "$keep" = 1 ] && u=-u
    for e in "$x"/* "$x"/.[!.]* "$x"/..?*; do
      [ -e "$e" ] || [ -L "$e" ] || continue
      cp -a $u "$e" "$d"/ || exit 1
    done
  fi
fi
rm -f "$x.report"
"""


@register
class Unarchive(Module):
    name = "unarchive"
    args = {
        "src": Arg("str", required=True),
        "dest": Arg("path", required=True),
        "remote_src": Arg("bool"),
        "copy": Arg("bool"),
        "creates": Arg("path"),
        "list_files": Arg("bool", default=False),
        "keep_newer": Arg("bool", default=False),
        "exclude": Arg("list", elements="str", default=[]),
        "include": Arg("list", elements="str", default=[]),
        "extra_opts": Arg("list", elements="str", default=[]),
        "validate_certs": Arg("bool", default=True),
        "io_buffer_size": Arg("int", default=64 * 1024),
        "decrypt": Arg("bool", default=True),
        **ATTR_ARGS,
    }
    mutually_exclusive = (("copy", "remote_src"), ("include", "exclude"))

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        remote = bool(args.get("remote_src")) if args.get("copy") is None else not args["copy"]
        src = str(args["src"])
        url = urlparse(src).scheme in ("http", "https", "ftp")
        if url and not remote:
            raise ModuleFailure(f"Unsupported option, an URI src ({src}) is only supported when remote_src is True")
        payload = None
        if not remote:
            local = ctx.find_file(src, "files")
            if local.is_dir():
                raise ModuleFailure(f"src {src} is a directory; unarchive takes an archive file")
            payload = local.read_bytes()
        if args.get("creates"):
            probe = ctx.run(sh("[ -e {p} ]", p=host_path(args["creates"])))
            if probe.ok:
                return ModuleResult(skipped=True, msg=f"skipped, since {args['creates']} exists")
        if payload is not None:
            source = Raw('tmpa=$(mktemp "${TMPDIR:-/tmp}/.pv-archive.XXXXXX") || exit 1; cat > "$tmpa" || exit 1; a=$tmpa')
        elif url:
            source = sh(
                'tmpa=$(mktemp "${TMPDIR:-/tmp}/.pv-archive.XXXXXX") || exit 1; a=$tmpa; '
                "if command -v curl >/dev/null 2>&1; then curl -fsSL {k} --max-time 600 -o \"$a\" {u} || "
                '{ echo "@@error download of" {u} "failed"; exit 1; }; '
                'else wget -q {w} -T 600 -O "$a" {u} || { echo "@@error download of" {u} "failed"; exit 1; }; fi',
                u=src,
                k=Raw("" if args["validate_certs"] else "-k"),
                w=Raw("" if args["validate_certs"] else "--no-check-certificate"),
            )
        else:
            source = sh(
                'tmpa=""; a={p}; [ -f "$a" ] || { echo "@@error Source \'$a\' does not exist"; exit 1; }',
                p=host_path(src),
            )
        include, exclude, extra = args["include"], args["exclude"], args["extra_opts"]
        zip_fn = sh(
            'pv_extract_zip() { unzip -q -o {extra} "$a" {inc} {x} -d "$x" >/dev/null; }',
            extra=extra,
            inc=include,
            x=Raw(sh("-x {e}", e=exclude) if exclude else ""),
        )
        tar_fn = sh(
            'pv_extract_tar() { tar -xf "$a" -C "$x" {extra} {excl} {inc}; }',
            extra=extra,
            excl=[f"--exclude={e}" for e in exclude],
            inc=include,
        )
        mode, owner, group = args.get("mode"), args.get("owner"), args.get("group")
        attr_parts = []
        if mode:
            attr_parts.append(sh('chmod -R {m} "$x"', m=mode))
        if owner:
            attr_parts.append(sh('chown -R {o} "$x"', o=owner))
        if group:
            attr_parts.append(sh('chgrp -R {g} "$x"', g=group))
        attrs_fn = Raw("pv_attrs() { " + ("; ".join(attr_parts) + " || return 1; " if attr_parts else "") + ":; }")
        script = sh(
            "d={d}; check={check}; keep={keep}; tmpa=\"\"\n{source}\n{zip_fn}\n{tar_fn}\n{attrs_fn}\n{body}",
            d=host_path(args["dest"]),
            check="1" if ctx.check_mode else "0",
            keep="1" if args["keep_newer"] else "0",
            source=source,
            zip_fn=zip_fn,
            tar_fn=tar_fn,
            attrs_fn=attrs_fn,
            body=Raw(_BODY),
        )
        result = ctx.run(script, stdin=payload)
        report = parse_report(result.stdout)
        files = [ln[len("@@file ") :] for ln in result.stdout.splitlines() if ln.startswith("@@file ")]
        if report.errors or not result.ok:
            raise ModuleFailure(
                "; ".join(report.errors) or result.stderr.strip() or f"exit code {result.exit_code}",
                dest=str(args["dest"]),
                src=src,
            )
        if "tar_check" in report.values:
            return ModuleResult(
                skipped=True, msg="remote module (unarchive) does not support check mode when using gtar"
            )
        data: dict[str, Any] = {"dest": str(args["dest"]), "src": src, "handler": report.values.get("handler", "")}
        if args["list_files"]:
            data["files"] = files
        changed = bool(report.changed)
        out = ModuleResult(changed=changed, data=data)
        if ctx.diff and changed:
            count = report.values.get("count", str(len(report.changed)))
            note = f"{count} entries differ: " + ", ".join(report.changed)
            dest = str(args["dest"])
            out.diff = [{"before": "", "after": "", "before_header": dest, "after_header": dest, "note": note, "prepared": note}]
        return out


__all__ = ["Unarchive"]
