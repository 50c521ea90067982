"""The local report history (SQLite) and `provision report`: re-render, rank by throughput and
by samples per unit of money (price_per_hour), compare each host with its previous run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from report_support import h100_bench, h100_report

import provision.bench  # noqa: F401  (registers the bench's section of the report)
from provision.cli.main import main
from provision.paths import state_dir
from provision.report import history
from provision.report.document import write_report


def test_record_and_previous_round_trip(tmp_path):
    db = tmp_path / "h.sqlite"
    first = h100_report(created="2025-03-01T08:00:00+00:00")
    second = h100_report(created="2025-03-02T08:00:00+00:00", bench=h100_bench(bf16=3100.0))
    other = h100_report(host="other", created="2025-03-01T12:00:00+00:00")
    assert history.record(first, db) is True
    assert history.record(first, db) is False  # same report: stored once
    assert history.record(second, db) and history.record(other, db)
    assert history.previous("h100-box", second["created"], db) == first
    assert history.previous("h100-box", first["created"], db) is None
    assert history.previous("nobody", second["created"], db) is None
    series = history.host_series("h100-box", db)
    assert [r["created"][:10] for r in series] == ["2025-03-02", "2025-03-01"]
    assert series[0]["train_samples_per_s"] == 3100.0
    rows = sqlite3.connect(db).execute("SELECT count(*) FROM reports").fetchone()
    assert rows == (3,)


def test_times_in_other_offsets_order_correctly(tmp_path):
    db = tmp_path / "h.sqlite"
    # 09:30+02:00 is 07:30 UTC: earlier than 08:00 UTC although it reads later as text
    early = h100_report(created="2025-03-01T09:30:00+02:00")
    late = h100_report(created="2025-03-01T08:00:00+00:00", bench=h100_bench(bf16=3000.0))
    history.record(early, db)
    history.record(late, db)
    assert history.previous("h100-box", late["created"], db) == early


def test_compare_gives_before_now_and_change(tmp_path):
    db = tmp_path / "h.sqlite"
    before = h100_report(created="2025-03-01T08:00:00+00:00", price=2.0)
    after = h100_report(created="2025-03-02T08:00:00+00:00", price=2.0,
                        bench=h100_bench(loader_by_workers={1: 400.0, 2: 800.0, 4: 1450.0}))  # fmt: skip
    history.record(before, db)
    c = history.compare(after, db)
    assert c["previous"]["created"] == before["created"]
    eff = c["figures"]["effective samples/s"]
    assert (eff["before"], eff["now"]) == (2890.0, 1450.0)
    assert eff["change_pct"] == pytest.approx(-49.8)
    assert c["figures"]["best num_workers"] == {"before": 16, "now": 4, "change_pct": -75.0}
    assert history.compare(before, db) is None


# -- `provision report` ---------------------------------------------------------------------------


def _reports(tmp_path: Path) -> dict[str, Path]:
    """Three hosts' reports as `provision bench --out` writes them, plus an older run of one."""
    out = tmp_path / "reports"
    docs = {
        "fast": h100_report(host="fast", created="2025-03-02T08:00:00+00:00", price=4.0),
        "cheap": h100_report(host="cheap", created="2025-03-02T08:01:00+00:00", price=0.8,
                             bench=h100_bench(fp32=500.0, bf16=1200.0)),
        "unpriced": h100_report(host="unpriced", created="2025-03-02T08:02:00+00:00",
                                bench=h100_bench(fp32=400.0, bf16=900.0)),
        "fast-old": h100_report(host="fast", created="2025-02-20T08:00:00+00:00", price=4.0,
                                bench=h100_bench(bf16=2500.0)),
    }  # fmt: skip
    return {name: Path(write_report(doc, out)["json"]) for name, doc in docs.items()}


