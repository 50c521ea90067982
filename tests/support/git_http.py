"""A git repository served over HTTP with Basic auth (git's "dumb" protocol: static files after
`git update-server-info`), on an address of the test's choosing. It records every request and
whether the password ever reached it anywhere but the Authorization header (a URL path, a query).
"""

from __future__ import annotations

import base64
import functools
import http.server
import subprocess
import threading
from pathlib import Path
from typing import Any

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin",
}  # fmt: skip


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_repo(root: Path, commits: int = 2) -> tuple[Path, Path]:
    """A work tree with `commits` commits on `main` and its bare clone, ready for dumb HTTP."""
    work, bare = root / "work", root / "repo.git"
    work.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    for i in range(commits):
        (work / "f.txt").write_text(f"v{i}\n")
        git(work, "add", "f.txt")
        git(work, "commit", "-q", "-m", f"c{i}")
    git(root, "clone", "-q", "--bare", str(work), str(bare))
    git(bare, "update-server-info")
    return work, bare


class _Handler(http.server.SimpleHTTPRequestHandler):
    user = ""
    password = ""
    requests: list[str] = []
    secret_seen_in: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.password in self.path:
            self.secret_seen_in.append(self.path)
        expected = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.requests.append(f"{self.path} 401")
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="pv"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.requests.append(f"{self.path} ok")
        super().do_GET()

    def log_message(self, *args: Any) -> None:
        pass


class GitHTTP:
    """`with GitHTTP(bare_parent, host, user, password) as srv:` → `srv.url(name)`."""

    def __init__(self, root: Path, host: str, user: str, password: str) -> None:
        handler = type("Handler", (_Handler,), {"user": user, "password": password,
                                                 "requests": [], "secret_seen_in": []})
        self.handler = handler
        self.server = http.server.ThreadingHTTPServer(
            (host, 0), functools.partial(handler, directory=str(root))
        )
        self.host = host
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, name: str) -> str:
        return f"http://{self.host}:{self.server.server_address[1]}/{name}"

    def __enter__(self) -> GitHTTP:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
