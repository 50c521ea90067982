"""Network-facing steps on the host: `get_url` (download with checksum) and `wait_for`.

Both are one shell script per task: the download runs on the host with curl, else wget, else the
host's python3 (only then is an interpreter started); waiting loops on the host, bounded by
`timeout`, so the controller sends one command however long the wait.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlparse, urlsplit, urlunsplit

from provision.modules.base import (
    Arg,
    Module,
    ModuleFailure,
    ModuleResult,
    TaskContext,
    register,
)
from provision.modules.files import ATTR_ARGS, ATTRS_FN, attrs_call, parse_report
from provision.secrets import mask_urls
from provision.shell import Raw, path, sh, temp_beside

_ALGORITHMS = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512")
# The URL arrives on stdin, the headers in a 0600 file: neither is ever in an argv (ps).
_PY_FETCH = (
    "import base64,shutil,ssl,sys,urllib.parse as p,urllib.request as u\n"
    "url=sys.stdin.readline().rstrip('\\n')\n"
    "ctx=None if sys.argv[3]=='1' else ssl._create_unverified_context()\n"
    "hs=dict(h.rstrip('\\n').split(': ',1) for h in open(sys.argv[4]) if ': ' in h)\n"
    "s=p.urlsplit(url)\n"
    "if s.password is not None or s.username:\n"
    " hs.setdefault('Authorization','Basic '+base64.b64encode((p.unquote(s.username or '')+':'+p.unquote(s.password or '')).encode()).decode())\n"
    " url=p.urlunsplit((s.scheme,s.netloc.rpartition('@')[2],s.path,s.query,s.fragment))\n"
    "r=u.Request(url,headers=hs)\n"
    "with u.urlopen(r,timeout=float(sys.argv[2]),context=ctx) as f, open(sys.argv[1],'wb') as o: shutil.copyfileobj(f,o)\n"
)
# curl reads its URL and headers as a config file on stdin (`-K -`), quoted: \\ and \" escaped
_CURL_CONFIG = (
    """{ printf '%s\\n' "$u" | sed -e 's/[\\\\"]/\\\\&/g' -e 's/^/url = "/' -e 's/$/"/'; """
    """sed -e 's/[\\\\"]/\\\\&/g' -e 's/^/header = "/' -e 's/$/"/' "$hf"; }"""
)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _url_with_login(url: str, user: str | None, password: str | None) -> str:
    """`url_username`/`url_password` folded into the URL's userinfo (it travels on stdin)."""
    if not user and not password:
        return url
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    login = quote(user or parts.username or "", safe="")
    if password is not None:
        login += ":" + quote(password, safe="")
    return urlunsplit((parts.scheme, f"{login}@{host}", parts.path, parts.query, parts.fragment))


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
        "url_username": Arg("str", aliases=("username",)),
        "url_password": Arg("str", aliases=("password",), no_log=True),
        **ATTR_ARGS,
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
        url = _url_with_login(args["url"], args.get("url_username"), args.get("url_password"))
        shown = mask_urls(url)  # what errors and results say
        checksum = parse_checksum(args.get("checksum"))
        algo, want = checksum if checksum else ("sha256", "")
        timeout = int(args["timeout"])
        headers = []
        for key, value in (args.get("headers") or {}).items():
            line = f"{key}: {'' if value is None else value}"
            if not _HEADER_NAME.fullmatch(str(key)) or any(c in line for c in "\r\n\0"):
                raise ModuleFailure(
                    f"header {str(key)!r} is not a valid HTTP header (a token name, a one-line value)"
                )
            headers.append(line)
        if any(c in url for c in "\r\n\0\t ") :
            raise ModuleFailure(f"url {shown!r} contains whitespace or control characters (%-encode them)")
        name = urlparse(url).path.rstrip("/").rsplit("/", 1)[-1] or "index.html"
        check = ctx.check_mode
        insecure = not args["validate_certs"]
        curl = sh(
            "{config} | curl -fsSL --retry 2 --connect-timeout {t} --max-time {m} {k} -K - -o \"$t\"",
            config=Raw(_CURL_CONFIG),
            t=str(timeout),
            m=str(max(timeout * 30, 60)),
            k=["-k"] if insecure else [],
        )
        wget = sh(
            # credentials go with the first request, as curl sends them (no 401 round trip)
            "wf=$(mktemp) && { echo 'auth_no_challenge = on'; sed 's/^/header = /' \"$hf\"; } > \"$wf\" && "
            "printf '%s\\n' \"$u\" | wget -q -T {t} {k} --config=\"$wf\" -i - -O \"$t\"; "
            'rc=$?; rm -f "$wf"; [ $rc = 0 ]',
            t=str(timeout),
            k=["--no-check-certificate"] if insecure else [],
        )
        python = sh(
            "printf '%s\\n' \"$u\" | python3 -c {code} \"$t\" {t} {verify} \"$hf\"",
            code=_PY_FETCH,
            t=str(timeout),
            verify="0" if insecure else "1",
        )
        script = sh(
            _GET_URL_SCRIPT,
            attrs_fn=Raw(ATTRS_FN),
            dest=path(args["dest"]),
            # the script names the URL by a token the controller replaces: its user name (often
            # a token itself) and path stay out of the host's process list with the password
            shown=_URL_TOKEN,
            want=want,
            name=name,
            sum=f"{algo}sum",
            algo=algo,
            force="1" if args["force"] else "0",
            check="1" if check else "0",
            curl=curl,
            wget=wget,
            python=python,
            temp=temp_beside("t", "d"),
            attrs=Raw(attrs_call("$d", args, check).strip() or ":"),
        )
        secret_input = (url + "\n" + "".join(h + "\n" for h in headers)).encode()
        result = ctx.run(script, stdin=secret_input)
        report = parse_report(result.stdout)
        if report.errors or not result.ok:
            raise ModuleFailure(
                mask_urls(
                    "; ".join(report.errors)
                    or result.stderr.strip()
                    or f"exit code {result.exit_code}"
                ).replace(_URL_TOKEN, shown),
                url=shown,
            )
        changes = [c for c in report.changed if not (c == "download" and "same" in report.values)]
        data = {"dest": report.values.get("path", args["dest"]), "url": shown}
        if "got" in report.values:
            data[f"checksum_{algo}" if algo != "sha1" else "checksum_src"] = report.values["got"]
        msg = "OK (downloaded)" if "download" in changes else "file already present"
        if check and "download" in changes:
            msg = "would download"
        return ModuleResult(changed=bool(changes), msg=msg, data=data)


