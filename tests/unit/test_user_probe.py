"""The user probe of `gather_facts`: no sudo for root, a bounded one for everyone else.

The probe is run by a real /bin/sh with `id` and `sudo` replaced on PATH, so the script itself is
what is tested: root never starts sudo (on hosts whose own name does not resolve, sudo waits
~20 s on DNS before anything), and a sudo that hangs is given up after SUDO_PROBE_SECONDS and
reported as such instead of holding the play.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from provision.modules import control


def _probe(tmp_path: Path, uid: int, sudo_body: str) -> tuple[dict[str, str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    called = tmp_path / "sudo-called"
    (bin_dir / "id").write_text(
        f'#!/bin/sh\ncase "$1" in -u) echo {uid};; -g) echo {uid};; -un) echo user{uid};; esac\n'
    )
    (bin_dir / "sudo").write_text(f"#!/bin/sh\ntouch {called}\n{sudo_body}\n")
    for tool in ("id", "sudo"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def run(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env=env,
                              timeout=60)  # fmt: skip

    return control.probe_user(run), called


def test_root_is_never_probed_with_sudo(tmp_path: Path) -> None:
    info, called = _probe(tmp_path, 0, "exit 0")
    assert info["uid"] == "0" and not called.exists()
    assert "sudo" not in info and "sudo_timeout" not in info


def test_passwordless_sudo_is_found_for_a_user(tmp_path: Path) -> None:
    info, called = _probe(tmp_path, 1000, "exit 0")
    assert called.exists() and info["sudo"] == "1" and info["sudo_nopasswd"] == "1"


def test_a_hanging_sudo_is_given_up_and_reported(tmp_path: Path) -> None:
    info, called = _probe(tmp_path, 1000, "exec sleep 600")
    assert called.exists() and info["sudo"] == "1"
    assert info.get("sudo_timeout") == "1" and "sudo_nopasswd" not in info
