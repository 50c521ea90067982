"""APT sources: `apt_repository` (one-line `deb …` entries), `deb822_repository` (`.sources`
files) and `apt_key`.

apt_repository reads /etc/apt/sources.list and every sources.list.d/*.list in one round trip, edits
them like ansible/modules/apt_repository.py (reuse and enable an existing entry anywhere, else a new
file named after the URL; `absent` removes every enabled copy) and writes only the files that
change. deb822_repository renders the file the way Ansible does (fields sorted by option name,
`X-Repolib-Name`, yes/no booleans). Neither needs python3-apt or python3-debian on the host.
`update_cache` runs `apt-get update` only after a change (bounded by `DPkg::Lock::Timeout`).
"""

from __future__ import annotations

import base64
import re
import secrets
import textwrap
from typing import Any

from provision.modules._hostfile import content_diff, read_host_file
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.modules.files import parse_report, put_content
from provision.shell import Raw, sh

_SOURCE_TYPES = ("deb", "deb-src")
_SOURCES_D = "/etc/apt/sources.list.d"


def parse_source(line: str) -> tuple[bool, bool, str, str]:
    """(valid, enabled, source, comment) of one sources.list line, as Ansible parses it."""
    line = line.strip()
    enabled = True
    if line.startswith("#"):
        enabled = False
        line = line[1:]
    comment = ""
    i = line.find("#")
    if i > 0:
        comment = line[i + 1 :].strip()
        line = line[:i]
    source = line.strip()
    valid = False
    if source:
        chunks = source.split()
        if chunks[0] in _SOURCE_TYPES:
            valid = True
            source = " ".join(chunks)
    return valid, enabled, source, comment


def suggest_filename(source: str, filename: str | None) -> str:
    """Ansible's file name for a new entry: `deb http://x.org/y stable main` → x_org_y.list."""
    if filename is not None:
        return f"{filename}.list" if not filename.endswith(".list") else filename
    line = re.sub(r"\[[^\]]+\]", "", source)
    line = re.sub(r"\w+://", "", line)
    parts = [p for p in line.split() if p not in _SOURCE_TYPES]
    if "@" in parts[0]:
        parts[0] = parts[0].split("@", 1)[-1]
    return "_".join(re.sub("[^a-zA-Z0-9]", " ", parts[0]).split()) + ".list"


def _dump(entries: list[tuple[bool, bool, str, str, str]]) -> str:
    """Lines back to text: kept raw lines as they were, sources normalised like Ansible."""
    out = []
    for valid, enabled, source, comment, raw in entries:
        if not valid:
            out.append(raw)
            continue
        out.append(("" if enabled else "# ") + source + (f" # {comment}" if comment else "") + "\n")
    return "".join(out)


def edit_sources(
    files: dict[str, str], repo: str, state: str, new_file: str
) -> dict[str, str | None]:
    """Ansible's add_source/remove_source over all files: {path: new text, or None to delete a
    file left empty}. Like Ansible, files are compared in normalised form, and only those that
    differ are returned."""
    valid, _, source, _ = parse_source(repo)
    if not valid:
        raise ModuleFailure(f"Invalid repository string: {repo} (expected 'deb [options] URI suite [components]')")
    parsed = {
        path: [(*parse_source(line), line + "\n") for line in text.splitlines()]
        for path, text in files.items()
    }
    before = {path: _dump(entries) for path, entries in parsed.items()}
    if state == "present":
        found = False
        for entries in parsed.values():
            for i, (ok, _enabled, src, comment, raw) in enumerate(entries):
                if ok and src == source:
                    entries[i] = (ok, True, src, comment, raw)
                    found = True
        if not found:
            parsed.setdefault(new_file, []).append((True, True, source, "", ""))
    else:
        for path, entries in parsed.items():
            parsed[path] = [e for e in entries if not (e[0] and e[2] == source and e[1])]
    changes: dict[str, str | None] = {}
    for path, entries in parsed.items():
        if not entries:
            if path in files:
                changes[path] = None
            continue
        text = _dump(entries)
        if text != before.get(path):
            changes[path] = text
    return changes


_READ_SOURCES = r"""
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  echo "@@file $f $(base64 < "$f" | tr -d '\n')"
done
"""


