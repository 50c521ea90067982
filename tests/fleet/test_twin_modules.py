"""Modules on twins built like rented containers (PID 1 is not systemd, a root of their own):
each playbook of tests/roles_corpus/playbooks/modules/ run by ansible-playbook on one twin and
`provision run` on the other (tests/roles_corpus/roles_harness.py), the recap, the files and the
second run compared as for the roles corpus. Each is one of issue 28's module defects."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "roles_corpus"))

from fleet import preflight  # noqa: E402
from roles_harness import ANSIBLE_PLAYBOOK, HERE, Role, run_corpus, verdicts  # noqa: E402

PLAYBOOKS = sorted((HERE / "playbooks" / "modules").glob("*.yml"))
pytestmark = pytest.mark.timeout(1200)


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=[p.stem for p in PLAYBOOKS])
def test_module_on_twins_is_ansibles(playbook: Path, tmp_path: Path) -> None:
    reason = preflight()
    if reason:
        pytest.skip(f"SSH test fleet unavailable: {reason}")
    assert os.access(ANSIBLE_PLAYBOOK, os.X_OK), "ansible-core is a test dependency"
    role = Role(name=playbook.stem, playbook=playbook, source="project")
    result = run_corpus(tmp_path, [role], log=lambda line: print(line, file=sys.stderr))
    v = verdicts(role, result[role.name])
    assert v["loads"] is not None, f"ansible-playbook itself did not run it:\n{v['why']}"
    assert v["loads"] and v["recap"] and v["files"] and v["idempotent"], v["why"]
