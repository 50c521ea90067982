"""Which wheel files an index lists for some projects — runs on the HOST (Python 3.8+, stdlib only).

The host's network is the one pip will use, so the question goes from there: the controller sends
this file's text to `python3 -c` over the existing connection, the request as one JSON line on
stdin (credentials included: never in argv), and reads one JSON line back. The controller also
imports it for --offline and --relay, where this machine is the one that downloads.

    request: {"targets": [{"url": U, "flat": false, "projects": ["torch"]}], "timeout": 5, "budget": 15,
              "pip_config": ["torch"]}
    answer:  [{"ok": true, "status": 200, "detail": "", "files": {"torch": ["torch-2.13.0+cpu-...whl"]}}]

With `pip_config` (the projects to ask about), the wheel sources the host's own pip configuration
offers (PIP_INDEX_URL / PIP_EXTRA_INDEX_URL / PIP_FIND_LINKS and the index-url, extra-index-url,
find-links keys of pip's config files) are asked too, after the targets; each of their answers
also carries "url", "usage" ("index" | "find-links") and "origin" (the variable or file).

`flat` is a find-links page (one listing for all projects); otherwise a PEP 503/691 index, asked
at URL/PROJECT/ (JSON preferred, HTML understood: only file names are taken from either). Every
GET is bounded by `timeout`, the whole request by `budget` (targets are asked in parallel, the
answer is back by then whatever a server does); a page is read up to 64 MiB.
"""

import base64
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import unquote, urlsplit, urlunsplit

ACCEPT = (
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
    "text/html;q=0.1"
)
MAX_BYTES = 64 << 20
MAX_FILES = 20000


def wheel_names(body, project):
    """Wheel file names of `project` in a page (HTML anchors, PEP 691 JSON or a flat listing)."""
    name = re.sub(r"[-_.]+", "[-_.]", re.escape(project.lower()).replace("\\", ""))
    pattern = re.compile(
        r"(?<![A-Za-z0-9_.+!-])(" + name + r"-[A-Za-z0-9_.+!-]+?\.whl)(?![A-Za-z0-9_])", re.I
    )
    seen = []
    for found in pattern.findall(unquote(body)):
        if found not in seen:
            seen.append(found)
        if len(seen) >= MAX_FILES:
            break
    return seen


def _request(url):
    """A Request for `url`, credentials moved from the URL into a Basic header."""
    parts = urlsplit(url)
    headers = {"Accept": ACCEPT, "User-Agent": "provision-index-list"}
    if "@" in parts.netloc:
        userinfo, _, hostport = parts.netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        token = base64.b64encode((unquote(user) + ":" + unquote(password)).encode()).decode()
        headers["Authorization"] = "Basic " + token
        url = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    return urllib.request.Request(url, headers=headers)


def _local_path(url):
    """The directory or file a file:// URL or a plain path names; None for a network URL."""
    if url.startswith("file:"):
        return unquote(urlsplit(url).path)
    if "://" in url:
        return None
    return os.path.expanduser(url)


def _read_local(path):
    """(status, body) of a local listing: a directory's file names (and its index.html), or a
    file's text; 404 when neither exists, as an index answers for a project it lacks."""
    if os.path.isdir(path):
        names = sorted(os.listdir(path))[:MAX_FILES]
        body = "\n".join(names)
        if "index.html" in names:
            with open(os.path.join(path, "index.html"), "rb") as fh:
                body += "\n" + fh.read(MAX_BYTES).decode("utf-8", "replace")
        return 200, body
    if os.path.isfile(path):
        with open(path, "rb") as fh:
            return 200, fh.read(MAX_BYTES).decode("utf-8", "replace")
    return 404, ""


def _get(url, timeout):
    """(status, body); a 404 is an answer (the index lacks it), other failures raise."""
    local = _local_path(url)
    if local is not None:
        return _read_local(local)
    try:
        with urllib.request.urlopen(_request(url), timeout=timeout) as r:
            return r.status, r.read(MAX_BYTES).decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return 404, ""
        raise


