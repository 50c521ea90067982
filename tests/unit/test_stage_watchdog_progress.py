"""The stage watchdog believes only progress that could be true (issue 29, defect 7): monotonic,
within the total its phase declared, of a known phase. A host inventing progress -- counts past
the total, a total that grows with them, a new phase name each time -- is stopped like one that
repeats itself. Over real SSH through `provision stage --stall-timeout 1`:
tests/fleet/test_hostile_replies.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from provision.staging.progress import PHASES
from provision.staging.stage import HostStage
from provision.staging.watchdog import StallWatchdog


class _Conn:
    def __init__(self) -> None:
        self.aborted = threading.Event()
        self.host = type("H", (), {"name": "gpu9", "local": False})()

    def abort(self) -> None:
        self.aborted.set()


def _stage() -> HostStage:
    stage = HostStage.__new__(HostStage)  # only what the watchdog and the event path use
    stage.host, stage.connection, stage.on_event = "gpu9", _Conn(), lambda event: None
    stage.last_event, stage._best = {}, {}
    stage.last_seen = stage.last_progress = time.monotonic()
    return stage


def _lies(kind: str) -> Iterator[dict[str, Any]]:
    n = 0
    while True:
        n += 1
        if kind == "past-total":
            yield {"phase": "stage", "done": 10 + n, "total": 10}
        elif kind == "growing-total":
            yield {"phase": "stage", "done": n, "total": n}
        elif kind == "bytes-past-total":
            yield {"phase": "stage", "done": 5, "total": 10, "bytes": 100 + n, "total_bytes": 100}
        elif kind == "new-phase":
            yield {"phase": f"phase{n}", "done": n, "total": 10**9}
        elif kind == "unsized-count":
            yield {"phase": "verify", "done": n}


@pytest.mark.parametrize("kind", ["past-total", "growing-total", "bytes-past-total", "new-phase", "unsized-count"])
def test_invented_progress_trips_the_watchdog(kind: str) -> None:
    stage = _stage()
    stage._event({"phase": "stage", "done": 10, "total": 10})  # the stage is written to its total
    stage._event({"phase": "verify", "done": 0})
    dog = StallWatchdog(stage, stall=5.0, progress_stall=1.0)
    lies = _lies(kind)
    try:
        for _ in range(400):  # bounded: ~20 s of lies
            if stage.connection.aborted.wait(0.05):
                break
            stage._event(next(lies))
        assert stage.connection.aborted.is_set() and dog.fired, f"{kind}: the watchdog believed the host"
        assert "no progress" in dog.reason
    finally:
        dog.stop()


def _advances(stage: HostStage, events: list[dict[str, Any]]) -> list[bool]:
    return [stage._advanced(e) for e in events]


@pytest.mark.parametrize(("events", "expected"), [
    # a real stage: counts rise to the total, then verify, then done
    ([{"phase": "start"}, {"phase": "stage", "done": 0, "total": 3}, {"phase": "stage", "done": 2, "total": 3},
      {"phase": "stage", "done": 3, "total": 3}, {"phase": "verify", "done": 1, "total": 3}, {"phase": "done"}],
     [True, True, True, True, True, True]),
    # the same count again, a count going back, a count past the total, a moved total
    ([{"phase": "stage", "done": 2, "total": 3}, {"phase": "stage", "done": 2, "total": 3},
      {"phase": "stage", "done": 1, "total": 3}, {"phase": "stage", "done": 4, "total": 3},
      {"phase": "stage", "done": 5, "total": 9}], [True, False, False, False, False]),
    # a download of unknown length: its bytes count alone
    ([{"phase": "download", "bytes": 10}, {"phase": "download", "bytes": 20}], [True, True]),
    # a phase nobody declared
    ([{"phase": "hacked", "done": 1}, {"phase": "unknown"}], [False, False]),
])
def test_what_counts_as_progress(events: list[dict[str, Any]], expected: list[bool]) -> None:
    assert _advances(_stage(), events) == expected


def test_every_phase_the_agent_reports_is_known() -> None:
    """A phase the agent emits but PHASES lacks would never count: a real stage would stall."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "provision"
    sources = [*root.glob("agent/datasets/*.py"), root / "staging" / "stage.py"]
    said = set()
    for path in sources:
        said |= set(re.findall(r"""phase=["']([a-z_]+)["']""", path.read_text()))
        said |= set(re.findall(r"""["']phase["']: ["']([a-z_]+)["']""", path.read_text()))
        said |= set(re.findall(r"""Progress\(\s*[\w.]+,\s*["']([a-z_]+)["']""", path.read_text()))
    assert {"stage", "verify", "list"} <= said, "the patterns are stale: they miss phases the agent reports"
    assert said - {"heartbeat", "ready"} <= PHASES, said - PHASES

