"""`git`: clone or update a checkout with the host's git, in one shell round trip.

Follows ansible/modules/git.py: a missing checkout is cloned (`--branch` for a branch or tag,
`--depth` when given, absolute paths as file:// so depth works); an existing one fails on local
modifications unless `force`, gets its remote URL fixed, fetches and switches to `version`
(HEAD = the remote's default branch, a branch = reset to remote/branch, else a tag or commit).
Check mode asks `git ls-remote` for the target commit and changes nothing. Returns `before`,
`after` and `remote_url_changed` like Ansible.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.modules.files import parse_report
from provision.shell import Raw, sh
from provision.shell import path as host_path

_BODY = r"""
set -f  # no word below is a glob: a version of `ma?n` must not become a file's name
command -v "$g" >/dev/null 2>&1 || { echo "@@error git ($g) is not installed on the host (apt-get install git)"; exit 1; }
export LC_ALL=C GIT_TERMINAL_PROMPT=0
o=$(mktemp) || exit 1; trap 'rm -f "$o"' EXIT  # git's messages: a private file, not a fixed name
gitc() { "$g" "$@"; }
if [ -n "${PV_GIT_AUTH:-}" ]; then
  helper='!f() { test "$1" = get || return 0; printf "username=%s\npassword=%s\n" "$PV_GIT_USER" "$PV_GIT_PASS"; }; f'
  # the URL's credentials reach git through a credential helper that prints them from this
  # shell's environment (sent on stdin): never in an argv, never in the URL git stores
  gitc() { "$g" -c credential.helper= -c "credential.helper=$helper" "$@"; }
