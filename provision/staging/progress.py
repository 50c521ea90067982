"""Per-host progress of a stage on the controller's stderr, fed by the agents' progress events.

One line per host: phase, bar, samples done / total, MB/s, samples/s, ETA. The agent measures
the rates where the writes happen (every ~0.5 s); this only draws them. Without a terminal
(piped, CI) nothing live is drawn: the command prints its summary at the end instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

EventCallback = Callable[[dict[str, Any]], None]


# The phases a stage goes through: those the agent reports (provision/agent/datasets/) and those
# the controller marks itself (staging/stage.py). Any other name is no progress (the watchdog).
PHASES = frozenset({"start", "list", "download", "stage", "verify", "lmdb", "status", "skipped", "done"})
UNSIZED_PHASES = frozenset({"download"})  # a download's length may be unknown: bytes count alone
# The fields of a progress event that are numbers; anything else a host puts there is dropped.
_NUMBERS = ("done", "total", "bytes", "total_bytes", "bytes_per_s", "samples_per_s", "eta_s", "count", "start")
_TEXT_MAX = 4096


def clean_event(event: Any) -> dict[str, Any]:
    """A progress event as the controller uses it: the host's JSON, with numbers that are finite
    non-negative numbers (else dropped), a phase that is a short word, and text capped. The one
    place a stage's events are checked: everything downstream (the bar, the watchdog, the
    messages) may then format them without a type check (issue 20)."""
    import math

    if not isinstance(event, dict):
        return {}
    out: dict[str, Any] = {}
    for key, value in event.items():
        if not isinstance(key, str):
            continue
        if key in _NUMBERS:
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                    and 0 <= value < 1e18:
                out[key] = value
        elif key == "phase":
            if isinstance(value, str) and len(value) <= 32 and value.replace("_", "").isalnum():
                out[key] = value
            else:
                out[key] = "unknown"
        elif isinstance(value, str):
            out[key] = value[:_TEXT_MAX]
        elif value is None or isinstance(value, (bool, int, float)):
            out[key] = value
        elif isinstance(value, (list, dict)):
            out[key] = value  # results' structured fields (warnings, verify): the caller's to read
    return out


def _mb(n: float | None) -> str:
    return "-" if not n else f"{n / 1e6:,.1f} MB/s"


def _eta(s: float | None) -> str:
    if s is None:
        return "-"
    s = int(s)
    return (
        f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


class StageProgress:
    """Context manager; `callback(host)` gives the on_event function for one host."""

    def __init__(self, console: Console, enabled: bool | None = None) -> None:
        self.console = console
        self.enabled = console.is_terminal if enabled is None else enabled
        self.tasks: dict[str, Any] = {}
        self.last: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        if not self.enabled:  # piped / --json: nothing drawn, and rich.progress not imported
            self.progress = None
            return
        from rich.progress import BarColumn, Progress, TextColumn

        # the fields hold the host's words (its name, the phase it reports): text, never markup
        self.progress = Progress(
            TextColumn("{task.fields[host]}", style="bold", justify="left", markup=False),
            TextColumn("{task.fields[phase]:<9}", markup=False),
            BarColumn(bar_width=28),
            TextColumn("{task.fields[count]:>17}", markup=False),
            TextColumn("{task.fields[rate]:>12}", markup=False),
            TextColumn("{task.fields[srate]:>11}", markup=False),
            TextColumn("ETA {task.fields[eta]:>7}", markup=False),
            console=console,
            disable=not self.enabled,
            refresh_per_second=4,
        )

    def __enter__(self) -> StageProgress:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def _task(self, host: str) -> Any:
        with self._lock:
            if host not in self.tasks:
                self.tasks[host] = self.progress.add_task(
                    host,
                    total=None,
                    host=host,
                    phase="connect",
                    count="",
                    rate="",
                    srate="",
                    eta="-",
                )
            return self.tasks[host]

    def callback(self, host: str) -> EventCallback:
        if self.progress is None:
            return lambda event: self.last.__setitem__(host, event)
        task = self._task(host)

        def on_event(event: dict[str, Any]) -> None:
            self.last[host] = event
            phase = event.get("phase", "")
            fields: dict[str, Any] = {"phase": phase}
            if phase in ("stage", "verify") and event.get("total"):
                total_b = event.get("total_bytes")
                if phase == "stage" and total_b:
                    self.progress.update(task, total=total_b, completed=event.get("bytes", 0))
                else:
                    self.progress.update(task, total=event["total"], completed=event.get("done", 0))
                fields["count"] = f"{event.get('done', 0):,}/{event['total']:,}"
                if phase == "stage":
                    fields["rate"] = _mb(event.get("bytes_per_s"))
                    fields["srate"] = f"{event.get('samples_per_s', 0):,.0f}/s"
                    fields["eta"] = _eta(event.get("eta_s"))
            elif phase == "download":
                self.progress.update(
                    task, total=event.get("total_bytes"), completed=event.get("bytes", 0)
                )
                fields["count"] = f"{event.get('bytes', 0) / 1e6:,.0f} MB"
                fields["rate"] = _mb(event.get("bytes_per_s"))
                fields["eta"] = _eta(event.get("eta_s"))
            elif phase in ("done", "skipped"):
                current = next((t for t in self.progress.tasks if t.id == task), None)
                total = (current.total if current is not None else None) or 1
                self.progress.update(task, total=total, completed=total)
                fields["eta"] = "-"
                if event.get("count") is not None:
                    fields["count"] = f"{event['count']:,}"
            self.progress.update(task, **fields)

        return on_event
