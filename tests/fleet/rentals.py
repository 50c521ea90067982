"""One session fleet with a host of every rental-like kind (tests/fleet/kinds.py), for the
test_rentals_*.py files: an inventory and an ssh_config a user would write for them, and a
runner for the real CLI.

    gpu1  noisy                  root, port 22; ~/.bashrc and ~/.profile print on every command
    gpu2  gateway + noisy        root on [gw]:41001 -- AutoDL's "ssh -p PORT root@region" model
    gpu3  gateway + conda        root on [gw]:41002, the same address, its own host key
    gpu4  sudo + noisy           logs in as `ubuntu` (passwordless sudo); inventory host `ops`
                                 is the same machine as user `ops`, whose sudo needs a password
    gpu5  behind-jump + conda    reachable only through the jump host (own key) via -J
    gpu6  conda + noisy          AutoDL-like: /root/miniconda3 first on PATH, holding torch
    gpu7  nopython + conda       no python3 on PATH; inventory sets ansible_python_interpreter
                                 (host `gpu7-bare` is the same machine without it)
    gpu8  bullseye               its own Debian 11 root filesystem (Python 3.9, glibc 2.31)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kinds
from fleet import Fleet, FleetError

REPO = Path(__file__).resolve().parents[2]
KINDS: dict[str, set[str]] = {
    "gpu1": {"noisy"},
    "gpu2": {"gateway", "noisy"},
    "gpu3": {"gateway", "conda"},
    "gpu4": {"sudo", "noisy"},
    "gpu5": {"behind-jump", "conda"},
    "gpu6": {"conda", "noisy"},
    "gpu7": {"nopython", "conda"},
    "gpu8": {"bullseye"},
}
CONDA_PYTHON = f"{kinds.CONDA_PREFIX}/bin/python"
SUDO_PASSWORD_VAR = "RENTALS_SUDO_PASSWORD"
PASSPHRASE_VAR = "RENTALS_KEY_PASSPHRASE"


@dataclass
class Run:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def doc(self) -> Any:
        assert self.stdout.strip(), f"no JSON on stdout (exit {self.returncode}); stderr:\n{self.stderr[-3000:]}"
        return json.loads(self.stdout)

    def results(self, host: str) -> dict[str, dict[str, Any]]:
        """Task name -> result, for one host of a playbook run (`run`, `up`)."""
        return {r["task"]: r for r in self.doc["results"] if r["host"] == host}

    def describe(self) -> str:
        return f"exit {self.returncode} after {self.seconds:.1f}s\nstdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-4000:]}"


@dataclass
class Rentals:
    fleet: Fleet
    work: Path
    inventory: Path
    ssh_config: Path
    bullseye_missing: str = ""  # why there is no bullseye host ("" = there is one)
    timings: dict[str, float] = field(default_factory=dict)
    has_gpu: bool | None = None  # the hosts see NVIDIA GPUs (asked once, by variant())

    def variant(self) -> tuple[str, ...]:
        """`--variant cpu` where the hosts see NVIDIA GPUs (this suite on a GPU server: they share
        its /dev): the tests' index and the conda kind's torch are the CPU build."""
        from truth import nvidia_gpu_names

        if self.has_gpu is None:
            self.has_gpu = bool(nvidia_gpu_names(self.fleet, self.fleet.hosts[0]))
        return ("--variant", "cpu") if self.has_gpu else ()

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.fleet.hosts]

    def kinds_of(self, name: str) -> set[str]:
        return set(self.fleet.host(name).kinds)

    def env(self, **extra: str) -> dict[str, str]:
        """The per-test environment (tests/conftest.py's PROVISION_* paths) plus the secrets the
        inventory and options name -- by env var, never on a command line."""
        host = self.fleet.host("gpu4")
        env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
        env.update(
            PYTHONPATH=str(REPO),
            COLUMNS="200",
            **{SUDO_PASSWORD_VAR: host.sudo_passwords[kinds.SUDO_PASSWORD_USER]},
            **{PASSPHRASE_VAR: self.fleet.key_passphrase},
        )
        env.update(extra)
        return env

    def provision(self, *args: str, env: dict[str, str] | None = None, timeout: float = 600,
                  command: tuple[str, ...] = ()) -> Run:  # fmt: skip
        """`python -m provision ARGS -i INVENTORY --ssh-config CONFIG [-- COMMAND]` as a user
        runs it (COMMAND: what `provision train` runs)."""
        cmd = [sys.executable, "-m", "provision", *args,
               "-i", str(self.inventory), "--ssh-config", str(self.ssh_config)]  # fmt: skip
        if command:
            cmd += ["--", *command]
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=self.work,
                              env=env or self.env(), timeout=timeout)  # fmt: skip
        return Run(cmd, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)

    def stop(self) -> None:
        self.fleet.stop()


def _inventory(fleet: Fleet, path: Path) -> Path:
    lines = ["[rentals]"]
    for h in fleet.hosts:
        words = [h.name, f"ansible_host={h.address}", f"ansible_port={h.port}", f"ansible_user={h.user}",
                 f"ansible_ssh_private_key_file={h.key_file}"]  # fmt: skip
        if "behind-jump" in h.kinds:
            words.append("ansible_ssh_common_args='-J jump'")  # `jump`: an ssh_config alias
        if "nopython" in h.kinds:
            words.append(f"ansible_python_interpreter={CONDA_PYTHON}")
        lines.append(" ".join(words))
    sudo = fleet.host("gpu4")
    nopython = next(h for h in fleet.hosts if "nopython" in h.kinds)
    lines += [
        "",
        "[others]",
        # the sudo host as the user whose sudo asks for a password, written in the inventory
        f"ops ansible_host={sudo.address} ansible_user={kinds.SUDO_PASSWORD_USER} "
        f"ansible_ssh_private_key_file={sudo.key_file} "
        f"ansible_become_password={sudo.sudo_passwords[kinds.SUDO_PASSWORD_USER]}",
        # ... and without it, for --become-password-env and the errors
        f"ops-nopw ansible_host={sudo.address} ansible_user={kinds.SUDO_PASSWORD_USER} "
        f"ansible_ssh_private_key_file={sudo.key_file}",
        f"gpu7-bare ansible_host={nopython.address} ansible_user=root "
        f"ansible_ssh_private_key_file={nopython.key_file}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def start_rentals(work: Path) -> Rentals:
    names = list(KINDS)
    missing = ""
    try:
        kinds.bullseye_rootfs()  # minutes the first time on this machine; cached after
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        missing = f"no bullseye root filesystem: {exc}"
        names.remove("gpu8")
    started = time.monotonic()
    fleet = Fleet(len(names), kinds=[KINDS[n] for n in names], root_size="3g", ssd_size="4g").start()
    try:
        ssh_config = fleet.write_ssh_config(work / "ssh_config", proxy_jump=False)
        inventory = _inventory(fleet, work / "rentals.ini")
    except BaseException:
        fleet.stop()
        raise
    if [h.name for h in fleet.hosts] != names:
        fleet.stop()
        raise FleetError(f"rental fleet hosts {[h.name for h in fleet.hosts]} != {names}")
    rentals = Rentals(fleet, work, inventory, ssh_config, missing)
    rentals.timings["fleet start"] = time.monotonic() - started
    return rentals
