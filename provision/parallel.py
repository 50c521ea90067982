"""Fan work out over hosts, bounded by --forks; failures come back per host, never as the first
exception alone (Fabric's GroupResult idea)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

from provision.errors import HostError, UnreachableError
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


def for_each_host(
    hosts: Iterable[Host], work: Callable[[Host], T], forks: int = 32
) -> dict[str, HostOutcome[T]]:
    """Run `work(host)` for every host, at most `forks` at once; results in input order."""
    hosts = list(hosts)
    outcomes: dict[str, HostOutcome[T]] = {h.name: HostOutcome(h) for h in hosts}

    def one(host: Host) -> None:
        try:
            outcomes[host.name].value = work(host)
        except Exception as exc:  # reported per host; the other hosts go on
            outcomes[host.name].error = exc

    if len(hosts) == 1:
        one(hosts[0])
        return outcomes
    with ThreadPoolExecutor(max_workers=max(1, min(forks, len(hosts))), thread_name_prefix="host") as pool:
        list(pool.map(one, hosts))
    return outcomes
