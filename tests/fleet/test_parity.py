"""Parity with Ansible, proven on real hosts: every playbook of tests/parity/corpus/ runs with
ansible-playbook (ansible-core, a test dependency) and with `provision run` against the same
fresh fleet hosts (SSH, both tools configured by one ansible.cfg), and must leave the same files
(paths, contents, modes, owners, registered values), the same recap counts on the first run,
changed=0 on the second, and the same --check results with nothing changed.

The corpus format (and the fields normalised) is in tests/parity/README.md. Ansible runs every
playbook that can share an invocation in one `ansible-playbook a.yml b.yml ...` call (its
per-task cost is what makes it slow); provision runs each playbook on its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parity"))

from fleet import Fleet, preflight  # noqa: E402
from harness import (  # noqa: E402
    ANSIBLE_PLAYBOOK,
    CorpusEntry,
    Workspace,
    discover,
    normalize_snapshot,
    per_playbook,
)

# PARITY_ONLY=loops,roles runs just those (while writing a corpus playbook); CI runs them all.
ENTRIES = [
    e
    for e in discover()
    if not os.environ.get("PARITY_ONLY") or e.stem in os.environ["PARITY_ONLY"].split(",")
]
HOSTS = 2
# The module fixture runs ansible-playbook 3 times (plus once per `alone` playbook) and
# provision 3 times per playbook; on a loaded 2-core machine that passes the default 600 s.
pytestmark = pytest.mark.timeout(3600)


def _nonzero(recap: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {h: c for h, c in recap.items() if any(c.values())}


def _run_ansible(ws: Workspace, entries: list[CorpusEntry], check: bool) -> dict[str, Any]:
    shared = [e for e in entries if not e.alone]
    runs = [ws.ansible(shared, check=check)] if shared else []
    runs += [ws.ansible([e], check=check) for e in entries if e.alone]
    return {
        "recaps": per_playbook(runs),
        "failures": [f for r in runs for f in r["failures"]],
        "broken": {k: v for r in runs for k, v in r["broken"].items()},
        "output": "\n".join(r["output"] for r in runs),
    }


def _phases(ws: Workspace, tool: str) -> dict[str, Any]:
    """check on fresh hosts -> snapshot -> first run -> snapshot -> second run."""
    ws.wipe()
    out: dict[str, Any] = {}
    checked = [e for e in ENTRIES if e.check]
    if tool == "ansible":
        out["check"] = _run_ansible(ws, checked, check=True)["recaps"]
        out["after_check"] = ws.snapshot()
        first = _run_ansible(ws, ENTRIES, check=False)
        out["first"], out["first_failures"] = first["recaps"], first["failures"]
        out["broken"] = first["broken"]
        out["output"] = first["output"]
        out["files"] = ws.snapshot()
        out["second"] = _run_ansible(ws, ENTRIES, check=False)["recaps"]
    else:
        out["check"] = {e.name: ws.provision(e, check=True)["recap"] for e in checked}
        out["after_check"] = ws.snapshot()
        out["first"], out["first_failures"], out["output"] = {}, [], ""
        for e in ENTRIES:
            run = ws.provision(e)
            out["first"][e.name] = run["recap"]
            out["first_failures"] += [{**f, "playbook": e.name} for f in run["failures"]]
            out["output"] += f"--- {e.name}\n{run['output']}\n"
        out["files"] = ws.snapshot()
        out["second"] = {e.name: ws.provision(e)["recap"] for e in ENTRIES}
    return out


@pytest.fixture(scope="module")
def parity(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    reason = preflight()
    if reason:
        pytest.skip(f"SSH test fleet unavailable: {reason}")
    assert os.access(ANSIBLE_PLAYBOOK, os.X_OK), "ansible-core is a test dependency"
    fleet = Fleet(HOSTS).start()
    try:
        ws = Workspace(tmp_path_factory.mktemp("parity"), fleet)
        ws.prepare()
        ansible = _phases(ws, "ansible")
        ours = _phases(ws, "provision")
        yield {"ansible": ansible, "provision": ours}
    finally:
        fleet.stop()


def _files(snapshot: dict[str, Any], entry: CorpusEntry) -> dict[str, Any]:
    prefix = entry.stem + "/"
    return {
        host: normalize_snapshot(
            {k: v for k, v in files.items() if k == entry.stem or k.startswith(prefix)},
            entry.ignore_paths,
        )
        for host, files in snapshot.items()
    }


def _why(parity: dict[str, Any], entry: CorpusEntry) -> str:
    lines = []
    for tool in ("ansible", "provision"):
        fails = [f for f in parity[tool]["first_failures"] if f.get("playbook") == entry.name]
        lines.append(f"{tool} failures: {fails}")
    return "\n".join(lines)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_same_recap_on_first_run(parity: dict[str, Any], entry: CorpusEntry) -> None:
    broken = parity["ansible"]["broken"].get(entry.name)
    assert broken is None, f"ansible-playbook refused {entry.name}:\n{broken}"
    theirs = _nonzero(parity["ansible"]["first"].get(entry.name, {}))
    ours = _nonzero(parity["provision"]["first"].get(entry.name, {}))
    assert theirs, f"ansible-playbook ran nothing for {entry.name}:\n{parity['ansible']['output']}"
    assert ours == theirs, _why(parity, entry)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_same_files_and_registered_values(parity: dict[str, Any], entry: CorpusEntry) -> None:
    theirs = _files(parity["ansible"]["files"], entry)
    ours = _files(parity["provision"]["files"], entry)
    assert any(theirs.values()), f"{entry.name} left no files under /root/parity/{entry.stem}"
    assert ours == theirs, _why(parity, entry)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_second_run_changes_nothing(parity: dict[str, Any], entry: CorpusEntry) -> None:
    theirs = _nonzero(parity["ansible"]["second"].get(entry.name, {}))
    ours = _nonzero(parity["provision"]["second"].get(entry.name, {}))
    assert ours == theirs
    if entry.idempotent:
        assert all(c["changed"] == 0 for c in ours.values()), ours


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.check], ids=lambda e: e.name)
def test_check_mode_reports_the_same_and_changes_nothing(
    parity: dict[str, Any], entry: CorpusEntry
) -> None:
    theirs = _nonzero(parity["ansible"]["check"].get(entry.name, {}))
    ours = _nonzero(parity["provision"]["check"].get(entry.name, {}))
    assert ours == theirs
    assert _files(parity["provision"]["after_check"], entry) == _files(
        parity["ansible"]["after_check"], entry
    )


def test_corpus_rules() -> None:
    """Every corpus playbook skips fact gathering (the tools' facts differ by design) and
    targets the parity group."""
    import yaml

    assert len(ENTRIES) >= 20, f"the parity corpus has {len(ENTRIES)} playbooks; it needs >= 20"
    for entry in ENTRIES:
        try:
            plays = yaml.safe_load(entry.path.read_text())
        except yaml.YAMLError as exc:
            raise AssertionError(f"{entry.name} is not valid YAML: {exc}") from None
        for play in plays:
            if "import_playbook" in play:
                continue
            assert play.get("gather_facts") is False, f"{entry.name}: set gather_facts: false"
