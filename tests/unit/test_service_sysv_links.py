"""service on a host without systemd (update-rc.d): `enabled` is decided by Ansible's rule, a
start link /etc/rc?.d/S??NAME (devsec.ssh_hardening's `Enable or disable sshd service` was
changed on every run: the glob ran under `set -f`). Run in check mode over a tree of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.engine.runner import run_playbook
from provision.inventory.model import Host
from provision.modules import services

PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - service: {name: pvsvc, enabled: true, use: sysvinit}
    - service: {name: pvsvc, enabled: false, use: sysvinit}
"""


def _statuses(tmp_path: Path, links: list[str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    etc = tmp_path / "etc"
    script = etc / "init.d" / "pvsvc"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\nexit 3\n")  # `status`: not running
    script.chmod(0o755)
    for link in links:
        (etc / link).parent.mkdir(parents=True, exist_ok=True)
        (etc / link).symlink_to("../init.d/pvsvc")
    monkeypatch.setattr(services, "SYSV_ETC", str(etc))
    (tmp_path / "site.yml").write_text(PLAY)
    result = run_playbook(tmp_path / "site.yml", hosts=[Host("localhost", local=True)], check=True)
    return [r.status for r in result.results]


def test_a_start_link_means_enabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _statuses(tmp_path, ["rc2.d/S01pvsvc", "rc0.d/K01pvsvc"], monkeypatch) == [
        "ok",
        "changed",
    ]


def test_no_start_link_means_disabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _statuses(tmp_path, ["rc0.d/K01pvsvc"], monkeypatch) == ["changed", "ok"]