def _apt_update(ctx: TaskContext) -> None:
    result = ctx.run(
        Raw(
            't=$(mktemp) || exit 1; DEBIAN_FRONTEND=noninteractive apt-get update -q -o DPkg::Lock::Timeout=120 '
            '> "$t" 2>&1; rc=$?; tail -3 "$t"; rm -f "$t"; exit $rc'
        )
    )
    if not result.ok:
        raise ModuleFailure(
            "apt-get update failed after changing the sources: " + " | ".join(result.stdout.strip().splitlines()[-3:])
        )


@register
class AptRepository(Module):
    name = "apt_repository"
    args = {
        "repo": Arg("str", required=True),
        "state": Arg("str", default="present", choices=("absent", "present")),
        "mode": Arg("mode"),
        "update_cache": Arg("bool", default=True, aliases=("update-cache",)),
        "update_cache_retries": Arg("int", default=5),
        "update_cache_retry_max_delay": Arg("int", default=12),
        "filename": Arg("str"),
        "install_python_apt": Arg("bool", default=True),
        "validate_certs": Arg("bool", default=True),
        "codename": Arg("str"),
    }

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        repo = str(args["repo"])
        if repo.startswith("ppa:"):
            raise ModuleFailure(
                "ppa: repositories need Launchpad lookups that provision does not make; give the deb line "
                "(deb [signed-by=/etc/apt/keyrings/X.gpg] https://ppa.launchpadcontent.net/OWNER/PPA/ubuntu CODENAME main)"
            )
        listing = ctx.run(Raw(_READ_SOURCES))
        if not listing.ok:
            raise ModuleFailure(f"cannot read the APT sources: {listing.stderr.strip()}")
        files: dict[str, str] = {}
        for line in listing.stdout.splitlines():
            if line.startswith("@@file "):
                path, _, data = line[len("@@file ") :].rpartition(" ")
                files[path] = base64.b64decode(data).decode("utf-8", "surrogateescape")
        _, _, source, _ = parse_source(repo)
        new_file = f"{_SOURCES_D}/{suggest_filename(source, args.get('filename'))}" if source else ""
        changes = edit_sources(files, repo, args["state"], new_file)
        diff = []
        for path, text in sorted(changes.items()):
            diff.extend(content_diff((files.get(path) or "").encode(), (text or "").encode(), path))
            if ctx.check_mode:
                continue
            if text is None:
                result = ctx.run(sh("rm -f -- {p}", p=path))
                if not result.ok:
                    raise ModuleFailure(f"cannot remove {path}: {result.stderr.strip()}")
            else:
                sub = TaskContext(**{**ctx.__dict__, "args": {"mode": args.get("mode") or ("644" if path not in files else None)}})
                put_content(sub, text.encode("utf-8", "surrogateescape"), path)
        if changes and not ctx.check_mode and args["update_cache"]:
            _apt_update(ctx)
        added = sorted(p for p, t in changes.items() if t is not None and p not in files)
        removed = sorted(p for p, t in changes.items() if t is None)
        out = ModuleResult(
            changed=bool(changes),
            data={"repo": repo, "state": args["state"], "sources_added": added, "sources_removed": removed},
        )
        if ctx.diff and changes:
            out.diff = diff
        return out


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "", re.sub(r"[_\s]+", "-", name.lower()))


def render_deb822(params: dict[str, Any]) -> str:
    """The .sources text Ansible writes: fields in option-name order, lists space-joined."""
    lines = []
    for key in sorted(params):
        value = params[key]
        if value is None:
            continue
        if isinstance(value, bool):
            value = "yes" if value else "no"
        elif isinstance(value, int):
            value = str(value)
        elif isinstance(value, (list, tuple)):
            value = " ".join(str(v) for v in value)
        value = str(value)
        if "\n" in value.strip():
            value = "\n" + textwrap.indent("\n".join(ln.strip() or "." for ln in value.strip().splitlines()), "    ")
        field = {"name": "X-Repolib-Name", "uris": "URIs"}.get(key) or key.replace("_", "-").title()
        lines.append(f"{field}: {value}" if not value.startswith("\n") else f"{field}:{value}")
    return "\n".join(lines) + "\n"


_DEB822_FIELDS = (
    "allow_downgrade_to_insecure", "allow_insecure", "allow_weak", "architectures", "by_hash",
    "check_date", "check_valid_until", "components", "date_max_future", "enabled",
    "inrelease_path", "languages", "name", "pdiffs", "signed_by", "suites", "targets",
    "trusted", "types", "uris",
)  # fmt: skip


