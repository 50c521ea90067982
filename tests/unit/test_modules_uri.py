"""uri on this machine against an HTTP server the test runs on loopback."""

from __future__ import annotations

import base64
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builtin_support import ok, results, run_tasks


@pytest.fixture
def server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body})
            if self.path == "/missing":
                self.send_response(404)
                self.end_headers()
                self.wfile.write(b"nope")
                return
            if self.path == "/moved":
                self.send_response(302)
                self.send_header("Location", "/json")
                self.end_headers()
                return
            payload = json.dumps({"ok": True, "method": self.command, "body": body}).encode()
            self.send_response(201 if self.command == "POST" else 200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("X-Served-By", "test")
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = _answer

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_uri_get_json_headers_redirect_and_status(tmp_path: Path, server: tuple[str, list]) -> None:
    url, seen = server
    result = ok(run_tasks(tmp_path, f"- uri: {{url: '{url}/json', headers: {{X-Token: abc}}}}\n  register: r"))
    (status, reg), = results(result)
    assert status == "ok" and reg["status"] == 200 and reg["json"] == {"ok": True, "method": "GET", "body": ""}
    assert reg["content_type"] == "application/json" and reg["x_served_by"] == "test"
    assert reg["msg"].startswith("OK (") and reg["redirected"] is False and "content" not in reg
    assert seen[-1]["headers"]["X-Token"] == "abc"
    moved = ok(run_tasks(tmp_path, f"- uri: {{url: '{url}/moved', return_content: yes}}"))
    assert moved.results[0].result["redirected"] is True and '"ok": true' in moved.results[0].result["content"]
    missing = run_tasks(tmp_path, f"- uri: {{url: '{url}/missing'}}")
    assert missing.results[0].status == "failed"
    assert missing.results[0].msg.startswith("Status code was 404 and not [200]")
    accepted = ok(run_tasks(tmp_path, f"- uri: {{url: '{url}/missing', status_code: [200, 404]}}"))
    assert accepted.results[0].result["status"] == 404
    down = run_tasks(tmp_path, "- uri: {url: 'http://127.0.0.1:9/x', timeout: 3}")
    assert down.results[0].status == "failed" and "Status code was -1" in down.results[0].msg


def test_uri_post_json_basic_auth_and_password_stays_off_argv(tmp_path: Path, server: tuple[str, list]) -> None:
    url, seen = server
    tasks = f"""
    - uri:
        url: '{url}/api'
        method: POST
        body_format: json
        body: {{name: gpu1, count: 2}}
        url_username: alice
        url_password: "{{{{ secret }}}}"
        status_code: 201
      register: r
    """
    result = ok(run_tasks(tmp_path, tasks, extra_vars={"secret": "s3cr3t-pw"}))
    reg = result.results[0].result
    assert reg["status"] == 201 and json.loads(reg["json"]["body"]) == {"name": "gpu1", "count": 2}
    sent = seen[-1]
    assert sent["headers"]["Content-Type"] == "application/json"
    assert base64.b64decode(sent["headers"]["Authorization"].split()[1]) == b"alice:s3cr3t-pw"
    assert "s3cr3t-pw" not in json.dumps(reg)


def test_uri_dest_creates_and_check_mode(tmp_path: Path, server: tuple[str, list]) -> None:
    url, seen = server
    tasks = f"- uri: {{url: '{url}/file.json', dest: TMP/saved.json}}"
    first = ok(run_tasks(tmp_path, tasks))
    assert first.results[0].status == "changed" and json.loads((tmp_path / "saved.json").read_text())["ok"]
    assert ok(run_tasks(tmp_path, tasks)).results[0].status == "ok"
    count = len(seen)
    skipped = ok(run_tasks(tmp_path, f"- uri: {{url: '{url}/x', creates: TMP/saved.json}}"))
    assert "skipped, since" in skipped.results[0].result["stdout"] and len(seen) == count
    check = run_tasks(tmp_path, tasks, check=True)
    assert check.results[0].status == "skipped" and len(seen) == count
