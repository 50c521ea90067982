"""Local history of reports (SQLite), so a host's numbers can be compared over time."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from provision.paths import state_dir

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    created TEXT NOT NULL,
    schema TEXT NOT NULL,
    train_samples_per_s REAL,
    loader_samples_per_s REAL,
    document TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reports_host ON reports (host, created);
"""


def _db(path: Path | None) -> sqlite3.Connection:
    conn = sqlite3.connect(path or state_dir() / "history.sqlite")
    conn.executescript(_SCHEMA)
    return conn


def record(report: dict[str, Any], path: Path | None = None) -> int:
    from provision.report.document import headline

    head = headline(report)
    with closing(_db(path)) as conn, conn:
        cur = conn.execute(
            "INSERT INTO reports (host, created, schema, train_samples_per_s, loader_samples_per_s, document)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (report["host"], report["created"], report["schema"], head["train_samples_per_s"],
             head["loader_samples_per_s"], json.dumps(report, default=str)),
        )
        return int(cur.lastrowid or 0)


def previous(host: str, before: str, path: Path | None = None) -> dict[str, Any] | None:
    """The latest report for `host` created before `before` (ISO time), or None."""
    with closing(_db(path)) as conn:
        row = conn.execute(
            "SELECT document FROM reports WHERE host = ? AND created < ? ORDER BY created DESC LIMIT 1",
            (host, before),
        ).fetchone()
    return json.loads(row[0]) if row else None


def host_series(host: str, path: Path | None = None, limit: int = 20) -> list[tuple[str, float | None, float | None]]:
    with closing(_db(path)) as conn:
        return list(conn.execute(
            "SELECT created, train_samples_per_s, loader_samples_per_s FROM reports WHERE host = ?"
            " ORDER BY created DESC LIMIT ?", (host, limit)))
