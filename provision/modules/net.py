"""Network-facing steps on the host: `get_url` (download with checksum) and `wait_for`.

Both are one shell script per task: the download runs on the host with curl, else wget, else the
host's python3 (only then is an interpreter started); waiting loops on the host, bounded by
`timeout`, so the controller sends one command however long the wait.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlparse

from provision.modules.base import (
    Arg,
    Module,
    ModuleFailure,
    ModuleResult,
    TaskContext,
    q,
    qpath,
    register,
)
from provision.modules.files import _ATTR_ARGS, _ATTRS_FN, _attrs_call, parse_report

_ALGORITHMS = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512")
_PY_FETCH = (
    "import shutil,ssl,sys,urllib.request as u\n"
    "ctx=None if sys.argv[4]=='1' else ssl._create_unverified_context()\n"
    "r=u.Request(sys.argv[1],headers=dict(h.split(': ',1) for h in sys.argv[5:]))\n"
    "with u.urlopen(r,timeout=float(sys.argv[3]),context=ctx) as s, open(sys.argv[2],'wb') as f: shutil.copyfileobj(s,f)\n"
)


def parse_checksum(value: str | None) -> tuple[str, str] | None:
    """`sha256:abc...` -> ("sha256", "abc..."); a bare 64-hex string means sha256."""
    if not value:
        return None
    algo, sep, digest = str(value).partition(":")
    if not sep:
        algo, digest = "sha256", algo
    algo = algo.lower().strip()
    digest = digest.strip().lower()
    if algo not in _ALGORITHMS:
        raise ModuleFailure(
            f"checksum algorithm {algo!r} is not supported (use one of {', '.join(_ALGORITHMS)})"
        )
    if not re.fullmatch(r"[0-9a-f]+", digest):
        raise ModuleFailure(f"checksum {value!r} is not ALGORITHM:HEXDIGEST")
    return algo, digest


@register
class GetUrl(Module):
    name = "get_url"
    args = {
        "url": Arg("str", required=True),
        "dest": Arg("path", required=True),
        "checksum": Arg("str"),
        "force": Arg("bool", default=False),
        "timeout": Arg("int", default=10),
        "headers": Arg("dict"),
        "validate_certs": Arg("bool", default=True),
        **_ATTR_ARGS,
    }

    def check_args(self, args: dict[str, Any]) -> list[str]:
        url = str(args.get("url") or "")
        if urlparse(url).scheme not in ("http", "https", "ftp"):
            return [f"url {url!r} must start with http://, https:// or ftp://"]
        try:
            parse_checksum(args.get("checksum"))
        except ModuleFailure as exc:
            return [exc.msg]
        return []

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        url = args["url"]
        checksum = parse_checksum(args.get("checksum"))
        algo, want = checksum if checksum else ("sha256", "")
        timeout = int(args["timeout"])
        headers = [f"{k}: {v}" for k, v in (args.get("headers") or {}).items()]
        name = urlparse(url).path.rstrip("/").rsplit("/", 1)[-1] or "index.html"
        check = ctx.check_mode
        insecure = not args["validate_certs"]
        curl = (
            'curl -fsSL --retry 2 --connect-timeout {t} --max-time {m} {k}{h} -o "$t" "$u"'.format(
                t=timeout,
                m=max(timeout * 30, 60),
                k="-k " if insecure else "",
                h=" ".join(f"-H {q(h)}" for h in headers),
            )
        )
        wget = 'wget -q -T {t} {k}{h} -O "$t" "$u"'.format(
            t=timeout,
            k="--no-check-certificate " if insecure else "",
            h=" ".join(f"--header={q(h)}" for h in headers),
        )
        python = (
            f'python3 -c {q(_PY_FETCH)} "$u" "$t" {timeout} {0 if insecure else 1} '
            + " ".join(q(h) for h in headers)
        )
        script = f"""{_ATTRS_FN}
d={qpath(args["dest"])}; u={q(url)}; want={q(want)}
if [ -d "$d" ]; then d="$d"/{q(name)}; fi
echo "@@path $d"
fresh=0
if [ -f "$d" ]; then
  if [ -n "$want" ]; then cur=$({algo}sum < "$d"); [ "${{cur%% *}}" = "$want" ] && fresh=1
  elif [ {1 if args["force"] else 0} = 0 ]; then fresh=1; fi