@register
class Deb822Repository(Module):
    name = "deb822_repository"
    args = {
        **{k: Arg("bool") for k in ("allow_downgrade_to_insecure", "allow_insecure", "allow_weak", "by_hash",
                                    "check_date", "check_valid_until", "enabled", "pdiffs", "trusted")},
        **{k: Arg("list", elements="str") for k in ("architectures", "components", "languages", "suites", "targets", "uris")},
        "date_max_future": Arg("int"),
        "inrelease_path": Arg("str"),
        "name": Arg("str", required=True),
        "signed_by": Arg("str"),
        "types": Arg("list", elements="str", default=["deb"]),
        "mode": Arg("mode", default="644"),
        "state": Arg("str", default="present", choices=("present", "absent")),
    }  # fmt: skip

    def check_args(self, args: dict[str, Any]) -> list[str]:
        bad = [t for t in args.get("types") or [] if t not in _SOURCE_TYPES]
        return [f"types: {t!r} must be deb or deb-src" for t in bad]

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        slug = _slug(str(args["name"]))
        dest = f"{_SOURCES_D}/{slug}.sources"
        if args["state"] == "absent":
            script = sh(
                'c=0; for f in {files}; do if [ -e "$f" ]; then echo "@@changed $f"; [ {check} = 1 ] || rm -f -- "$f" || exit 1; fi; done',
                files=[dest, f"/etc/apt/keyrings/{slug}.asc", f"/etc/apt/keyrings/{slug}.gpg"],
                check="1" if ctx.check_mode else "0",
            )
            result = ctx.run(script)
            if not result.ok:
                raise ModuleFailure(f"cannot remove {dest}: {result.stderr.strip()}")
            changed = bool(parse_report(result.stdout).changed)
            return ModuleResult(changed=changed, data={"repo": None, "dest": dest, "key_filename": None})
        signed_by = args.get("signed_by")
        if signed_by and re.match(r"^\w+://", str(signed_by)):
            raise ModuleFailure(
                f"signed_by {signed_by!r} is a URL: download the key first (get_url to /etc/apt/keyrings/{slug}.asc) "
                "and give that path, or paste the armored key block"
            )
        params = {k: args.get(k) for k in _DEB822_FIELDS}
        text = render_deb822(params)
        current = read_host_file(ctx, dest)
        sub = TaskContext(**{**ctx.__dict__, "args": {"mode": args["mode"]}})
        res = put_content(sub, text.encode(), dest, expect_old=current.checksum)
        out = ModuleResult(changed=res.changed, data={"repo": text, "dest": dest, "key_filename": None})
        if ctx.diff and res.changed:
            out.diff = content_diff(current.data, text.encode(), dest)
        return out


