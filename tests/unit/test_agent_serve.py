"""The persistent executor's host side (provision/agent/serve.py), run locally without SSH:
commands as children with the environment it started with, exit codes as a shell gives them,
stdin as sent, `stop` ending the whole group, and every running group ended when stdin ends."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Serve:
    def __init__(self, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-m", "provision.agent", "serve"], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        )  # fmt: skip
        self.send({})
        assert self.event()["event"] == "ready"

    def send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def event(self) -> dict:
        return json.loads(self.proc.stdout.readline())

    def run(self, ident: int, cmd: str, stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
        self.send({"op": "run", "id": ident, "cmd": cmd, "stdin": stdin is not None})
        if stdin is not None:
            self.send({"op": "in", "id": ident, "data": base64.b64encode(stdin).decode()})
            self.send({"op": "eof", "id": ident})
        return self.collect(ident)

    def collect(self, ident: int) -> tuple[int, bytes, bytes]:
        out = {1: b"", 2: b""}
        while True:
            event = self.event()
            assert event["id"] == ident
            if event["event"] == "exit":
                return event["code"], out[1], out[2]
            out[event["fd"]] += base64.b64decode(event["data"])


def test_commands_run_as_children_with_the_started_environment_and_shell_exit_codes(tmp_path):
    serve = Serve(FROM_LOGIN="conda-ish")
    try:
        assert serve.run(1, 'echo "$FROM_LOGIN"; echo err >&2; exit 3') == (3, b"conda-ish\n", b"err\n")
        assert serve.run(2, "kill -9 $$")[0] == 137  # 128 + 9, as a shell reports it
        payload = bytes(range(256)) * 64
        assert serve.run(3, "cat", stdin=payload) == (0, payload, b"")
        assert serve.run(4, "cat")[1] == b""  # no stdin given: /dev/null, never the channel
        assert serve.run(5, "pwd")[1].decode().strip() == str(ROOT)  # where it started
        pgid, pid = serve.run(6, "ps -o pgid= -p $$; echo $$")[1].split()
        assert pgid == pid  # its own process group, which `stop` ends
        assert serve.run(7, "true")[0] == 0
        marker = tmp_path / "group"
        serve.send({"op": "run", "id": 8, "cmd": f"sleep 60 & echo $! > {marker}; wait", "stdin": False})
        deadline = time.monotonic() + 10
        while not (marker.exists() and marker.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(marker.read_text())
        serve.send({"op": "stop", "id": 8})
        assert serve.collect(8)[0] == 143  # TERM to the group: the shell and its background child
        deadline = time.monotonic() + 5
        while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{child}") or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
    finally:
        serve.proc.stdin.close()
        serve.proc.wait(timeout=10)
    assert json.loads(serve.proc.stdout.readline())["data"] == {"served": 8}


def test_stdin_ending_ends_every_running_command():
    serve = Serve()
    serve.send({"op": "run", "id": 1, "cmd": "echo $$; exec sleep 120", "stdin": False})
    pid = int(base64.b64decode(serve.event()["data"]))
    serve.proc.stdin.close()  # the controller went away
    assert serve.proc.wait(timeout=10) == 0
    assert not os.path.exists(f"/proc/{pid}") or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
