"""Fan work out over hosts, bounded by --forks; failures come back per host, never as the first
exception alone (Fabric's GroupResult idea)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from provision.connection.base import interrupt_all
from provision.errors import Cancelled, HostError, UnreachableError
from provision.inventory.model import Host

T = TypeVar("T")


@dataclass
class HostOutcome(Generic[T]):
    host: Host
    value: T | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def unreachable(self) -> bool:
        return isinstance(self.error, UnreachableError)

    @property
    def message(self) -> str:
        if self.error is None:
            return ""
        if isinstance(self.error, HostError):
            return self.error.detail
        return f"{type(self.error).__name__}: {self.error}"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a fan-out: carries what each host had done (finished hosts keep their
    value or error; the others hold errors.Cancelled), so the CLI can say what finished."""

    def __init__(self, outcomes: dict[str, HostOutcome]) -> None:
        super().__init__("interrupted")
        self.outcomes = outcomes


# After Ctrl-C: how long hosts get to stop on their own (each ends its remote process group and
# its cleanup runs) before the run gives up on them; keeps "stops within 2 s" with hung hosts.
STOP_GRACE_S = 1.0


def for_each_host(
    hosts: Iterable[Host], work: Callable[[Host], T], forks: int = 32
) -> dict[str, HostOutcome[T]]:
    """Run `work(host)` for every host, at most `forks` at once; results in input order.

    Ctrl-C: every live connection is told to stop (connection.base.interrupt_all), hosts get
    STOP_GRACE_S to finish, then Interrupted is raised with the outcomes so far. Workers are
    daemon threads, so a host hung in a TCP connect cannot hold the process at exit."""
    hosts = list(hosts)
    outcomes: dict[str, HostOutcome[T]] = {h.name: HostOutcome(h) for h in hosts}
    finished: set[str] = set()
    done = threading.Condition()

    def one(host: Host) -> None:
        try:
            outcomes[host.name].value = work(host)
        except Exception as exc:  # reported per host; the other hosts go on
            outcomes[host.name].error = exc
        except KeyboardInterrupt:  # Ctrl-C in this (the main) thread: single-host runs
            outcomes[host.name].error = Cancelled(host.name, "interrupted before it finished")
            raise
        finally:
            with done:
                finished.add(host.name)
                done.notify_all()

    if len(hosts) == 1:
        try:
            one(hosts[0])
        except KeyboardInterrupt:
            raise Interrupted(_cancelled(outcomes, finished)) from None
        return outcomes
    pending = list(hosts)

    def worker() -> None:
        while True:
            with done:
                if not pending or stopping.is_set():
                    return
                host = pending.pop(0)
            one(host)

    stopping = threading.Event()  # Ctrl-C: workers take no new host
    threads = [
        threading.Thread(target=worker, daemon=True, name=f"host-{i}")
        for i in range(max(1, min(forks, len(hosts))))
    ]
    try:
        for t in threads:
            t.start()
        with done:
            while len(finished) < len(hosts):
                done.wait(0.2)
    except KeyboardInterrupt:
        stopping.set()
        interrupt_all()
        deadline = time.monotonic() + STOP_GRACE_S
        with done:
            while len(finished) < len(hosts) - len(pending) and time.monotonic() < deadline:
                done.wait(0.05)
        raise Interrupted(_cancelled(outcomes, finished)) from None
    return outcomes


def _cancelled(outcomes: dict[str, HostOutcome[T]], finished: set[str]) -> dict[str, HostOutcome[T]]:
    for name, outcome in outcomes.items():
        if name not in finished:
            outcome.error = Cancelled(name, "interrupted before it finished")
    return outcomes
