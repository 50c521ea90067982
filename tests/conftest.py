"""Shared test setup: every test runs with its own provision state, never the user's.

- PROVISION_HOME, PROVISION_KNOWN_HOSTS and PROVISION_USER_KNOWN_HOSTS point into a per-test
  temp dir (not `tmp_path`, so a test's own tmp_path stays empty), and SSH_AUTH_SOCK is unset:
  nothing reads or writes ~/.ssh or ~/.local/state/provision, and no agent key is offered.
- Tests under tests/fleet/ get the `fleet` marker; `fleet` tests skip with the reason when this
  machine cannot run the SSH test fleet (not root, no sshd, no network namespaces).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

FLEET_DIR = Path(__file__).resolve().parent / "fleet"
if str(FLEET_DIR) not in sys.path:
    sys.path.insert(0, str(FLEET_DIR))  # `from fleet import Fleet` (tests/ is not a package)


@dataclass
class ProvisionEnv:
    home: Path
    known_hosts: Path  # the project's file: accept-new writes here
    user_known_hosts: Path  # stands in for ~/.ssh/known_hosts


@pytest.fixture(autouse=True)
def provision_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> ProvisionEnv:
    base = tmp_path_factory.mktemp("provision-env")
    env = ProvisionEnv(
        home=base / "home",
        known_hosts=base / "known_hosts",
        user_known_hosts=base / "user_known_hosts",
    )
    env.home.mkdir()
    monkeypatch.setenv("PROVISION_HOME", str(env.home))
    monkeypatch.setenv("PROVISION_KNOWN_HOSTS", str(env.known_hosts))
    monkeypatch.setenv("PROVISION_USER_KNOWN_HOSTS", str(env.user_known_hosts))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return env


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if FLEET_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.fleet)
    fleet_items = [item for item in items if item.get_closest_marker("fleet")]
    if fleet_items:
        from fleet import preflight

        reason = preflight()
        if reason:
            skip = pytest.mark.skip(reason=f"SSH test fleet unavailable: {reason}")
            for item in fleet_items:
                item.add_marker(skip)
