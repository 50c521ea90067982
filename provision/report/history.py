"""Local history of reports (SQLite in provision.paths.state_dir()), so a host's numbers can be
compared over time. Each report is stored whole (the JSON document) with the headline figures
in columns; a report already recorded (same host, time and content) is not stored twice, so
re-rendering old files with `provision report` may record them without duplicates.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from provision.paths import state_dir
from provision.report import sections
from provision.report.schema import headline, parse_time, pct_delta

FILE_NAME = "history.sqlite"
# Figures compared with the previous run: (label, headline key).
COMPARED = (
    ("effective samples/s", "effective_samples_per_s"),
    ("training samples/s", "train_samples_per_s"),
    ("loader samples/s", "loader_samples_per_s"),
    ("AMP speedup", "amp_speedup"),
    ("best num_workers", "best_num_workers"),
    ("samples per money", "samples_per_money"),
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    created TEXT NOT NULL,
    schema TEXT NOT NULL,
    digest TEXT NOT NULL UNIQUE,
    train_samples_per_s REAL,
    loader_samples_per_s REAL,
    effective_samples_per_s REAL,
    amp_speedup REAL,
    price_per_hour REAL,
    document TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reports_host ON reports (host, created);
"""


def default_path() -> Path:
    return state_dir() / FILE_NAME


def _db(path: Path | None) -> sqlite3.Connection:
    # timeout: several `provision` processes may record at once; SQLite serializes the writers
    conn = sqlite3.connect(str(path or default_path()), timeout=30)
    conn.executescript(_SCHEMA)
    return conn


def utc(created: str) -> str:
    """ISO time in UTC, so times order correctly as text whatever offset a report was written in."""
    moment = parse_time(created)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return moment.astimezone(_dt.timezone.utc).isoformat(timespec="microseconds")


def digest(report: dict[str, Any]) -> str:
    return hashlib.sha256(
        json.dumps(report, sort_keys=True, default=str).encode("utf-8")
    ).hexdigest()


def record(report: dict[str, Any], path: Path | None = None) -> bool:
    """Store one report; False when it was already there."""
    head = headline(report)
    with closing(_db(path)) as conn, conn:
        cur = conn.execute(
            "INSERT OR IGNORE INTO reports (host, created, schema, digest, train_samples_per_s,"
            " loader_samples_per_s, effective_samples_per_s, amp_speedup, price_per_hour, document)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                report["host"],
                utc(report["created"]),
                report["schema"],
                digest(report),
                head["train_samples_per_s"],
                head["loader_samples_per_s"],
                head["effective_samples_per_s"],
                head["amp_speedup"],
                head["price_per_hour"],
                json.dumps(report, default=str),
            ),
        )
        return cur.rowcount == 1


def previous(
    host: str, before: str, path: Path | None = None, train: bool | None = None
) -> dict[str, Any] | None:
    """The latest report for `host` created before `before` (ISO time, UTC), or None. `train`:
    only `provision train` reports (True) or only benchmark reports (False)."""
    with closing(_db(path)) as conn:
        rows = conn.execute(
            "SELECT document FROM reports WHERE host = ? AND created < ?"
            " ORDER BY created DESC, id DESC LIMIT ?",
            (host, utc(before), 1 if train is None else 500),
        ).fetchall()
    for (text,) in rows:
        doc = json.loads(text)
        if train is None or isinstance(doc.get("train"), dict) == train:
            return doc
    return None


def host_series(host: str, path: Path | None = None, limit: int = 20) -> list[dict[str, Any]]:
    """The host's latest `limit` runs, newest first: created and the headline columns."""
    with closing(_db(path)) as conn:
        rows = conn.execute(
            "SELECT created, effective_samples_per_s, train_samples_per_s, loader_samples_per_s,"
            " amp_speedup, price_per_hour FROM reports WHERE host = ?"
            " ORDER BY created DESC, id DESC LIMIT ?",
            (host, limit),
        ).fetchall()
    keys = ("created", "effective_samples_per_s", "train_samples_per_s", "loader_samples_per_s",
            "amp_speedup", "price_per_hour")  # fmt: skip
    return [dict(zip(keys, r, strict=True)) for r in rows]


def compare(report: dict[str, Any], path: Path | None = None) -> dict[str, Any] | None:
    """The previous run of this report's host and, per figure, {before, now, change_pct}."""
    is_train = isinstance(report.get("train"), dict)
    prev = previous(report["host"], report["created"], path, train=is_train)
    if prev is None:
        return None
    owner = sections.owner_of(report)  # a job before and after a change: train's own figures
    if owner is not None and owner.headline is not None:
        old, new, compared = owner.headline(prev), owner.headline(report), owner.compared
    else:
        old, new, compared = headline(prev), headline(report), COMPARED
    figures = {}
    for label, key in compared:
        if old[key] is None and new[key] is None:
            continue
        figures[label] = {
            "before": old[key],
            "now": new[key],
            "change_pct": pct_delta(new[key], old[key]),
        }
    return {"previous": {"created": prev["created"], "headline": old}, "figures": figures}


def documents(path: Path | None = None, limit: int = 500) -> list[dict[str, Any]]:
    """The latest `limit` reports of every host, newest first (`provision choose` calibrates
    its predictions from the measured-vs-predicted sections they carry)."""
    with closing(_db(path)) as conn:
        rows = conn.execute(
            "SELECT document FROM reports ORDER BY created DESC, id DESC LIMIT ?", (limit,)
        ).fetchall()
    return [json.loads(text) for (text,) in rows]