_URL_TOKEN = "@@url@@"

# One round trip. stdin: the URL (line 1, may hold user:password), then one header per line.
_GET_URL_SCRIPT = r"""{attrs_fn}
IFS= read -r u || { echo "@@error no URL on stdin"; exit 1; }
hf=$(mktemp) || exit 1; t=""; trap 'rm -f "$hf" "$t"' EXIT
cat > "$hf" || exit 1
d={dest}; shown={shown}; want={want}
if [ -d "$d" ]; then d="$d"/{name}; fi
echo "@@path $d"
fresh=0
if [ -f "$d" ]; then
  if [ -n "$want" ]; then cur=$({sum} < "$d"); [ "${cur%% *}" = "$want" ] && fresh=1
  elif [ {force} = 0 ]; then fresh=1; fi
fi
if [ $fresh = 0 ]; then
  echo "@@changed download"
  if [ {check} = 0 ]; then
    dir=$(dirname "$d"); [ -d "$dir" ] || { echo "@@error destination directory $dir does not exist"; exit 1; }
    {temp} || { echo "@@error cannot create a temporary file in $dir"; exit 1; }
    if command -v curl >/dev/null 2>&1; then {curl} || { echo "@@error download of $shown failed (curl exit $?)"; exit 1; }
    elif command -v wget >/dev/null 2>&1; then {wget} || { echo "@@error download of $shown failed (wget)"; exit 1; }
    elif command -v python3 >/dev/null 2>&1; then {python} || { echo "@@error download of $shown failed (python3)"; exit 1; }
    else echo "@@error no curl, wget or python3 on the host to download with"; exit 1; fi
    got=$({sum} < "$t"); got=${got%% *}
    echo "@@got $got"
    if [ -n "$want" ] && [ "$got" != "$want" ]; then echo "@@error checksum mismatch for $shown: expected {algo}:$want, got {algo}:$got"; exit 1; fi
    if [ -f "$d" ] && cmp -s "$t" "$d"; then echo "@@same 1"; rm -f "$t"; else mv -f "$t" "$d" || exit 1; fi
  fi
fi
if [ -e "$d" ]; then {attrs}; fi
"""


_PORT_FN = r"""
pv_port() {
  if command -v bash >/dev/null 2>&1; then
    timeout "$3" bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" >/dev/null 2>&1; return $?
  elif command -v nc >/dev/null 2>&1; then nc -z -w "$3" "$1" "$2" >/dev/null 2>&1; return $?
  else python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), float(sys.argv[3]))' "$1" "$2" "$3" >/dev/null 2>&1; return $?
  fi
}
"""


# bounded on the host: one command however long the wait
_WAIT_SCRIPT = """{port_fn}
p={p}
start=$(date +%s); end=$((start + {timeout}))
sleep {delay}
while :; do
  if {test}; then echo "@@elapsed $(( $(date +%s) - start ))"; exit 0; fi
  if [ "$(date +%s)" -ge "$end" ]; then echo "@@timeout 1"; exit 0; fi
  sleep {sleep}
done
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
            probe = sh(
                "pv_port {host} {port} {t}",
                host=args["host"],
                port=str(int(args["port"])),
                t=str(int(args["connect_timeout"])),
            )
            what = f"{args['host']}:{args['port']}"
        elif args.get("path"):
            probe = Raw('[ -e "$p" ]')
            if args.get("search_regex"):
                probe = sh('{probe} && grep -Eq -- {regex} "$p"', probe=probe, regex=args["search_regex"])
            what = args["path"]
        else:
            probe, what = Raw("false"), f"{args['delay']}s"  # plain sleep
        if not args.get("port") and not args.get("path"):
            if not ctx.check_mode:
                ctx.run(sh("sleep {s}", s=str(int(args["delay"]) or int(args["timeout"]))))
            return ModuleResult(changed=False, data={"elapsed": args["delay"]})
        want_up = state in ("started", "present")
        test = probe if want_up else sh("! { {probe}; }", probe=probe)
        script = sh(
            _WAIT_SCRIPT,
            port_fn=Raw(_PORT_FN),
            p=path(args["path"]) if args.get("path") else "",
            timeout=str(int(args["timeout"])),
            delay=str(int(args["delay"])),
            test=test,
            sleep=f"{float(args['sleep']):g}",
        )
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