@register
class AptKey(Module):
    name = "apt_key"
    args = {
        "id": Arg("str"),
        "data": Arg("str"),
        "file": Arg("path"),
        "keyring": Arg("path"),
        "url": Arg("str"),
        "keyserver": Arg("str"),
        "state": Arg("str", default="present", choices=("absent", "present")),
        "validate_certs": Arg("bool", default=True),
    }
    mutually_exclusive = (("data", "file", "keyserver", "url"),)

    def run(self, ctx: TaskContext) -> ModuleResult:
        """A key into `keyring` (dearmored, compared by content), or through apt-key when no
        keyring is given and the host still has apt-key."""
        args = ctx.args
        if args.get("keyserver"):
            raise ModuleFailure("keyserver lookups are not supported: download the key (url:) or give data:/file:")
        marker = "@@key-" + secrets.token_hex(6)
        if args["state"] == "absent":
            if not args.get("id"):
                raise ModuleFailure("state=absent needs id (the key's fingerprint or its last 8/16 hex digits)")
            if args.get("keyring"):
                script = sh(
                    'k={k}; if [ -f "$k" ] && gpg --show-keys --with-colons "$k" 2>/dev/null | grep "^fpr" | grep -qi -- {id}; then '
                    'echo "@@changed removed"; [ {check} = 1 ] || rm -f -- "$k"; fi',
                    k=str(args["keyring"]), id=str(args["id"]), check="1" if ctx.check_mode else "0",
                )
            else:
                script = sh(
                    'command -v apt-key >/dev/null || { echo "@@error apt-key is not on this host; give keyring:"; exit 1; }; '
                    "if apt-key adv --list-public-keys --with-colons 2>/dev/null | grep '^fpr' | grep -qi -- {id}; then "
                    'echo "@@changed removed"; [ {check} = 1 ] || apt-key del {id} >/dev/null 2>&1 || exit 1; fi',
                    id=str(args["id"]), check="1" if ctx.check_mode else "0",
                )
            result = ctx.run(script)
            report = parse_report(result.stdout)
            if report.errors or not result.ok:
                raise ModuleFailure("; ".join(report.errors) or result.stderr.strip())
            return ModuleResult(changed=bool(report.changed), data={"id": args["id"]})
        if args.get("url"):
            if not str(args["url"]).startswith(("http://", "https://")):  # `-o FILE` etc. would be a curl option
                raise ModuleFailure(f"apt_key url {args['url']!r} must start with http:// or https://")
            fetch = sh('curl -fsSL --max-time 60 {u} > "$t" || wget -q -T 60 -O "$t" {u} || { echo "@@error download of" {u} "failed"; exit 1; }', u=str(args["url"]))
            stdin = None
        elif args.get("file"):
            fetch = sh('cat -- {f} > "$t" || { echo "@@error cannot read" {f}; exit 1; }', f=str(args["file"]))
            stdin = None
        elif args.get("data"):
            fetch, stdin = Raw('cat > "$t"'), str(args["data"]).encode()
        else:
            raise ModuleFailure("apt_key needs one of data, file or url")
        if args.get("keyring"):
            install = sh(
                'k={k}; if [ -f "$k" ] && cmp -s "$t.gpg" "$k"; then :; else echo "@@changed added"; '
                '[ {check} = 1 ] || { mkdir -p "$(dirname "$k")" && kt=$(mktemp "$k.pvtmp.XXXXXX") && cp "$t.gpg" "$kt" '
                '&& chmod 644 "$kt" && mv -f "$kt" "$k"; } || { rm -f "$kt"; exit 1; }; fi',
                k=str(args["keyring"]), check="1" if ctx.check_mode else "0",
            )
        else:
            install = sh(
                'command -v apt-key >/dev/null || { echo "@@error apt-key is not on this host (removed in Debian 13 and Ubuntu 24.04): '
                'give keyring: /etc/apt/keyrings/NAME.gpg, or use deb822_repository with signed_by"; exit 1; }; '
                'fp=$(gpg --show-keys --with-colons "$t.gpg" | awk -F: \'$1=="fpr"{print $10; exit}\'); '
                "if apt-key adv --list-public-keys --with-colons 2>/dev/null | grep -q \"^fpr:.*$fp\"; then :; else "
                'echo "@@changed added"; [ {check} = 1 ] || apt-key add "$t.gpg" >/dev/null 2>&1 || exit 1; fi',
                check="1" if ctx.check_mode else "0",
            )
        script = sh(
            "command -v gpg >/dev/null || { echo \"@@error gpg is not on the host (apt-get install gnupg)\"; exit 1; }\n"
            "t=$(mktemp) || exit 1; trap 'rm -f \"$t\" \"$t.gpg\"' EXIT\n{fetch}\n"
            'if grep -q "BEGIN PGP PUBLIC KEY BLOCK" "$t"; then gpg --dearmor < "$t" > "$t.gpg" || exit 1; else cp "$t" "$t.gpg"; fi\n'
            'gpg --show-keys --with-colons "$t.gpg" 2>/dev/null | awk -F: \'$1=="fpr"{print "{marker} " $10}\' | head -1\n'
            "{install}",
            fetch=fetch,
            marker=Raw(marker),
            install=install,
        )
        result = ctx.run(script, stdin=stdin)
        report = parse_report(result.stdout)
        if report.errors or not result.ok:
            raise ModuleFailure("; ".join(report.errors) or result.stderr.strip() or f"exit code {result.exit_code}")
        fp = ""
        for line in result.stdout.splitlines():
            if line.startswith(marker + " "):
                fp = line.split()[1]
        if not fp:
            raise ModuleFailure("the data is not an OpenPGP public key (gpg found no fingerprint)")
        if args.get("id") and not fp.upper().endswith(str(args["id"]).upper().removeprefix("0X")):
            raise ModuleFailure(f"key id {args['id']} does not match the key's fingerprint {fp}")
        return ModuleResult(
            changed=bool(report.changed),
            data={"fp": fp, "id": fp[-8:], "key_id": fp[-16:], "short_id": fp[-8:]},
        )


__all__ = ["AptKey", "AptRepository", "Deb822Repository", "edit_sources", "render_deb822", "suggest_filename"]
