"""A compromised rental whose python3 answers agent commands as it likes (the `hostile` kind's
`agent-COMMAND` attacks, tests/fleet/kinds.py), against the real CLI over real SSH (issue 29):

- shapes: a reply of the wrong shape fails that host with host, command and field named, never a
  traceback, in facts, health, runs, idle --status and logs --json; `facts bad good` prints the
  good host's facts;
- strict JSON: a host's Infinity leaves `--json` as null with the reason beside it;
- masking: `idle --status/--cancel --json` never print the stop command's token;
- memory: a reply of many short lines costs the controller a small multiple of its bytes, on both
  transports;
- the stage watchdog: counts past the total and a new phase name each time trip
  `stage --stall-timeout 1`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import kinds
import pytest
import test_hostile_host as base

hostile = base.hostile
attack = base.attack
transport = base.transport
Hostile = base.Hostile
REPO = base.REPO


def _provision(h: Hostile, *args: str, inventory: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    env.update(PYTHONPATH=str(REPO), COLUMNS="200")
    cmd = [sys.executable, "-m", "provision", *args, "-i", str(inventory or h.inventory),
           "--ssh-config", str(h.ssh_config), "--known-hosts", "accept-new"]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=h.work, env=env, timeout=timeout)


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in --json output: not JSON")

    return json.loads(text, parse_constant=refuse)


# -- shapes ------------------------------------------------------------------------------------------
# (CLI arguments after the host, the agent command the host lies in, its reply, the field named)
MISFITS = {
    "facts": ([], "facts", 'result({"hostname": "evil", "os": "a string", "gpus": "none"})', "os"),
    "health": ([], "health", 'result({"verdict": "healthy", "gpus": [{"index": 0, "memory": "lots"}]})',
               "gpus[0].memory"),
    "runs": ([], "train_list", 'result({"runs": "none"})', "runs"),
    "idle": (["--status"], "train_idle", 'result({"watcher": [1, 2]})', "watcher"),
    "logs": ([kinds.HOSTILE_RUN, "--json"], "train_status", 'result({"run": "x", "tail": 5})', "run"),
}


@pytest.mark.parametrize("command", sorted(MISFITS))
def test_a_misfit_reply_fails_the_host_naming_the_command_and_field(hostile: Hostile, attack, command: str) -> None:
    extra, agent_command, code, field = MISFITS[command]
    attack(f"agent-{agent_command}", code)
    proc = _provision(hostile, command, hostile.host.name, *extra)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-3000:]
    assert proc.returncode == 1, out[-3000:]
    assert f"agent {agent_command}: its result does not fit: {field} is " in " ".join(out.split()), out[-3000:]
    assert hostile.host.name in out


def test_facts_of_a_bad_and_a_good_host_print_the_good_ones(hostile: Hostile, attack) -> None:
    attack("agent-facts", 'result({"hostname": "evil", "os": ["not", "an", "object"]})')
    proc = _provision(hostile, "facts", hostile.host.name, "localhost")
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and proc.returncode == 1, out[-3000:]
    assert f"{hostile.host.name}: failed" in out and "os is a list of 3 items" in out, out[-3000:]
    assert "localhost —" in out, out[-3000:]  # the good host's table


# -- strict JSON --------------------------------------------------------------------------------------
def test_a_hosts_infinity_leaves_json_as_null_with_the_reason(hostile: Hostile, attack) -> None:
    attack("agent-facts", 'result({"hostname": "h", "disks": {"setup_mounts": [{"size_total": float("inf")}]}})')
    proc = _provision(hostile, "facts", hostile.host.name, "--json")
    mount = _strict(proc.stdout)["hosts"][hostile.host.name]["disks"]["setup_mounts"][0]
    assert mount == {"size_total": None, "size_total_invalid": "Infinity: not a number JSON can carry"}


def test_a_hosts_infinity_where_a_finite_number_is_declared_fails_the_host(hostile: Hostile, attack) -> None:
    attack("agent-facts", 'result({"hostname": "h", "cpu": {"usable_cpus": float("inf")}})')
    proc = _provision(hostile, "facts", hostile.host.name, "--json")
    error = _strict(proc.stdout)["hosts"][hostile.host.name]["error"]
    assert "agent facts: its result does not fit: cpu.usable_cpus is Infinity" in error


# -- masking ------------------------------------------------------------------------------------------
def test_idle_json_never_prints_the_stop_commands_token(hostile: Hostile) -> None:
    token = "tok-29-hostile-secret"
    h = hostile.host
    inventory = hostile.work / "idle-hosts.ini"
    inventory.write_text(
        f"{h.name} ansible_host={h.address} ansible_port={h.port} ansible_user={h.user} "
        f"ansible_ssh_private_key_file={h.key_file} data_dir={kinds.HOSTILE_DATA_DIR} "
        f"stop_command=\"curl -s -H 'Authorization: Bearer {token}' http://127.0.0.1:9/stop\"\n")
    try:
        started = _provision(hostile, "idle", h.name, "--after", "6h", "--json", inventory=inventory)
        assert started.returncode == 0, (started.stdout + started.stderr)[-3000:]
        for flag in ("--status", "--cancel"):
            proc = _provision(hostile, "idle", h.name, flag, "--json", inventory=inventory)
            out = proc.stdout + proc.stderr
            assert proc.returncode == 0, out[-3000:]
            assert token not in out, f"idle {flag} --json printed the stop command's token"
            watcher = _strict(proc.stdout)["hosts"][h.name]["watcher"]
            assert watcher.get("stop_command") == "********", watcher
    finally:
        _provision(hostile, "idle", h.name, "--cancel", inventory=inventory)


# -- memory -------------------------------------------------------------------------------------------
def test_a_reply_of_short_lines_costs_a_small_multiple_of_its_bytes(transport) -> None:
    """36 MB of short lines took the controller to 949 MB (a str per line); now the reply is
    kept as its bytes. tracemalloc: what Python allocated at the call's peak, over its bytes."""
    size = 6_000_000
    assert transport.run("echo fine", timeout=60).stdout == "fine\n"  # connected before measuring
    lines = [0]

    def on_line(line: str) -> None:
        lines[0] += 1

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base_bytes = tracemalloc.get_traced_memory()[0]
        result = transport.stream(f"yes xy | head -c {size}", on_stdout_line=on_line, timeout=300)
        peak = tracemalloc.get_traced_memory()[1] - base_bytes
    finally:
        tracemalloc.stop()
    assert result.ok and lines[0] == size // 3
    assert peak / size < 4.0, f"the controller kept {peak / size:.1f}x the reply's bytes"


# -- the stage watchdog ---------------------------------------------------------------------------------
LYING_STAGE = (
    "n = 0\n"
    "while True:\n"
    "    n += 1\n"
    "    emit(event='progress', phase='stage', done=1000 * n, total=10, bytes=0, total_bytes=10)\n"
    "    emit(event='progress', phase='invented%d' % n)\n"
    "    time.sleep(0.1)\n"
)


def test_invented_stage_progress_trips_the_stall_timeout(hostile: Hostile, attack, tmp_path: Path) -> None:
    from provision.staging.sample import make_text_folder

    source = make_text_folder(tmp_path / "texts", 20, classes=2, size=2_000)
    attack("agent-stage", LYING_STAGE)
    # bounded: main believed the host and ran for ever; 15 stall timeouts of no progress trip it
    proc = _provision(hostile, "stage", str(source), hostile.host.name, "--dest", kinds.HOSTILE_DATA_DIR + "/lies",
                      "--stall-timeout", "1", timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "made no progress" in " ".join(out.split()), out[-3000:]
    assert "Traceback" not in out
