"""What the controller shows while it follows runs: log lines prefixed with the host, and on a
terminal a one-screen rich table (state, elapsed, data-wait share, GPU/CPU, last line) below."""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from provision.terminal import add_row


class RunView:
    def __init__(self, console: Console, live: bool | None = None) -> None:
        self.console = console
        self.rows: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        use_live = console.is_terminal if live is None else live
        self._live = Live(self._table(), console=console, refresh_per_second=2, transient=True) if use_live else None

    @property
    def live(self) -> bool:
        """Whether the live table is shown (a terminal, not --json/--no-live)."""
        return self._live is not None

    def __enter__(self) -> RunView:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    def lines(self, host: str, lines: list[str]) -> None:
        with self._lock:
            for line in lines:
                self.console.out(f"{host} | {line}", highlight=False)
            if lines:
                self.rows.setdefault(host, {})["last"] = lines[-1][-80:]
            self._refresh()

    def labelled(self, host: str, lines: list[str]) -> None:
        """Lines that carry their own label (`HOST/rankN | text`, a distributed run's)."""
        with self._lock:
            for line in lines:
                self.console.out(line, highlight=False)
            if lines:
                self.rows.setdefault(host, {})["last"] = lines[-1][-80:]
            self._refresh()

    def update(self, host: str, **fields: Any) -> None:
        with self._lock:
            self.rows.setdefault(host, {}).update(fields)
            self._refresh()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._table())

    def _table(self) -> Table:
        table = Table(box=None, expand=False, show_edge=False)
        for col in ("host", "run", "state", "elapsed", "steps", "data wait", "GPU %", "CPU %", "last line"):
            table.add_column(col)
        for host, row in sorted(self.rows.items()):
            started = row.get("started")
            elapsed = f"{time.time() - started:.0f}s" if started else ""
            wait = row.get("data_wait_fraction")
            add_row(table, host, str(row.get("run_id", "")), str(row.get("state", "")), elapsed,  # the host's: text
                    str(row.get("steps") if row.get("steps") is not None else ""),
                    "" if wait is None else f"{wait:.0%}",
                    str(row.get("gpu_util_mean") if row.get("gpu_util_mean") is not None else "—"),
                    str(row.get("cpu_util_mean") if row.get("cpu_util_mean") is not None else ""),
                    str(row.get("last", "")))
        return table
