"""What a playbook run shares: its options, the per-host runtime (connections, agents), run_once and the per-play step barrier."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from provision.connection.base import Connection, ConnectOptions
from provision.connection.factory import connect
from provision.connection.local import LocalConnection
from provision.engine.playbook import (
    Play,
)
from provision.engine.variables import HostVars
from provision.errors import (
    AuthError,
    HostKeyError,
    UnreachableError,
)
from provision.inventory.model import Host
from provision.remote.agent import Agent
from provision.remote.executor import ExecutorConnection

# A host that can't be reached or logged into: the task is "unreachable", not "failed".
UNREACHABLE_ERRORS = (UnreachableError, AuthError, HostKeyError)
DEFAULT_RETRY_DELAY = 5  # seconds between `until` retries when `delay` is not given


@dataclass
class RunOptions:
    forks: int = 32
    check: bool = False
    diff: bool = False
    tags: frozenset[str] = frozenset()
    skip_tags: frozenset[str] = frozenset()
    limit: str | None = None
    connect: ConnectOptions = field(default_factory=ConnectOptions)
    extra_vars: dict[str, Any] = field(default_factory=dict)
    verbosity: int = 0


class Stop(Exception):
    """Internal: this host stops running tasks (failure, end_host, abort)."""


class EndRole(Exception):
    """Internal: meta end_role: the rest of the innermost role is skipped for this host."""


def tags_selected(tags: frozenset[str], only: frozenset[str], skip: frozenset[str]) -> bool:
    """Ansible's tag rules, including `always`, `never`, `tagged`, `untagged` and `all`."""
    task_tags = set(tags) or {"untagged"}
    only = only or frozenset({"all"})
    if "always" in task_tags:
        run = True
    elif "all" in only and "never" not in task_tags:
        run = True
    elif not task_tags.isdisjoint(only):
        run = True
    elif "tagged" in only and task_tags != {"untagged"} and "never" not in task_tags:
        run = True
    else:
        run = False
    if run and skip:
        if "all" in skip:
            if "always" not in task_tags or "always" in skip:
                run = False
        elif not task_tags.isdisjoint(skip):
            run = False
        elif "tagged" in skip and task_tags != {"untagged"}:
            run = False
    return run


class HostRuntime:
    """One host for the whole run: its connection (opened on first use, one thread at a time),
    agent, accumulated variables and whether it failed."""

    def __init__(
        self,
        host: Host,
        connect_options: ConnectOptions,
        variables: HostVars,
        connections: Mapping[str, Connection] | None = None,
        playbook_dir: str | None = None,
    ) -> None:
        self.host = host
        self.options = connect_options
        # Ansible runs a play's local steps (delegate_to: localhost, connection local) in the
        # playbook's directory: relative paths there (robertdebock.users' `ssh_keys`) are its
        self.playbook_dir = playbook_dir
        self.vars = variables
        self._connections: dict[str, Connection] = {}
        if connections and host.name in connections:
            self._connections["default"] = connections[host.name]
            self._borrowed = True
        else:
            self._borrowed = False
        self._agent: Any = None
        self.failed = False
        self.unreachable = False
        self.facts_gathered = False
        self.run_count: dict[int, int] = {}

    def connection(self, local: bool = False, user: str | None = None) -> Connection:
        key = "local" if local else "default"
        conn = self._connections.get(key)
        if conn is None:
            if local:
                conn = LocalConnection(self.host, cwd=self.playbook_dir)
            else:
                host = self.host if not user or self.host.user else replace(self.host, user=user)
                conn = connect(host, self.options)
                if isinstance(conn, LocalConnection) and conn.cwd is None:  # a local inventory host
                    conn.cwd = self.playbook_dir
                elif self.options.executor and not isinstance(conn, LocalConnection):
                    conn = ExecutorConnection(conn)
            self._connections[key] = conn
        return conn

    def agent(self, connection: Connection, become: bool | None = None) -> Any:
        """The host's agent; `become`: the current play's/task's (the agent runs as root then)."""
        if self._agent is None or self._agent.connection is not connection:
            self._agent = Agent(connection)
        self._agent.become = become
        return self._agent

    def reset_connection(self) -> None:
        """meta: reset_connection: the host's sessions (and its agent) are closed; the next task
        opens new ones (a user's new groups apply). A connection the caller lent is kept."""
        lent = self._connections.get("default") if self._borrowed else None
        self.close()
        self._agent = None
        if lent is not None:
            self._connections["default"] = lent

    def close(self) -> None:
        for key, conn in list(self._connections.items()):
            if key == "default" and self._borrowed:
                continue
            try:
                conn.close()
            except Exception:  # closing must never hide the run's result
                pass
        self._connections.clear()


class _RunOnce:
    """run_once: the first host (in play order) still running the play runs the task; the
    others wait for and take its result."""

    def __init__(self, order: list[str]) -> None:
        self.order = order
        self.active = set(order)
        self.cond = threading.Condition()
        self.claimed: set[tuple[int, int]] = set()
        self.shared: dict[tuple[int, int], Any] = {}

    def enter(
        self, key: tuple[int, int], host: str, stopped: Callable[[], bool]
    ) -> tuple[bool, Any]:
        with self.cond:
            while True:
                if key in self.shared:
                    return False, self.shared[key]
                if key not in self.claimed:
                    first = next((h for h in self.order if h in self.active), host)
                    if first == host:
                        self.claimed.add(key)
                        return True, None
                if stopped():
                    raise Stop()
                self.cond.wait(0.2)

    def publish(self, key: tuple[int, int], value: Any) -> None:
        with self.cond:
            self.shared[key] = value
            self.cond.notify_all()

    def done(self, host: str) -> None:
        with self.cond:
            self.active.discard(host)
            self.cond.notify_all()


class _PlayState:
    def __init__(self, play: Play, hosts: list[Host]) -> None:
        self.play = play
        self.hosts = hosts
        self.abort = threading.Event()  # any_errors_fatal / end_play / end_batch
        self.end_play = False  # end_play (or any_errors_fatal) also skips the later batches
        self.batch_ended = False  # meta: end_batch ends only this batch
        self.run_once = _RunOnce([h.name for h in hosts])
        # any_errors_fatal plays run in lockstep (Ansible's linear strategy): no host starts
        # task k+1 before every host still in the play has finished task k, so one failure
        # stops everyone before the next task.
        self.lockstep = play.any_errors_fatal
        self.completed = {h.name: 0 for h in hosts}

    def wait_turn(self, host: str, step: int, stopped: Callable[[], bool]) -> None:
        cond = self.run_once.cond
        with cond:
            while any(self.completed[h] < step for h in self.run_once.active if h != host):
                if stopped():
                    return
                cond.wait(0.2)

    def step_done(self, host: str) -> None:
        with self.run_once.cond:
            self.completed[host] += 1
            self.run_once.cond.notify_all()
