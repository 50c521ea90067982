"""The Python API of `provision train`: one host's runs over that host's one connection.

    from provision.connection.factory import connect
    from provision.train.launch import HostTrainer, TrainSpec

    with connect(host, options) as conn:
        trainer = HostTrainer(conn)
        started = trainer.start(TrainSpec(command=["python", "train.py"], code_dir="."))
        final = trainer.follow_to_end(started["run"]["run_id"], on_lines=print)
        summary = trainer.summary(final["run_id"])

A run belongs to one host and has a rank among `hosts` (rank 0 of 1 today); a multi-host launcher
gives every host the same run id and its own rank.
"""

from __future__ import annotations

import datetime as _dt
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from provision.connection.base import Connection
from provision.errors import ConfigError
from provision.remote.agent import Agent
from provision.remote.environment import managed_python
from provision.train.codefiles import DEFAULT_MAX_BYTES, CodeFile, list_code, tar_chunks

FACT_KEYS = ["hostname", "os", "cpu", "memory", "data_dir", "gpus"]
FOLLOW_CALL_S = 300.0  # one agent follow call; the loop calls again while the run goes on
FOLLOW_MAX_CALLS = 100000  # bounded: ~ a year of following in 300 s calls


@dataclass
class TrainSpec:
    command: list[str]
    code_dir: str | None = "."  # None: ship nothing, run in workdir (or ~)
    workdir: str | None = None  # default: <data_dir>/runs/<run_id>/code
    python: str | None = None  # default: the managed env's python when there is one
    env: dict[str, str] = field(default_factory=dict)
    secret_env: dict[str, str] = field(default_factory=dict)  # sent over stdin only, never shown
    instrument: bool = True
    interval: float = 1.0
    stop_when_idle: float | None = None
    stop_command: str | None = None
    max_code_bytes: int = DEFAULT_MAX_BYTES
    run_id: str | None = None
    rank: int = 0
    hosts: list[str] = field(default_factory=list)
    distributed: dict[str, Any] | None = None  # a multi-host run: nnodes, master, this host's node rank


def new_run_id() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def code_key(code_dir: str) -> str:
    """The host-side code cache of one controller folder (name only; the content is hashed)."""
    import hashlib
    import os
    import socket

    real = os.path.realpath(os.path.expanduser(code_dir))
    digest = hashlib.sha256(f"{socket.gethostname()}\0{real}".encode()).hexdigest()[:12]
    return f"{os.path.basename(real) or 'code'}-{digest}"


