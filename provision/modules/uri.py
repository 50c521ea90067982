"""`uri`: an HTTP request made from the host (its python3, urllib), one round trip.

The request — URL, headers, body and any password — travels as JSON on stdin, never in argv.
The answer has Ansible's shape: `status`, `url`, `msg` ("OK (N bytes)"), `redirected`, `elapsed`,
every response header lower-cased with `-` → `_`, `content` with `return_content`, `json` when
the body is JSON, `path` with `dest`. A status outside `status_code` fails the task.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode, urlparse

from provision.modules._hostfile import run_host_python
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register

# Host side (Python 3.8+): request JSON on stdin; MARKER (argv[1]) then one JSON line.
_URI_PY = r"""
import base64, json, os, ssl, sys, time, urllib.error, urllib.request
q = json.load(sys.stdin)
def out(d):
    sys.stdout.write(sys.argv[1] + "\n" + json.dumps(d) + "\n"); sys.exit(0)
for key, missing in (("creates", False), ("removes", True)):
    p = q.get(key)
    if p and os.path.exists(os.path.expanduser(p)) != missing:
        out({"skip": "skipped, since '%s' %s" % (p, "does not exist" if missing else "exists")})
class Redirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, hdrs, newurl):
        mode = q["follow_redirects"]
        if mode in ("no", "none"): return None
        if mode == "safe" and req.get_method() not in ("GET", "HEAD"): return None
        return urllib.request.HTTPRedirectHandler.redirect_request(self, req, fp, code, msg, hdrs, newurl)
ctx = ssl.create_default_context()
if not q["validate_certs"]:
    ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
opener = urllib.request.build_opener(Redirect(), urllib.request.HTTPSHandler(context=ctx))
body = q["body"].encode("utf-8", "surrogateescape") if q["body"] is not None else None
if q.get("src"):
    with open(os.path.expanduser(q["src"]), "rb") as f: body = f.read()
headers = dict(q["headers"])
if q.get("user") is not None and q["force_basic_auth"]:
    token = base64.b64encode(("%s:%s" % (q["user"], q.get("password") or "")).encode()).decode()
    headers["Authorization"] = "Basic " + token
req = urllib.request.Request(q["url"], data=body, headers=headers, method=q["method"])
start = time.time()
try:
    r = opener.open(req, timeout=q["timeout"]); status = r.status; hdrs = r.headers
    raw = r.read(); final = r.geturl(); msg = "OK (%s bytes)" % hdrs.get("Content-Length", "unknown")
except urllib.error.HTTPError as e:
    status = e.code; hdrs = e.headers; final = e.geturl() or q["url"]
    try: raw = e.read()
    except Exception: raw = b""
    msg = "HTTP Error %s: %s" % (e.code, e.reason)
except Exception as e:
    out({"error": "Status code was -1 and not %s: Request failed: %s" % (q["status_code"], e),
         "status": -1, "url": q["url"], "elapsed": int(time.time() - start)})
res = {"status": status, "url": final, "msg": msg, "redirected": final != q["url"],
       "elapsed": int(time.time() - start), "cookies": {}, "cookies_string": ""}
for k, v in (hdrs.items() if hdrs is not None else []):
    res[k.replace("-", "_").lower()] = v
ctype = (hdrs.get("Content-Type") if hdrs is not None else None) or "application/octet-stream"
charset = "utf-8"
if "charset=" in ctype: charset = ctype.split("charset=", 1)[1].split(";")[0].strip() or "utf-8"
sub = ctype.split(";")[0].split("/")[-1].strip().lower()
if "+" in sub: sub = sub.partition("+")[2]
text = raw.decode(charset, "replace")
if sub in ("json", "javascript"):
    try: res["json"] = json.loads(text)
    except Exception: pass
if q["return_content"] or status not in q["status_code"]: res["content"] = text
if q.get("dest") and status in q["status_code"] and status != 304:
    dest = os.path.expanduser(q["dest"])
    if os.path.isdir(dest): dest = os.path.join(dest, os.path.basename(q["url"].split("?")[0].rstrip("/")) or "index.html")
    old = None
    if os.path.isfile(dest):
        with open(dest, "rb") as f: old = f.read()
    res["changed"] = old != raw
    if old != raw:
        import tempfile
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(dest) + ".pvtmp.", dir=os.path.dirname(dest) or ".")
        mask = os.umask(0); os.umask(mask); os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as f: f.write(raw)
        os.replace(tmp, dest)
    res["path"] = dest