fi
is_sha() { case "$1" in *[!0-9a-f]*) return 1 ;; esac; [ ${#1} -ge 7 ] && [ ${#1} -le 40 ]; }
remote_head() {
  if [ "$ver" = HEAD ]; then out=$(gitc ls-remote -- "$1" HEAD) || return 1
  else out=$(gitc ls-remote -- "$1" "refs/heads/$ver" "refs/tags/$ver^{}" "refs/tags/$ver") || return 1; fi
  peeled=$(printf '%s\n' "$out" | grep '\^{}$' | head -1 | cut -f1)
  first=$(printf '%s\n' "$out" | head -1 | cut -f1)
  if [ -n "$peeled" ]; then echo "$peeled"; elif [ -n "$first" ]; then echo "$first"
  elif is_sha "$ver"; then echo "$ver"; else return 2; fi
}
if [ "$bare" = 1 ]; then gitcfg="$d/config"; else gitcfg="$d/.git"; fi
if [ ! -e "$gitcfg" ]; then
  if [ "$check" = 1 ] || [ "$clone" = 0 ]; then
    h=$(remote_head "$repo") || { echo "@@error cannot read $repo: version '$ver' not found or repository unreachable"; exit 1; }
    echo "@@after $h"; echo "@@changed clone"; exit 0
  fi
  opts=""
  if [ "$ver" != HEAD ] && ! is_sha "$ver"; then opts="--branch $ver"; fi
  [ -n "$depth" ] && ! is_sha "$ver" && opts="$opts --depth $depth"
  [ "$bare" = 1 ] && opts="$opts --bare"
  [ "$single" = 1 ] && opts="$opts --single-branch"
  mkdir -p "$(dirname "$d")" || exit 1
  # $opts holds only flags built here (ver has no spaces: checked by the controller)
  gitc clone $opts --origin "$remote" -- "$repo" "$d" >"$o" 2>&1 || { echo "@@error git clone failed: $(tail -3 "$o" | tr '\n' ' ')"; exit 1; }
  if [ "$bare" = 0 ] && is_sha "$ver"; then gitc -C "$d" checkout -q --force "$ver" || { echo "@@error version $ver not found in $repo"; exit 1; }; fi
  echo "@@after $(gitc -C "$d" rev-parse HEAD)"; echo "@@changed clone"; exit 0
fi
before=$(gitc -C "$d" rev-parse HEAD 2>/dev/null) || before=""
echo "@@prev $before"
if [ "$update" = 0 ]; then echo "@@after $before"; exit 0; fi
if [ "$bare" = 0 ] && [ -n "$(gitc -C "$d" status --porcelain | grep -v '^??')" ]; then
  if [ "$force" = 0 ]; then echo "@@error Local modifications exist in the destination: $d (force=no)."; exit 1; fi
  echo "@@changed local modifications discarded"; echo "@@localmods 1"
  [ "$check" = 1 ] || gitc -C "$d" reset -q --hard HEAD || exit 1
fi
url=$(gitc -C "$d" config --get "remote.$remote.url")
if [ "$url" != "$repo" ]; then
  echo "@@remote_url_changed 1"; echo "@@changed remote url"
  if [ "$check" = 0 ]; then
    if [ -n "$url" ]; then gitc -C "$d" remote set-url "$remote" "$repo"; else gitc -C "$d" remote add "$remote" "$repo"; fi || exit 1
  fi
fi
if [ "$check" = 1 ]; then
  h=$(remote_head "$repo") || { echo "@@error cannot read $repo: version '$ver' not found or repository unreachable"; exit 1; }
  echo "@@after $h"; [ "$h" = "$before" ] || echo "@@changed version"; exit 0
fi
fopts="--tags --force"; [ -n "$depth" ] && fopts="$fopts --depth $depth"
if [ "$bare" = 1 ]; then spec="+refs/heads/*:refs/heads/*"; else spec="+refs/heads/*:refs/remotes/$remote/*"; fi
gitc -C "$d" fetch -q $fopts "$remote" "$spec" >"$o" 2>&1 || { echo "@@error git fetch failed: $(tail -3 "$o" | tr '\n' ' ')"; exit 1; }
if [ "$bare" = 0 ]; then
  if [ "$ver" = HEAD ]; then
    b=$(gitc -C "$d" ls-remote --symref "$remote" HEAD | awk '$1 == "ref:" && $3 == "HEAD" { sub("^refs/heads/", "", $2); print $2; exit }')
    [ -n "$b" ] || { echo "@@error cannot tell the default branch of $repo"; exit 1; }
    gitc -C "$d" checkout -q --force "$b" && gitc -C "$d" reset -q --hard "$remote/$b" || exit 1
  elif gitc -C "$d" rev-parse -q --verify "refs/remotes/$remote/$ver" >/dev/null; then
    gitc -C "$d" checkout -q --force "$ver" && gitc -C "$d" reset -q --hard "$remote/$ver" || exit 1
  else
    gitc -C "$d" checkout -q --force "$ver" 2>/dev/null || { echo "@@error version $ver not found in $repo"; exit 1; }
  fi
fi
after=$(gitc -C "$d" rev-parse HEAD); echo "@@after $after"
[ "$after" = "$before" ] || echo "@@changed version"
"""


def split_credentials(repo: str) -> tuple[str, dict[str, str]]:
    """An http(s) URL's `user:password@` taken out of it: the URL git is given (and stores in
    .git/config) carries none; the credentials go into the environment the script reads from
    stdin, for its credential helper. (Ansible's git module passes the URL as it is: the token
    is in git's argv, in git-remote-http's and in .git/config.)"""
    parts = urlsplit(repo)
    if parts.scheme.lower() not in ("http", "https") or "@" not in parts.netloc:
        return repo, {}
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    user, password = unquote(user), unquote(password)
    if any(c in "\r\n\0" for c in user + password):
        raise ModuleFailure("the repository URL's credentials hold a line break or NUL byte")
    bare = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    return bare, {"PV_GIT_AUTH": "1", "PV_GIT_USER": user, "PV_GIT_PASS": password}


@register
class Git(Module):
    name = "git"
    args = {
        "repo": Arg("str", required=True, aliases=("name",)),
        "dest": Arg("path"),
        "version": Arg("str", default="HEAD"),
        "remote": Arg("str", default="origin"),
        "refspec": Arg("str"),
        "force": Arg("bool", default=False),
        "depth": Arg("int"),
        "clone": Arg("bool", default=True),
        "update": Arg("bool", default=True),
        "accept_hostkey": Arg("bool", default=False),
        "accept_newhostkey": Arg("bool", default=False),
        "key_file": Arg("path"),
        "ssh_opts": Arg("str"),
        "executable": Arg("path"),
        "bare": Arg("bool", default=False),
        "recursive": Arg("bool", default=True),
        "single_branch": Arg("bool", default=False),
        "umask": Arg("raw"),
    }
    mutually_exclusive = (("accept_hostkey", "accept_newhostkey"),)

    def check_args(self, args: dict[str, Any]) -> list[str]:
        errors = []
        version = str(args.get("version") or "HEAD")
        # glob characters are no part of a ref name (git check-ref-format): refused, not expanded
        if not version or any(c.isspace() or c in "*?[" for c in version) or version.startswith("-"):
            errors.append(f"version {version!r} is not a branch, tag or commit name")
        # git reads a leading `-` as an option (`--upload-pack=CMD` runs CMD): never a name
        for key in ("repo", "remote"):
            value = str(args.get(key) or "")
            if value.startswith("-") or (key == "remote" and any(c.isspace() for c in value)):
                errors.append(f"{key} {value!r} is not a repository URL/path or remote name (it may not start with '-')")
        if args.get("depth") is not None and args["depth"] < 1:
            errors.append("depth must be a positive number of commits")
        if args.get("refspec"):
            errors.append("refspec is not supported by provision's git; fetch the ref with a command task")
        return errors

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        if not args.get("dest"):
            if args["clone"]:
                raise ModuleFailure("the destination directory must be specified unless clone=no")
            raise ModuleFailure("provision's git needs dest")
        repo = str(args["repo"])
        if os.path.expanduser(repo).startswith("/"):
            repo = "file://" + os.path.expanduser(repo)  # as Ansible does, so depth works
        repo, env = split_credentials(repo)
        ssh = ["ssh"]
        if args.get("key_file"):
            ssh += ["-i", str(args["key_file"]), "-o", "IdentitiesOnly=yes"]
        if args["accept_hostkey"]:
            ssh += ["-o", "StrictHostKeyChecking=no"]
        elif args["accept_newhostkey"]:
            ssh += ["-o", "StrictHostKeyChecking=accept-new"]
        if len(ssh) > 1 or args.get("ssh_opts"):
            extra = str(sh("{w}", w=ssh[1:])) if len(ssh) > 1 else ""
            opts = args.get("ssh_opts") or ""
            env["GIT_SSH_COMMAND"] = " ".join(p for p in ("ssh", extra, opts) if p)
        flag = lambda key: "1" if args[key] else "0"  # noqa: E731
        script = sh(
            "g={g}; d={d}; repo={repo}; ver={ver}; remote={remote}; depth={depth}; force={force}; "
            "check={check}; update={update}; clone={clone}; bare={bare}; single={single}\n{body}",
            g=args.get("executable") or "git",
            d=host_path(args["dest"]),
            repo=repo,
            ver=str(args["version"]),
            remote=str(args["remote"]),
            depth=str(args["depth"]) if args.get("depth") else "",
            force=flag("force"),
            check="1" if ctx.check_mode else "0",
            update=flag("update"),
            clone=flag("clone"),
            bare=flag("bare"),
            single=flag("single_branch"),
            body=Raw(_BODY),
        )
        result = ctx.run(script, env=env or None)
        report = parse_report(result.stdout)
        before = report.values.get("prev") or None
        data: dict[str, Any] = {"before": before, "after": report.values.get("after")}
        if "prev" in report.values and args["update"]:
            data["remote_url_changed"] = "remote_url_changed" in report.values
        if report.errors or not result.ok:
            raise ModuleFailure(
                "; ".join(report.errors) or result.stderr.strip() or f"exit code {result.exit_code}", **data
            )
        changed = bool(report.changed)
        out = ModuleResult(changed=changed, data=data)
        if "localmods" in report.values:
            out.msg = f"Local modifications exist in the destination: {args['dest']}"
        if ctx.diff and changed:
            note = f"{before or '(none)'} -> {data['after']}"
            dest = str(args["dest"])
            out.diff = [{"before": "", "after": "", "before_header": dest, "after_header": dest, "note": note}]
        return out


__all__ = ["Git"]