class HostTrainer:
    def __init__(self, connection: Connection, agent: Agent | None = None,
                 facts: dict[str, Any] | None = None) -> None:
        self.connection = connection
        self.agent = agent or Agent(connection)
        self._facts = facts

    @property
    def host(self) -> str:
        return self.connection.host.name

    @property
    def facts(self) -> dict[str, Any]:
        if self._facts is None:
            request: dict[str, Any] = {"only": FACT_KEYS}
            if self.connection.host.vars.get("data_dir"):
                request["data_dir"] = str(self.connection.host.vars["data_dir"])
            self._facts = self.agent.call("facts", request)
        return self._facts

    def load_facts(self, keys: list[str]) -> dict[str, Any]:
        """Gather these fact keys now (e.g. with the network for a distributed run); kept as .facts."""
        request: dict[str, Any] = {"only": keys}
        if self.connection.host.vars.get("data_dir"):
            request["data_dir"] = str(self.connection.host.vars["data_dir"])
        self._facts = self.agent.call("facts", request)
        return self._facts

    @property
    def data_dir(self) -> str:
        return str((self.facts.get("data_dir") or {}).get("path") or "~")

    def _call(self, command: str, request: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        request = dict(request, data_dir=self.data_dir)
        return self.agent.call(command, request, **kwargs)

    def interpreter(self, spec: TrainSpec) -> str | None:
        if spec.python:
            return spec.python

        return managed_python(self.connection, self.facts)

    def start(self, spec: TrainSpec, files: list[CodeFile] | None = None) -> dict[str, Any]:
        """Ship the code (only what changed), start the run detached; returns once it runs."""
        if not spec.command:
            raise ConfigError("provision train: no command (give it after --, e.g. -- python train.py)")
        run_id = spec.run_id or new_run_id()
        request: dict[str, Any] = {
            "run_id": run_id, "command": spec.command, "workdir": spec.workdir,
            "python": self.interpreter(spec), "instrument": spec.instrument,
            "interval": spec.interval, "stop_when_idle": spec.stop_when_idle,
            "stop_command": spec.stop_command, "rank": spec.rank,
            "world_size": max(1, len(spec.hosts)), "hosts": spec.hosts or [self.host],
            "env": {**spec.env, **spec.secret_env}, "distributed": spec.distributed,
        }
        payload = None
        if spec.code_dir is not None:
            if files is None:
                files = list_code(spec.code_dir, spec.max_code_bytes)
            dest = spec.workdir or f"{self.data_dir.rstrip('/')}/runs/.code/{code_key(spec.code_dir)}"
            have = self._call("train_code_plan", {"dest": dest})["have"]
            send = [f for f in files if have.get(f.rel) != f.sha256]
            request["code"] = {"dest": dest, "files": {f.rel: f.sha256 for f in files},
                               "executable": [f.rel for f in files if f.executable]}
            payload = tar_chunks(send)
        result = self._call("train_start", request, payload=payload, timeout=600)
        return result

    def follow(self, run_id: str, offset: int = 0, on_lines: Callable[[list[str]], None] | None = None,
               max_seconds: float = FOLLOW_CALL_S) -> dict[str, Any]:
        def on_event(event: dict[str, Any]) -> None:
            if on_lines is not None and event.get("lines"):
                on_lines(event["lines"])

        return self._call("train_follow", {"run_id": run_id, "offset": offset, "max_seconds": max_seconds},
                          on_event=on_event, timeout=max_seconds + 60)

    def follow_to_end(self, run_id: str, on_lines: Callable[[list[str]], None] | None = None,
                      offset: int = 0, on_tick: Callable[[], None] | None = None,
                      call_seconds: float = FOLLOW_CALL_S) -> dict[str, Any]:
        """Follow until the run ends; returns its final state."""
        for _ in range(FOLLOW_MAX_CALLS):
            result = self.follow(run_id, offset, on_lines, call_seconds)
            offset = int(result.get("offset") or offset)
            if on_tick is not None:
                on_tick()
            if result.get("ended"):
                return result["run"]
        raise TimeoutError(f"{self.host}: run {run_id} did not end while followed")

    def status(self, run_id: str, lines: int = 20) -> dict[str, Any]:
        return self._call("train_status", {"run_id": run_id, "lines": lines})

    def list_runs(self) -> list[dict[str, Any]]:
        return self._call("train_list", {})["runs"]

    def stop(self, run_id: str, grace: float = 10.0) -> dict[str, Any]:
        return self._call("train_stop", {"run_id": run_id, "grace": grace}, timeout=grace + 60)

    def summary(self, run_id: str, points: int = 120, lines: int = 20) -> dict[str, Any]:
        return self._call("train_summary", {"run_id": run_id, "points": points, "lines": lines})

    def idle(self, action: str = "start", duration: float | None = None,
             stop_command: str | None = None) -> dict[str, Any]:
        return self._call("train_idle", {"action": action, "duration": duration, "stop_command": stop_command})

    def wait_ended(self, run_id: str, timeout: float) -> dict[str, Any]:
        """Poll until the run ended (bounded by `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.status(run_id, lines=0)["run"]
            if state.get("state") in ("finished", "failed", "stopped") or time.monotonic() > deadline:
                return state
            time.sleep(0.5)