def list_target(target, deadline, timeout):
    out = {"ok": False, "status": None, "detail": "", "files": {}}
    url = target["url"]
    pages = (
        [(None, url)]
        if target.get("flat")
        else [(p, url.rstrip("/") + "/" + p.lower() + "/") for p in target["projects"]]
    )
    try:
        for project, page in pages:
            left = deadline - time.time()
            if left <= 0.2:
                out["detail"] = "not asked (the time budget was spent)"
                return out
            status, body = _get(page, min(timeout, left))
            if target.get("flat") and status == 404:
                out["status"], out["detail"] = 404, "HTTP 404: no such listing"
                return out
            out["status"] = status
            for p in [project] if project else target["projects"]:
                out["files"][p] = wheel_names(body, p)
        out["ok"] = True
    except Exception as e:  # the index's failure is the answer; keep it short
        text = str(getattr(e, "reason", "") or e)
        out["detail"] = (type(e).__name__ + ": " + text)[:200]
    return out


MAX_PARALLEL = 8  # indexes asked at once (a request names a handful)
_PIP_KEYS = {"index-url": "index", "extra-index-url": "index", "find-links": "find-links"}


def _pip_config_files():
    """pip's configuration files in its own order (global, user, site, then PIP_CONFIG_FILE);
    PIP_CONFIG_FILE=os.devnull means none, as pip reads it."""
    named = os.environ.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    dirs = (os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")
    files = [os.path.join(d, "pip", "pip.conf") for d in dirs if d] + ["/etc/pip.conf"]
    home = os.path.expanduser("~")
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files += [os.path.join(home, ".pip", "pip.conf"), os.path.join(config_home, "pip", "pip.conf")]
    files.append(os.path.join(sys.prefix, "pip.conf"))
    if named:
        files.append(named)
    return files


def pip_config_sources(environ=None):
    """[(url, usage, origin)] the host's pip configuration names, each once, in pip's order."""
    import configparser

    environ = os.environ if environ is None else environ
    found = []
    for path in _pip_config_files():
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
        for section in ("global", "install"):
            if not parser.has_section(section):
                continue
            for key, value in parser.items(section):
                key = key.replace("_", "-")
                usage = _PIP_KEYS.get(key)
                if usage:
                    found += [(v, usage, "%s [%s] %s" % (path, section, key)) for v in value.split()]
    for var, key in (("PIP_INDEX_URL", "index-url"), ("PIP_EXTRA_INDEX_URL", "extra-index-url"),
                     ("PIP_FIND_LINKS", "find-links")):
        found += [(v, _PIP_KEYS[key], var) for v in (environ.get(var) or "").split()]
    seen, out = set(), []
    for url, usage, origin in found:
        if (url, usage) not in seen:
            seen.add((url, usage))
            out.append((url, usage, origin))
    return out[:32]


def list_all(request):
    """Every target at once, each in its own thread, the whole answer back by the budget: a
    socket timeout bounds one recv, not a page that trickles in, so the budget is the join's."""
    budget = float(request.get("budget") or 15)
    deadline = time.time() + budget
    timeout = float(request.get("timeout") or 5)
    targets = list(request.get("targets") or [])
    extra = []
    if request.get("pip_config"):
        extra = pip_config_sources()
        targets += [{"url": u, "flat": usage != "index", "projects": request["pip_config"]}
                    for u, usage, _ in extra]
    answers = [None] * len(targets)
    slots = threading.BoundedSemaphore(MAX_PARALLEL)

    def ask(i, target):
        with slots:
            answers[i] = list_target(target, deadline, timeout)

    threads = [
        threading.Thread(target=ask, args=(i, t), name="index-%d" % i, daemon=True)
        for i, t in enumerate(targets)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.time()) + 0.5)
    late = {"ok": False, "status": None, "files": {},
            "detail": "timed out: no complete answer within the %gs budget" % budget}
    out = [dict(late) if a is None else a for a in list(answers)]
    base = len(targets) - len(extra)
    for item, (url, usage, origin) in zip(out[base:], extra):  # noqa: B905 (3.8)
        item.update(url=url, usage=usage, origin=origin)
    return out


def main():
    request = json.loads(sys.stdin.readline())
    sys.stdout.write(json.dumps(list_all(request)) + "\n")


if __name__ == "__main__":
    main()