out(res)
"""


@register
class Uri(Module):
    name = "uri"
    args = {
        "url": Arg("str", required=True),
        "method": Arg("str", default="GET"),
        "body": Arg("raw"),
        "body_format": Arg("str", default="raw", choices=("form-urlencoded", "json", "raw")),
        "src": Arg("path"),
        "headers": Arg("dict", default={}),
        "status_code": Arg("list", elements="int", default=[200]),
        "return_content": Arg("bool", default=False),
        "dest": Arg("path"),
        "creates": Arg("path"),
        "removes": Arg("path"),
        "timeout": Arg("int", default=30),
        "follow_redirects": Arg("str", default="safe", choices=("all", "no", "none", "safe", "urllib2", "yes")),
        "validate_certs": Arg("bool", default=True),
        "url_username": Arg("str", aliases=("user",)),
        "url_password": Arg("str", aliases=("password",), no_log=True),
        "force_basic_auth": Arg("bool", default=False),
        "use_netrc": Arg("bool", default=True),
        "decompress": Arg("bool", default=True),
    }
    mutually_exclusive = (("body", "src"),)
    supports_check_mode = False  # Ansible's uri has no check mode: the task is skipped

    def check_args(self, args: dict[str, Any]) -> list[str]:
        errors = []
        url = str(args.get("url") or "")
        if urlparse(url).scheme not in ("http", "https"):
            errors.append(f"url {url!r} must start with http:// or https://")
        method = str(args.get("method") or "GET")
        if not method.isalpha() or not method.isupper():
            errors.append("Parameter 'method' needs to be a single word in uppercase, like GET or POST.")
        return errors

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        headers = {str(k): str(v) for k, v in (args["headers"] or {}).items()}
        body = args.get("body")
        fmt = args["body_format"]
        if body is not None:
            if fmt == "json":
                if not isinstance(body, str):
                    body = json.dumps(body)
                headers.setdefault("Content-Type", "application/json")
            elif fmt == "form-urlencoded":
                if not isinstance(body, str):
                    try:
                        body = urlencode(dict(body) if not isinstance(body, list) else body, doseq=True)
                    except (TypeError, ValueError) as exc:
                        raise ModuleFailure(f"failed to parse body as form_urlencoded: {exc}") from None
                headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
            elif not isinstance(body, str):
                body = json.dumps(body)
        user = args.get("url_username")
        force_basic = bool(args["force_basic_auth"] or user is not None)  # no 401 round trip
        request = {
            "url": args["url"],
            "method": args["method"],
            "body": body,
            "src": str(args["src"]) if args.get("src") else None,
            "headers": headers,
            "status_code": [int(s) for s in args["status_code"]],
            "return_content": args["return_content"],
            "dest": str(args["dest"]) if args.get("dest") else None,
            "creates": str(args["creates"]) if args.get("creates") else None,
            "removes": str(args["removes"]) if args.get("removes") else None,
            "timeout": int(args["timeout"]),
            "follow_redirects": args["follow_redirects"],
            "validate_certs": args["validate_certs"],
            "user": user,
            "password": args.get("url_password"),
            "force_basic_auth": force_basic,
        }
        answer = run_host_python(
            ctx, _URI_PY, request, timeout=float(args["timeout"]) + 30, what="uri"
        )
        if "skip" in answer:
            return ModuleResult(stdout=answer["skip"])
        if "error" in answer:
            msg = answer.pop("error")
            return ModuleResult(failed=True, msg=msg, data=answer)
        changed = bool(answer.pop("changed", False))
        msg = answer.pop("msg", "")
        status = answer.get("status")
        if status not in request["status_code"]:
            return ModuleResult(
                failed=True,
                msg=f"Status code was {status} and not {request['status_code']}: {msg}",
                data=answer,
            )
        return ModuleResult(changed=changed, msg=msg, data=answer)


__all__ = ["Uri"]
