"""A play-level meeting point for modules that act on all of a play's hosts at once.

A module runs once per host, each in its host's thread with its host's connection. A distributed
`train` task needs every host of the play: each host's task joins the same Gang (keyed by the
task and the play's hosts) with its own HostTrainer; the play's first host leads: once every
host joined (a bounded wait), it runs the job across all of them and publishes the result, and
every host's task reports its own part of it. While the leader works, the other hosts' threads
only wait, so each connection is still used by one thread at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

JOIN_TIMEOUT_S = 300.0

_lock = threading.Lock()
_gangs: dict[tuple[str, tuple[str, ...]], Gang] = {}


class GangError(RuntimeError):
    pass


class Gang:
    def __init__(self, names: list[str]) -> None:
        self.names = list(names)
        self.members: dict[str, Any] = {}
        self._cond = threading.Condition()
        self._done = False
        self._leading = False
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self, name: str, member: Any, lead: Callable[[dict[str, Any]], Any],
            join_timeout: float = JOIN_TIMEOUT_S) -> Any:
        """Join; the first host calls lead(members) once all joined; everyone gets its result."""
        if name not in self.names:
            raise GangError(f"{name} is not one of the play's hosts ({', '.join(self.names)})")
        with self._cond:
            self.members[name] = member
            self._cond.notify_all()
            if name == self.names[0]:
                deadline = time.monotonic() + join_timeout
                while len(self.members) < len(self.names) and not self._done:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        missing = [n for n in self.names if n not in self.members]
                        self._finish(None, GangError(
                            f"{', '.join(missing)} did not reach this task within {join_timeout:.0f}s "
                            "(failed earlier in the play, or --forks is below the number of hosts)"))
                        break
                    self._cond.wait(min(left, 1.0))
                if not self._done:
                    self._leading = True
                    members = dict(self.members)
                    self._cond.release()
                    try:
                        value, error = lead(members), None
                    except BaseException as exc:  # every waiting host must hear about it
                        value, error = None, exc
                    finally:
                        self._cond.acquire()
                    self._finish(value, error)
            deadline = time.monotonic() + join_timeout
            while not self._done:  # once leading, the leader's work is itself bounded
                if not self._leading and self.names[0] not in self.members and time.monotonic() > deadline:
                    raise GangError(f"{self.names[0]} (the play's first host, which leads) did not reach "
                                    f"this task within {join_timeout:.0f}s")
                self._cond.wait(1.0)
            if self.error is not None:
                raise self.error
            return self.result

    def _finish(self, value: Any, error: BaseException | None) -> None:
        self.result, self.error, self._done = value, error, True
        self._cond.notify_all()


def gang_for(key: str, names: list[str]) -> Gang:
    """The gang of this task on these hosts (created by whichever host comes first)."""
    k = (key, tuple(names))
    with _lock:
        gang = _gangs.get(k)
        if gang is None or gang._done:
            gang = _gangs[k] = Gang(names)
        return gang