def test_report_json_ranks_by_throughput_and_by_money(tmp_path, capsys):
    files = _reports(tmp_path)
    code = main(
        ["report", str(files["fast"]), str(files["cheap"]), str(files["unpriced"]), "--json"]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    ranking = out["ranking"]
    assert [h["host"] for h in ranking["by_throughput"]] == ["fast", "cheap", "unpriced"]
    assert [h["host"] for h in ranking["by_money"]] == ["cheap", "fast"]
    assert ranking["unpriced"] == ["unpriced"]
    cheap = ranking["by_money"][0]
    assert cheap["samples_per_money"] == pytest.approx(1200.0 * 3600 / 0.8)
    assert [d["host"] for d in out["reports"]] == ["fast", "cheap", "unpriced"]


def test_report_folder_takes_the_newest_per_host_and_compares(tmp_path, capsys):
    files = _reports(tmp_path)
    code = main(["report", str(files["fast"].parent), "--compare", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["host"] for d in out["reports"]] == ["cheap", "fast", "unpriced"]
    assert out["reports"][1]["created"] == "2025-03-02T08:00:00+00:00"
    # every file read went into the history (the old "fast" run too), so fast has a previous run
    compare = out["compare"]
    assert compare["cheap"] is None and compare["unpriced"] is None
    fast = compare["fast"]
    assert fast["previous"]["created"] == "2025-02-20T08:00:00+00:00"
    assert fast["figures"]["training samples/s"] == {
        "before": 2500.0,
        "now": 2890.0,
        "change_pct": 15.6,
    }
    assert (state_dir() / "history.sqlite").exists()  # in PROVISION_HOME (tests/conftest.py)


def test_report_compare_on_the_console_and_files(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    files = _reports(tmp_path)
    main(["report", str(files["fast-old"]), "--json"])  # into the history
    capsys.readouterr()
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    code = main(["report", str(files["fast"]), str(files["cheap"]), "--compare",
                 "--html", str(html), "--markdown", str(md)])  # fmt: skip
    assert code == 0
    captured = capsys.readouterr()
    out, err = captured.out, captured.err  # the tables are the command's output (issue 31): stdout
    assert "Compared with each host's previous run" in out and "Compared with" not in err
    assert "+15.6%" in out and "no earlier run in the history for: cheap" in err
    assert "Ranking by samples per unit of money" in out
    assert 'id="comparison"' in html.read_text() and "+15.6%" in html.read_text()
    assert "## Compared with each host's previous run" in md.read_text()


def test_inventory_price_overrides_the_report(tmp_path, capsys):
    files = _reports(tmp_path)
    inv = tmp_path / "hosts.ini"
    inv.write_text(
        "[gpus]\nfast ansible_host=198.18.0.10 price_per_hour=0.1\nunpriced ansible_host=198.18.0.11\n"
    )
    code = main(["report", str(files["fast"]), str(files["cheap"]), str(files["unpriced"]),
                 "-i", str(inv), "--json", "--no-history"])  # fmt: skip
    assert code == 0
    ranking = json.loads(capsys.readouterr().out)["ranking"]
    assert [h["host"] for h in ranking["by_money"]] == ["fast", "cheap"]
    assert ranking["by_money"][0]["price_per_hour"] == 0.1
    assert not (state_dir() / "history.sqlite").exists()  # --no-history


def test_bad_inventory_price_is_a_usage_error(tmp_path, capsys):
    files = _reports(tmp_path)
    inv = tmp_path / "hosts.ini"
    inv.write_text("fast ansible_host=198.18.0.10 price_per_hour=cheap\n")
    assert main(["report", str(files["fast"]), "-i", str(inv)]) == 2
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert "hosts.ini:1: host fast: price_per_hour='cheap' is not a positive number" in err


def test_bad_report_file_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    assert main(["report", str(bad)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "x.json: schema None, expected 'provision.report/v1'" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 2
    assert "no report .json files in this folder" in " ".join(capsys.readouterr().err.split())
