"""The one boundary for host replies (issue 29, defect 5): every agent command's result is checked
against the shape it declares (provision/remote/replies.py) in Agent.call, before any CLI or
engine code reads it. A reply that does not fit fails that host, naming the host, the command and
the field; the other hosts go on.

- the real agent's replies fit (facts and health on every nvidia-smi fixture, the train commands);
- a host whose python3 answers with a misfit fails alone, with host, command and field named;
- a hypothesis fuzz per declared command: any JSON is accepted or refused with ShapeError, and
  what is accepted renders in the commands that print it (facts, health, runs, idle, logs)
  without an exception.

Over real SSH, through the CLI: tests/fleet/test_hostile_replies.py."""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provision.connection.local import LocalConnection
from provision.errors import AgentError
from provision.inventory.model import Host
from provision.parallel import HostOutcome, for_each_host
from provision.remote import replies
from provision.remote.agent import Agent
from provision.remote.shape import (
    AnyValue,
    Bool,
    Enum,
    ListOf,
    MapOf,
    Num,
    Obj,
    OneOf,
    Shape,
    ShapeError,
    Str,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures" / "nvidia"
FUZZ = settings(max_examples=40, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FUZZ_RENDER = settings(FUZZ, max_examples=100)


# -- the real agent's replies fit ------------------------------------------------------------------
def _program(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def _fixture_env(tmp_path: Path, fixture: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    _program(bin_dir / "nvidia-smi", f'#!/bin/sh\nexec "{sys.executable}" "{FIXTURES / "fake_nvidia_smi.py"}" "$@"\n')
    _program(bin_dir / "dmesg", f"#!/bin/sh\ncat '{FIXTURES / 'kernel-xid.log'}'\n")
    env = dict(os.environ, PATH=f"{bin_dir}:/usr/bin:/bin", PROVISION_AGENT_NO_NVML="1", PYTHONPATH=str(REPO))
    env["FAKE_SMI_XML" if fixture.suffix == ".xml" else "FAKE_SMI_CSV"] = str(fixture)
    return env


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.xml")) + sorted(FIXTURES.glob("*.csv")),
                         ids=lambda p: p.name)
@pytest.mark.parametrize("command", ["facts", "health"])
def test_the_real_agents_replies_fit_their_shapes(tmp_path: Path, fixture: Path, command: str) -> None:
    """Shapes that refused a real reply would fail every host: each fixture's GPUs, as the agent
    reports them through nvidia-smi's XML or CSV, fit."""
    request = json.dumps({"data_dir": str(tmp_path)}) + "\n"
    proc = subprocess.run([sys.executable, "-m", "provision.agent", command], input=request.encode(),
                          capture_output=True, env=_fixture_env(tmp_path, fixture), cwd=tmp_path, timeout=120)
    data = json.loads(proc.stdout.decode().splitlines()[-1])["data"]
    assert data.get("gpus"), "the fixture's GPUs were not read: the case proves nothing"
    replies.check_reply(command, data)


def test_the_train_commands_replies_fit_through_agent_call(tmp_path: Path) -> None:
    """The train commands as `runs`, `idle --status` and `logs` call them, on this machine's own
    agent: Agent.call checks each (a misfit would raise AgentError here)."""
    conn = LocalConnection(Host("localhost", local=True))
    agent = Agent(conn)
    data_dir = str(tmp_path)
    assert agent.call("train_list", {"data_dir": data_dir})["runs"] == []
    assert "watcher" in agent.call("train_idle", {"action": "status", "data_dir": data_dir})
    assert "watcher" in agent.call("train_idle", {"action": "cancel", "data_dir": data_dir})
    assert agent.call("ping")["protocol"]


# -- a misfit fails that host, naming it, the command and the field --------------------------------
def _lying_python(tmp_path: Path, data: Any) -> str:
    """A python3 that answers every agent call with `data` as its result (a compromised host's)."""
    reply = json.dumps({"event": "result", "data": data})
    return str(_program(tmp_path / "python3", f"#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' '{reply}'\n"))


@pytest.mark.parametrize(("command", "data", "field"), [
    ("facts", {"hostname": "evil", "os": "a string"}, "os"),
    ("facts", {"gpus": [{"index": 0, "memory": {"total_mib": "80 GiB"}}]}, "gpus[0].memory.total_mib"),
    ("facts", {"cpu": {"usable_cpus": math.inf}}, "cpu.usable_cpus"),
    ("health", {"verdict": "fine"}, "verdict"),
    ("health", {"gpus": [{"memory": [1]}]}, "gpus[0].memory"),
    ("train_list", {"runs": "none"}, "runs"),
    ("train_list", {}, "runs"),
    ("train_list", {"runs": [{"age_s": "old"}]}, "runs[0].age_s"),
    ("train_idle", {"watcher": [1, 2]}, "watcher"),
    ("train_status", {"run": "x", "tail": 5}, "run"),
])
def test_a_misfit_reply_fails_the_host_naming_host_command_and_field(
    tmp_path: Path, command: str, data: dict[str, Any], field: str
) -> None:
    conn = LocalConnection(Host("gpu9", local=True))
    with pytest.raises(AgentError) as err:
        Agent(conn, python=_lying_python(tmp_path, data)).call(command, {})
    message = str(err.value)
    assert message.startswith(f"gpu9: agent {command}: its result does not fit: {field} is "), message
    assert "expected" in message


def test_the_other_hosts_go_on(tmp_path: Path) -> None:
    bad = _lying_python(tmp_path, {"hostname": "evil", "os": ["not", "an", "object"]})

    def work(host: Host) -> dict[str, Any]:
        conn = LocalConnection(host)
        return Agent(conn, python=bad if host.name == "bad" else None).call("ping" if host.name == "good" else "facts")

    outcomes = for_each_host([Host("bad", local=True), Host("good", local=True)], work, forks=2)
    assert not outcomes["bad"].ok and "agent facts" in outcomes["bad"].message and " os is " in outcomes["bad"].message
    assert outcomes["good"].ok and outcomes["good"].value["protocol"]


# -- the fuzz ----------------------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)


def from_shape(shape: Shape, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values near a shape: mostly fitting (so the fuzz reaches the renderers), with any JSON
    anywhere now and then (so the checker meets every misfit)."""
    anything = json_values
    if isinstance(shape, Str):
        fit: st.SearchStrategy[Any] = st.text(max_size=24)
    elif isinstance(shape, Num):
        lo, hi = max(shape.lo, -(2.0**53)), min(shape.hi, 2.0**53)
        ints = st.integers(min_value=int(math.ceil(lo)), max_value=int(hi))
        fit = ints if shape.integer else ints | st.floats(min_value=lo, max_value=hi)
    elif isinstance(shape, Bool):
        fit = st.booleans()
    elif isinstance(shape, Enum):
        fit = st.sampled_from(sorted(shape.values))
    elif isinstance(shape, OneOf):
        fit = st.one_of([from_shape(s, depth) for s in shape.shapes])
    elif isinstance(shape, ListOf):
        fit = st.lists(from_shape(shape.item, depth + 1), max_size=3 if depth < 3 else 1)
    elif isinstance(shape, MapOf):
        fit = st.dictionaries(st.text(max_size=8), from_shape(shape.value, depth + 1), max_size=3)
    elif isinstance(shape, Obj):
        required = {k: from_shape(shape.fields[k], depth + 1) for k in shape.required}
        fields = {k: from_shape(v, depth + 1) | st.none() for k, v in shape.fields.items() if k not in required}
        fit = st.fixed_dictionaries(required, optional=fields)
    else:
        fit = anything
    if isinstance(shape, AnyValue):
        return anything
    return st.integers(0, 11).flatmap(lambda i: anything if i == 0 else fit)  # 1 in 12: any JSON


def _console_text(capsys: pytest.CaptureFixture[str]) -> str:
    out = capsys.readouterr()
    return out.out + out.err


def _render(command: str, data: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """What each printing command does with an accepted reply of `command`."""
    from rich.console import Console

    screen = Console(file=io.StringIO(), width=160, force_terminal=True)
    host = Host("gpu9")
    if command == "facts":
        from provision.cli.facts import facts_table

        screen.print(facts_table("gpu9", data))
    elif command == "health":
        from provision.cli.health import health_screen, json_document

        outcomes = {"gpu9": HostOutcome(host, value=data)}
        screen.print(health_screen(outcomes, verbose=2))
        from provision.cli.common import emit_json

        emit_json(json_document(outcomes))
    else:
        _render_train(command, data, host)
    _console_text(capsys)


def _render_train(command: str, data: dict[str, Any], host: Host) -> None:
    """runs / idle --status / logs as their run() prints an outcome whose value is `data`."""
    import provision.cli.common as common
    import provision.cli.idle as idle
    import provision.cli.logs as logs
    import provision.cli.runs as runs
    import provision.inventory.loader as loader

    value = data["runs"] if command == "train_list" else data
    outcomes = {"gpu9": HostOutcome(host, value=value)}
    module = {"train_list": runs, "train_idle": idle, "train_status": logs}[command]
    saved = module.on_hosts, loader.resolve_targets, common.connect_options
    module.on_hosts = lambda args, targets, work: outcomes  # type: ignore[attr-defined]
    loader.resolve_targets = lambda targets, inventory, options: [host]  # type: ignore[assignment]
    common.connect_options = lambda args: None  # type: ignore[assignment]
    try:
        for as_json in (False, True):
            for status, cancel in ((True, False), (False, True)):
                args = argparse.Namespace(json=as_json, targets=["gpu9"], target="gpu9", run_id="r1", follow=False,
                                          lines=20, no_prefix=True, inventory=None, after="30m", cancel=cancel,
                                          status=status, forks=1, exit_codes=None)
                module.run(args)
    finally:
        module.on_hosts, loader.resolve_targets, common.connect_options = saved  # type: ignore[assignment]


RENDERED = ["facts", "health", "train_list", "train_idle", "train_status"]


@pytest.mark.parametrize("command", sorted(replies.RESULTS))
def test_fuzz_every_declared_command_accepts_or_refuses_cleanly(command: str) -> None:
    @FUZZ
    @given(from_shape(replies.RESULTS[command]))
    def check(data: Any) -> None:
        try:
            replies.check_reply(command, data)
        except ShapeError as exc:
            assert str(exc) and exc.path  # names the field
            return
        assert isinstance(data, dict)

    check()


@pytest.mark.parametrize("command", RENDERED)
def test_fuzz_what_the_boundary_accepts_renders_without_a_traceback(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    accepted = [0]

    @FUZZ_RENDER
    @given(from_shape(replies.RESULTS[command]))
    def check(data: Any) -> None:
        try:
            replies.check_reply(command, data)
        except ShapeError:
            return
        accepted[0] += 1
        _render(command, data, capsys)

    check()
    assert accepted[0] > 10, "the fuzz hardly reached the renderers"