fi
if [ $fresh = 0 ]; then
  echo "@@changed download"
  if [ {1 if check else 0} = 0 ]; then
    dir=$(dirname "$d"); [ -d "$dir" ] || {{ echo "@@error destination directory $dir does not exist"; exit 1; }}
    t="$dir/.$(basename "$d").pvdl.$$"; trap 'rm -f "$t"' EXIT
    if command -v curl >/dev/null 2>&1; then {curl} || {{ echo "@@error download of $u failed (curl exit $?)"; exit 1; }}
    elif command -v wget >/dev/null 2>&1; then {wget} || {{ echo "@@error download of $u failed (wget exit $?)"; exit 1; }}
    elif command -v python3 >/dev/null 2>&1; then {python} || {{ echo "@@error download of $u failed (python3)"; exit 1; }}
    else echo "@@error no curl, wget or python3 on the host to download with"; exit 1; fi
    got=$({algo}sum < "$t"); got=${{got%% *}}
    echo "@@got $got"
    if [ -n "$want" ] && [ "$got" != "$want" ]; then echo "@@error checksum mismatch for $u: expected {algo}:$want, got {algo}:$got"; exit 1; fi
    if [ -f "$d" ] && cmp -s "$t" "$d"; then echo "@@same 1"; rm -f "$t"; else mv -f "$t" "$d" || exit 1; fi
    trap - EXIT
  fi
fi
if [ -e "$d" ]; then {_attrs_call("$d", args, check).strip() or ":"}; fi
"""
        result = ctx.run(script)
        report = parse_report(result.stdout)
        if report.errors or not result.ok:
            raise ModuleFailure(
                "; ".join(report.errors)
                or result.stderr.strip()
                or f"exit code {result.exit_code}",
                url=url,
            )
        changes = [c for c in report.changed if not (c == "download" and "same" in report.values)]
        data = {"dest": report.values.get("path", args["dest"]), "url": url}
        if "got" in report.values:
            data[f"checksum_{algo}" if algo != "sha1" else "checksum_src"] = report.values["got"]
        msg = "OK (downloaded)" if "download" in changes else "file already present"
        if check and "download" in changes:
            msg = "would download"
        return ModuleResult(changed=bool(changes), msg=msg, data=data)


_PORT_FN = r"""
pv_port() {
  if command -v bash >/dev/null 2>&1; then
    timeout "$3" bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" >/dev/null 2>&1; return $?
  elif command -v nc >/dev/null 2>&1; then nc -z -w "$3" "$1" "$2" >/dev/null 2>&1; return $?
  else python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), float(sys.argv[3]))' "$1" "$2" "$3" >/dev/null 2>&1; return $?
  fi
}
"""


@register
class WaitFor(Module):
    name = "wait_for"
    args = {
        "host": Arg("str", default="127.0.0.1"),
        "port": Arg("int"),
        "path": Arg("path"),
        "state": Arg("str", default="started", choices=("started", "stopped", "present", "absent")),
        "timeout": Arg("int", default=300),
        "delay": Arg("int", default=0),
        "sleep": Arg("float", default=1),
        "search_regex": Arg("str"),
        "connect_timeout": Arg("int", default=5),
        "msg": Arg("str"),
    }
    mutually_exclusive = (("port", "path"),)

    def check_args(self, args: dict[str, Any]) -> list[str]:
        if args.get("search_regex") and not args.get("path"):
            return ["search_regex needs path (searching a port's banner is not supported)"]
        return []

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        state = args["state"]
        if args.get("port") is not None:
            probe = f"pv_port {q(args['host'])} {int(args['port'])} {int(args['connect_timeout'])}"
            what = f"{args['host']}:{args['port']}"
        elif args.get("path"):
            probe = '[ -e "$p" ]'
            if args.get("search_regex"):
                probe += f' && grep -Eq -- {q(args["search_regex"])} "$p"'
            what = args["path"]
        else:
            probe, what = "false", f"{args['delay']}s"  # plain sleep
        if not args.get("port") and not args.get("path"):
            if not ctx.check_mode:
                ctx.run(f"sleep {int(args['delay']) or int(args['timeout'])}")
            return ModuleResult(changed=False, data={"elapsed": args["delay"]})
        want_up = state in ("started", "present")
        test = probe if want_up else f"! {{ {probe}; }}"
        script = f"""{_PORT_FN}
p={qpath(args["path"]) if args.get("path") else "''"}
start=$(date +%s); end=$((start + {int(args["timeout"])}))
sleep {int(args["delay"])}
while :; do
  if {test}; then echo "@@elapsed $(( $(date +%s) - start ))"; exit 0; fi
  if [ "$(date +%s)" -ge "$end" ]; then echo "@@timeout 1"; exit 0; fi
  sleep {float(args["sleep"]):g}
done
"""
        result = ctx.run(script)
        report = parse_report(result.stdout)
        if "timeout" in report.values:
            default = f"Timeout when waiting for {what} to be {state}"
            return ModuleResult(
                failed=True, msg=args.get("msg") or default, data={"elapsed": args["timeout"]}
            )
        if not result.ok:
            raise ModuleFailure(result.stderr.strip() or f"exit code {result.exit_code}")
        return ModuleResult(
            changed=False, data={"elapsed": int(report.values.get("elapsed", 0)), "state": state}
        )
