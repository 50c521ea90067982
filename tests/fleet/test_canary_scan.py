"""The process-list scan, generated: every module in the registry with a canary secret in every
argument and task keyword that carries a value (tests/support/canary_plan.py), one playbook on
one fleet host, with `environment:` holding a canary for every task. While it runs, every
process's command line on this machine is read over and over — the fleet hosts share its PID
namespace, so that is the host's sshd children, shells and tools and the controller's own
processes (ssh clients, the CLI). The run fails if a canary shows in any command line; a canary
the project calls secret (no_log, secret-like names, URL passwords, environment values) also
must not show in stdout, stderr, the --json document, the -v log or any file under the test's
HOME / PROVISION_HOME (history.sqlite included).

A module added to the registry is in the playbook without editing this file; its arguments are
classified by tests/unit/test_canary_plan.py, which fails on one the generator can't handle.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import socket
import subprocess
import sys
import tarfile
import threading
from pathlib import Path
from typing import Any

import yaml
from test_attacks_ssh import ROOT, ProcessScanner, assert_nowhere

from tests.support.canary_plan import WORK, keyword_tasks, plan

_PRIVATE_ETC = (
    "set -e; mkdir -p /run/pv-etc/upper /run/pv-etc/work; "
    "mount -t overlay pv-etc -o lowerdir=/etc,upperdir=/run/pv-etc/upper,workdir=/run/pv-etc/work /etc"
)


class SlowServer:
    """Accepts every connection and holds it `hold` seconds before closing, answering nothing:
    the clients a URL argument starts (git, curl, pip, python) stay alive long enough for the
    process scanner to read their command lines. Bounded: each connection ends after `hold`."""

    def __init__(self, host: str, hold: float = 1.0) -> None:
        self.sock = socket.create_server((host, 0))
        self.sock.settimeout(0.5)
        self.hold = hold
        self.url = f"http://{host}:{self.sock.getsockname()[1]}"
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        with conn:
            self._stop.wait(self.hold)  # a slow server, not a synchronisation

    def __enter__(self) -> SlowServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


def _controller_files(tmp_path: Path) -> dict[str, str]:
    files = tmp_path / "files"
    files.mkdir()
    (files / "plain.txt").write_text("plain\n")
    (files / "t.j2").write_text("templated {{ inventory_hostname }}\n")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(files / "plain.txt", arcname="plain.txt")
    (files / "a.tar.gz").write_bytes(buf.getvalue())
    (tmp_path / "out").mkdir()
    return {"file": str(files / "plain.txt"), "template": str(files / "t.j2"),
            "archive": str(files / "a.tar.gz"), "controller": str(tmp_path / "out")}


def test_no_canary_in_any_process_list_output_or_file(make_fleet: Any, tmp_path: Path) -> None:
    # one host, as root: a host behind sudo with a password takes minutes for this playbook on
    # a loaded machine (a become password: test_attacks_ssh.test_become_password_never_visible)
    fleet = make_fleet(1)
    for host in fleet.hosts:
        fleet.ns_exec(host, _PRIVATE_ETC)  # user/group/cron/sysctl files: the host's own /etc only
        fleet.ns_exec(host, f"mkdir -p {WORK} && for f in fetch-src slurp-src; do echo data > {WORK}/$f; done")
    (host,) = fleet.hosts
    server = SlowServer(fleet.controller_address)
    generated = plan({**_controller_files(tmp_path), "server": server.url})
    assert generated.problems == [], generated.problems
    env_canary = "cnryplayenv" + secrets.token_hex(6)
    tasks: list[dict[str, Any]] = []
    for task in generated.tasks:
        entry: dict[str, Any] = {
            "name": f"scan {task.module} {','.join(sorted(task.args))}",
            task.module: task.args,
            "ignore_errors": True,
            "timeout": 30,
        }
        if task.vars:
            entry["vars"] = task.vars
        if task.module in ("fail", "assert"):
            entry["ignore_errors"] = True
        if task.module == "wait_for":
            entry[task.module] = {**task.args, "timeout": 1, "port": 9, "host": "127.0.0.1"}
        tasks.append(entry)
    kw_tasks, kw_canaries, kw_secret = keyword_tasks()
    tasks += [{**t, "ignore_errors": True} for t in kw_tasks]
    pb = tmp_path / "scan.yml"  # holds the canaries: not under a folder searched below
    pb.write_text(yaml.safe_dump([{
        "hosts": "all", "gather_facts": False,
        "environment": {"PV_SCAN_TOKEN": env_canary},
        "tasks": tasks,
    }], sort_keys=False))  # fmt: skip
    canaries = {**generated.canaries, **kw_canaries, env_canary: "play environment"}
    secret = generated.secret | kw_secret | {env_canary}
    inventory = fleet.write_inventory(tmp_path / "hosts.ini")
    with server, ProcessScanner(list(canaries), limit_s=420) as scanner:
        out = subprocess.run(
            [sys.executable, "-m", "provision", "run", str(pb), "-i", str(inventory), "--json", "-v"],
            env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200"),
            capture_output=True, text=True, timeout=480,
        )
    in_argv = sorted({canaries[c] for c in canaries for hit in scanner.hits if c in hit})
    assert in_argv == [], "\n".join(
        [f"canary of {where} in a command line" for where in in_argv]
        + [h[:300] for h in scanner.hits[:10]]
    )
    assert_nowhere(sorted(secret), out, scanner, [tmp_path / "out"])
    assert server.connections >= 2, "the URL arguments never reached the slow server"  # get_url, uri
    doc = json.loads(out.stdout)
    ran = [r for h in doc.get("hosts", {}).values() for r in h.get("tasks", [])] if "hosts" in doc else []
    names = json.dumps(doc)
    missing = [t["name"] for t in tasks if t["name"] not in names]
    assert missing == [], f"tasks that never ran: {missing}\n{out.stderr[-2000:]}"
    assert ran is not None
