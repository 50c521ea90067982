"""Hypothesis fuzz of the controller's parsers of what a host sends (issue 20): arbitrary bytes
give a value or one of the project's own errors, never another exception type, and what they
keep is bounded. Every parser here runs on the controller on host data:

- framing.Framer (the marker and pgid line before a command's output), bounds.LineSplitter;
- agent event lines (remote/agent.parse_event) and agent results (Agent.call);
- `@@key value` report lines (modules/files.parse_report) and fetch's reply (transfer);
- stage progress events (staging/progress.clean_event, the progress bar);
- a train run's status/summary/state.json (train/report.profile, run_entry, diagnosis);
- a run's peers (train/peers.vet_peers) and torchrun's rank lines (train/distributed).
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provision.connection.base import CommandResult, Connection
from provision.connection.bounds import LineSplitter
from provision.connection.framing import PREAMBLE_KEEP, Framer, new_marker
from provision.errors import ProvisionError
from provision.inventory.model import Host
from provision.modules.base import ModuleFailure, TaskContext
from provision.modules.files import parse_report
from provision.modules.transfer import _read_if_changed
from provision.remote.agent import parse_event
from provision.staging.progress import StageProgress, clean_event
from provision.train.distributed import label_lines, split_rank_line
from provision.train.report import profile, run_entry

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=30,
)
# dicts whose keys are the ones the parsers look for, so the fuzz reaches past the first .get()
KEYS = ["event", "data", "phase", "done", "total", "bytes", "total_bytes", "bytes_per_s", "samples_per_s",
        "eta_s", "count", "start", "path", "message", "kind", "run", "state", "gpu", "per_gpu", "util_pct_mean",
        "cpu", "busy_pct_mean", "loader", "num_workers", "amp", "dtype", "steps", "instrumented", "tail",
        "exit_code", "distributed", "hosts", "run_id", "seconds", "workdir", "log", "data_wait_fraction"]
shaped = st.recursive(
    json_values,
    lambda inner: st.dictionaries(st.sampled_from(KEYS), inner, max_size=8) | st.lists(inner, max_size=4),
    max_leaves=40,
)


@FUZZ
@given(st.binary(max_size=3000), st.lists(st.integers(min_value=1, max_value=97), min_size=1, max_size=40),
       st.booleans(), st.booleans())
def test_framer_on_any_bytes_in_any_pieces(noise: bytes, cuts: list[int], with_pgid: bool, marked: bool) -> None:
    marker = new_marker()
    body = b"the command's own bytes\x00\xff\n"
    stream = noise + ((f"{marker} 123\n" if with_pgid else f"{marker}\n").encode() + body if marked else b"")
    framer = Framer(marker, with_pgid=with_pgid, host="gpu9")
    out, at, i = bytearray(), 0, 0
    while at < len(stream):
        step = cuts[i % len(cuts)]
        out += framer.feed(stream[at:at + step])
        at, i = at + step, i + 1
        assert len(framer._buf) <= len(marker) + 64  # nothing but where a marker may begin is kept
    rest = framer.finish()
    if marked and marker.encode() not in noise:
        assert bytes(out) == body and (not with_pgid or framer.pgid == 123)
    if not framer.found:
        assert len(rest) <= PREAMBLE_KEEP + len(marker) + 64


@FUZZ
@given(st.binary(max_size=2000), st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=20))
def test_line_splitter_on_any_bytes(data: bytes, cuts: list[int]) -> None:
    lines: list[bytes] = []
    split = LineSplitter("gpu9", lines.append, limit=300)
    at, i = 0, 0
    try:
        while at < len(data):
            split.feed(data[at:at + cuts[i % len(cuts)]])
            at, i = at + cuts[i % len(cuts)], i + 1
        split.finish()
    except ProvisionError as exc:
        assert "gpu9" in str(exc)
        assert any(len(part) > 300 for part in data.split(b"\n"))
        return
    assert b"\n".join(lines) == data.rstrip(b"\n") if not data.endswith(b"\n\n") else True
    assert all(len(line) <= 300 for line in lines)


@FUZZ
@given(st.one_of(st.text(max_size=400), st.builds(lambda v: __import__("json").dumps(v), shaped),
                 st.integers(min_value=1, max_value=5000).map(lambda n: "{\"a\": " + "[" * n)))
def test_agent_event_lines(line: str) -> None:
    event = parse_event(line)
    assert event is None or isinstance(event, dict)


class _Replies(Connection):
    """A connection whose every command answers with the given stdout (the host's reply)."""

    def __init__(self, stdout: str, code: int = 0) -> None:
        self.host = Host("gpu9")
        self.doing = None
        self._stdout, self._code = stdout, code

    def run(self, command: str, **kw: Any) -> CommandResult:
        import re

        marker = re.search(r"@@content-[0-9a-f]+", command)  # fetch's per-call marker: the host sees it
        stdout = self._stdout.replace("MARKER", marker.group(0) if marker else "MARKER")
        return CommandResult(command, self._code, stdout, "")

    def stream(self, command: str, **kw: Any) -> CommandResult:  # pragma: no cover - unused
        raise NotImplementedError

    def put(self, data: bytes, remote_path: str, mode: int | None = None) -> None:  # pragma: no cover
        raise NotImplementedError

    def get(self, remote_path: str) -> bytes:  # pragma: no cover
        raise NotImplementedError

    def close(self) -> None:
        pass


lines_of_report = st.lists(st.one_of(
    st.text(max_size=60),
    st.builds(lambda k, v: f"@@{k} {v}", st.sampled_from(["path", "kind", "checksum", "before", "changed",
                                                          "error", "x"]), st.text(max_size=60)),
), max_size=12)


@FUZZ
@given(lines_of_report, st.text(max_size=200), st.integers(min_value=0, max_value=255))
def test_report_lines_and_fetch_replies(lines: list[str], body: str, code: int) -> None:
    text = "\n".join(lines)
    report = parse_report(text)
    assert isinstance(report.values, dict)
    ctx = TaskContext(host=Host("gpu9"), connection=_Replies(text + "\nMARKER\n" + body, code),
                      args={"src": "/f"})
    try:
        path, state, data = _read_if_changed(ctx, "/f", "")
    except ModuleFailure:
        return
    assert isinstance(path, str) and isinstance(state, str) and (data is None or isinstance(data, bytes))


@FUZZ
@given(shaped)
def test_stage_progress_events(event: Any) -> None:
    clean = clean_event(event)
    assert isinstance(clean, dict)
    for key in ("done", "total", "bytes", "eta_s", "bytes_per_s", "samples_per_s", "count"):
        assert key not in clean or isinstance(clean[key], (int, float))
    from rich.console import Console

    view = StageProgress(Console(file=io.StringIO(), force_terminal=True, width=120), enabled=True)
    view.callback("gpu9")(clean)  # the bar's fields, formatted (not started: no refresh thread)


@FUZZ
@given(shaped, shaped)
def test_train_status_and_summary_readers(run: Any, summary: Any) -> None:
    from provision.train.diagnosis import diagnose_run

    run_doc = run if isinstance(run, dict) else {}
    summary_doc = summary if isinstance(summary, dict) else {}
    try:
        entry = run_entry(run_doc, summary_doc, [], None)
        assert set(entry["profile"]) == {"steps", "data_wait_fraction", "gpu_util_mean", "cpu_util_mean",
                                         "num_workers", "amp"}
        assert isinstance(profile(summary_doc), dict)
        findings = diagnose_run(summary_doc, {}, None, host="gpu9")
    except ProvisionError:
        return
    assert isinstance(findings, list)


@FUZZ
@given(st.lists(st.text(max_size=80), max_size=10))
def test_rank_lines(lines: list[str]) -> None:
    for line in lines:
        rank, text = split_rank_line(line)
        assert rank is None or isinstance(rank, int)
    assert len(label_lines("gpu9", lines)) == len(lines)


@FUZZ
@given(shaped)
def test_peers_a_host_lists(listed: Any) -> None:
    from provision.train.peers import vet_peers

    vetted = vet_peers("run-x", "gpu9", listed, [], None)
    named = [p for p in listed if isinstance(p, str)] if isinstance(listed, list) else []
    assert set(vetted.accepted) | set(vetted.refused) <= set(named)
    assert all(isinstance(p, str) for p in vetted.refused)


@pytest.mark.parametrize("depth", [10, 100000])
def test_deep_json_is_no_crash(depth: int) -> None:
    assert parse_event('{"event": "result", "data": ' + "[" * depth + "]" * depth + "}") is not None or depth > 900
