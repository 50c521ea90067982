"""`--json` is strict JSON and the stop command is masked wherever it is printed (issue 29,
defects 8 and 9). Over real SSH from a hostile host: tests/fleet/test_hostile_replies.py."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from provision.cli.common import emit_json
from provision.inventory.model import Host
from provision.parallel import HostOutcome
from provision.secrets import MASK, is_secret_name, mask_tree


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in --json output: not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_hosts_nan_and_infinity_leave_as_null_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    emit_json({"hosts": {"gpu9": {"cpu": {"usable_cpus": float("inf"), "model": "x"},
                                  "load": [float("nan"), 1.5], "t": -float("inf")}}})
    doc = _strict(capsys.readouterr().out)["hosts"]["gpu9"]
    assert doc["cpu"] == {"usable_cpus": None, "usable_cpus_invalid": "Infinity: not a number JSON can carry",
                          "model": "x"}
    assert doc["load"] == [None, 1.5] and doc["t"] is None and doc["t_invalid"].startswith("-Infinity")


def test_a_document_without_them_is_written_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    document = {"hosts": {"gpu9": {"a": 1.5, "b": [1, "x", None, True], "c": {"d": "中"}}}}
    emit_json(document)
    assert capsys.readouterr().out == json.dumps(document, indent=2, ensure_ascii=False) + "\n"


STOP = "curl -X POST -H 'Authorization: Bearer tok-29-secret' https://api.example/v1/instances/1/stop"


def test_the_stop_command_is_secret_by_the_one_rule() -> None:
    assert is_secret_name("stop_command")
    assert mask_tree({"watcher": {"stop_command": STOP, "status": "watching"}}) == {
        "watcher": {"stop_command": MASK, "status": "watching"}}


@pytest.mark.parametrize("action", ["status", "cancel"])
def test_idle_json_masks_the_stop_command(action: str, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's idle watcher state holds the stop command; `idle --status/--cancel --json`
    printed it, token and all (the agent's reply as it is, from a real watcher's state.json)."""
    import provision.cli.idle as idle

    watcher = {"data_dir": "/root", "duration": 1800.0, "stop_command": STOP, "status": "watching",
               "created": 1.0, "pid": 4242}
    value = {"watcher": watcher, "running": True, **({"cancelled": True} if action == "cancel" else {})}
    monkeypatch.setattr(idle, "on_hosts", lambda args, targets, work: {"gpu9": HostOutcome(Host("gpu9"), value=value)})
    args = argparse.Namespace(json=True, targets=["gpu9"], after="30m", status=action == "status",
                              cancel=action == "cancel")
    assert idle.run(args) == 0
    out = capsys.readouterr()
    assert "tok-29-secret" not in out.out + out.err
    assert _strict(out.out)["hosts"]["gpu9"]["watcher"]["stop_command"] == MASK
