"""Host text reaches a person only as text (issue 29, defects 3 and 10), for every command in the
CLI's registry (tests/support/text_plan.py says how each is covered; the fleet ones are
tests/fleet/test_text_canary.py). TEXT_CANARY holds `[/x]` (rich's MarkupError), a `[link=…]`, a
style tag, HTML and a fence: it must come out exactly as typed, and the command must not crash.
Real rich, the real printers; `choose` and `report` through the real CLI."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import provision.bench  # noqa: F401  (registers the bench's section of the report)
from provision.cli.main import COMMANDS
from provision.errors import HostError
from provision.inventory.model import Host
from provision.parallel import HostOutcome
from provision.terminal import console as text_console
from tests.support import text_plan
from tests.support.text_plan import TEXT_CANARY
from tests.unit.report_support import h100_facts, h100_report

ROOT = Path(__file__).resolve().parents[2]
_BOX = re.compile(r"[\s│┃║|╭╮╰╯─━┏┓┗┛┡┩╇┳┻╋┣┫┠┨┼┬┴├┤┌┐└┘]")


def literal(out: str, times: int = 1) -> None:
    """The canary is in `out` as typed (a table may have wrapped it: spacing and borders aside)."""
    assert "Traceback" not in out and "MarkupError" not in out, out[-3000:]
    flat, want = _BOX.sub("", out), _BOX.sub("", TEXT_CANARY)
    assert flat.count(want) >= times, f"the canary did not come out literally:\n{out[-3000:]}"
    assert "\x1b]8;" not in out, "a host's [link=…] became a hyperlink"


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """The CLI's console, writing to a buffer (wide, a terminal's colours: markup would show)."""
    import provision.cli.common as common

    out = io.StringIO()
    c = text_console(file=out, width=400, color_system="truecolor", force_terminal=True, soft_wrap=True)
    monkeypatch.setattr(common, "_console", c)
    for module in ("install", "train", "runs", "stop", "idle", "stage", "health", "facts", "lock", "bench", "up"):
        mod = __import__(f"provision.cli.{module}", fromlist=["console"])
        if hasattr(mod, "console"):
            monkeypatch.setattr(mod, "console", c)
    return out


def test_every_command_is_covered() -> None:
    """Generated from the registry: a new command must say how its host text is tested."""
    covered = text_plan.covered()
    missing = sorted(set(COMMANDS) - set(covered))
    assert not missing, f"commands with no text-canary coverage (add them to tests/support/text_plan.py): {missing}"
    assert not set(covered) - set(COMMANDS), "text_plan lists commands the registry does not have"
    for name in text_plan.REPLAYED:
        assert callable(globals().get(f"replay_{name}")), f"no replay_{name} in this module"


def test_the_fleet_plants_the_same_canary() -> None:
    text = (ROOT / "tests" / "fleet" / "kinds.py").read_text()
    assert f'TEXT_CANARY = "{TEXT_CANARY}"' in text and len(TEXT_CANARY) <= 64


@pytest.mark.parametrize("command", sorted(text_plan.REPLAYED))
def test_replayed_host_text_is_literal(command: str, shown: io.StringIO) -> None:
    times = globals()[f"replay_{command}"]()
    literal(shown.getvalue(), times)


def _ok(value: Any, name: str = "gpu1") -> HostOutcome:
    return HostOutcome(Host(name), value=value)


def replay_stop() -> int:
    from provision.cli.stop import print_stopped

    print_stopped("gpu1", "r1", {"already": False, "run": {"state": TEXT_CANARY},
                                 "ended": {"terminated": [1], "killed": [], "left": [TEXT_CANARY]}})
    return 2


def replay_health() -> int:
    from provision.cli.common import get_console
    from provision.cli.health import health_screen

    gpu = {"index": 0, "name": TEXT_CANARY, "verdict": "failing", "utilization": {"gpu_pct": 1},
           "memory": {"used_mib": 1, "total_mib": 81559}, "clock_event_reasons": [TEXT_CANARY],
           "notes": [TEXT_CANARY], "processes": []}
    health = {"verdict": "failing", "gpus": [gpu], "reasons": [TEXT_CANARY],
              "host": {"verdict": "ok", "cpu": {"effective_cpus": 8}, "data_dir": {"path": TEXT_CANARY}},
              "nvidia": {"driver_version": TEXT_CANARY}}
    get_console().print(health_screen({"gpu1": _ok(health)}, verbose=1))
    return 4


def replay_install() -> int:
    from provision.cli.install import print_result, progress_printer

    progress_printer("gpu1", verbose=1, quiet=False)(TEXT_CANARY)
    print_result("gpu1", {"action": "unchanged", "message": TEXT_CANARY, "warnings": [TEXT_CANARY]}, 1)
    print_result("gpu1", {"action": "failed", "error": TEXT_CANARY, "pip_lines": [TEXT_CANARY],
                          "reasons": [TEXT_CANARY], "pip_command": TEXT_CANARY}, 1)
    print_result("gpu1", {"action": "installed", "env": TEXT_CANARY, "verify": {"torch": {"version": TEXT_CANARY}}}, 0)
    return 8


def replay_stage() -> int:
    from provision.cli.stage import _print_warnings, print_staged

    result = {"path": TEXT_CANARY, "count": 3, "bytes": 10, "seconds": 1.0, "warnings": [TEXT_CANARY]}
    _print_warnings(result)
    print_staged("gpu1", result)
    print_staged("gpu1", {"skipped": True, "path": TEXT_CANARY, "verify": {"ok": False, "problems": TEXT_CANARY}})
    return 4


def _report() -> dict[str, Any]:
    facts = h100_facts()
    facts["os"]["pretty_name"] = TEXT_CANARY
    facts["gpus"][0]["name"] = TEXT_CANARY
    return h100_report(facts=facts, host=TEXT_CANARY)


def replay_bench() -> int:
    from provision.cli.common import get_console
    from provision.report.render import print_console

    print_console([_report()], get_console(), detail=True)
    return 2


def replay_up() -> int:
    from provision.cli.common import get_console
    from provision.report.render import diagnosis_headline
    from provision.terminal import markup

    findings = [{"severity": "critical", "title": TEXT_CANARY, "id": "x"}]
    get_console().print(markup("[bold]{}[/]: diagnosis: {}", TEXT_CANARY, diagnosis_headline(findings)))
    return 2


def replay_lock() -> int:
    from provision.cli.check import plan_lines
    from provision.cli.common import get_console
    from provision.compat.resolver import NoPlan

    for line in plan_lines(NoPlan(explanation=TEXT_CANARY, options=[TEXT_CANARY], reasons=[], warnings=[TEXT_CANARY])):
        get_console().print(line)
    return 3


def replay_check() -> int:
    return replay_lock()


def test_train_report_list_and_live_table_are_text(shown: io.StringIO) -> None:
    from provision.cli.train import report_entries
    from provision.train.live import RunView

    entry = {"run_id": TEXT_CANARY, "state": TEXT_CANARY, "exit_code": 1, "seconds": 2.0,
             "findings": [{"severity": TEXT_CANARY, "title": TEXT_CANARY, "evidence": TEXT_CANARY,
                           "recommendation": TEXT_CANARY}]}
    failed = HostOutcome(Host("gpu2"), error=HostError("gpu2", TEXT_CANARY))
    report_entries({"gpu1": _ok(entry), "gpu2": failed}, as_json=False)
    literal(shown.getvalue(), 7)
    from provision.cli.common import get_console

    view = RunView(get_console(), live=False)
    view.update(TEXT_CANARY, run_id=TEXT_CANARY, state=TEXT_CANARY)
    view.rows[TEXT_CANARY]["last"] = TEXT_CANARY
    get_console().print(view._table())
    literal(shown.getvalue(), 11)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="400")
    return subprocess.run([sys.executable, "-m", "provision", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def test_choose_shows_a_config_json_name_as_text(tmp_path: Path) -> None:
    config = {"_name_or_path": TEXT_CANARY, "model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2,
              "vocab_size": 16, "n_positions": 8}
    (tmp_path / "config.json").write_text(json.dumps(config))
    proc = _cli("choose", "--model", str(tmp_path / "config.json"), "--gpu", "NVIDIA H100 80GB HBM3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    literal(proc.stdout + proc.stderr)


def test_report_shows_a_documents_names_as_text(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text(json.dumps(_report()))
    proc = _cli("report", str(tmp_path / "r.json"), "-v", "--markdown", str(tmp_path / "r.md"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    literal(proc.stdout + proc.stderr, 2)
    assert "<img" not in (tmp_path / "r.md").read_text()
