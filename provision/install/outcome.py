"""What an install is asked (InstallOptions) and what it answers (InstallResult, InstallError),
shared by every step of provision/install/installer.py and by the CLI and the playbook module.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision.errors import ConfigError, HostError
from provision.install import uv as uv_mod
from provision.install.lockfile import Lock
from provision.install.mirrors import IndexOptions

ProgressCallback = Callable[[str], None]

COMPANIONS = ("torchvision", "torchaudio")

CONDA_REMOVED = (
    "conda environments are not created any more (that path was never run against a real conda). "
    "Build the managed env from a conda Python instead: --python /root/miniconda3/bin/python "
    "(or <prefix>/envs/NAME/bin/python); `provision up` keeps a working torch that is already in "
    "the active or base conda env"
)


@dataclass
class InstallOptions:
    torch: str = "latest"
    variant: str | None = None
    with_: list[str] = field(default_factory=list)  # torchvision, torchaudio
    extras: list[str] = field(default_factory=list)  # more pip requirements
    requirements: list[str] = field(default_factory=list)  # requirements files on the controller
    env: str | None = None  # stable env path on the host; default: environment.default_env_path
    python: str | None = None  # interpreter to build the venv from (a conda Python works)
    conda: str | None = None  # removed (see CONDA_REMOVED); kept so old callers get the remedy
    index: IndexOptions = field(default_factory=IndexOptions)
    relay: bool = False
    relay_dir: str | None = (
        None  # where relayed wheels land on the host (default ~/.cache/provision/wheels)
    )
    locked: Lock | None = None
    allow_minor_version_compat: bool = True
    pip_timeout: float = 30.0  # pip's socket timeout
    pip_retries: int = 2
    pip_deadline: float = 3600.0  # the whole pip run
    pip_cache: str | None = None  # None: the data dir's cache when there is one; "off": none
    keep_generations: int = 2  # current + previous
    cancel: threading.Event | None = None  # set (e.g. on Ctrl-C) to stop and clean up promptly
    check_only: bool = False  # plan and compare, change nothing (playbook check mode)
    # `provision up`: with no managed env yet, a base interpreter whose torch verifies and fits
    # the request is kept as it is (no multi-GB download to replace a working install)
    keep_base: bool = False
    # `provision install`: the same, for the torch of the active or base conda env only (an
    # AutoDL image's); the system python3's torch is never kept by install
    keep_conda: bool = False
    # a CUDA build on a host without an NVIDIA GPU (multi-GB, runs on the CPU): only when asked
    allow_cuda_build_on_cpu: bool = False
    installer: str = "auto"  # H8: auto (uv where it can be had, else pip) | uv | pip
    force: bool = False  # rebuild even when the env has the same contents and verifies

    def validate(self) -> None:
        bad = [w for w in self.with_ if w not in COMPANIONS]
        if bad:
            raise ConfigError(f"--with takes {', '.join(COMPANIONS)}; got {', '.join(bad)}")
        if self.conda:
            raise ConfigError(f"--conda {self.conda}: {CONDA_REMOVED}")
        if self.locked and (self.torch not in (None, "", "latest") or self.variant):
            raise ConfigError("--locked installs exactly the lock; drop --torch/--variant")
        if self.locked and (self.extras or self.requirements or self.with_):
            raise ConfigError(
                "--locked installs exactly the lock; --extra/-r/--with would change it "
                "(add them when locking instead)"
            )
        for path in self.requirements:
            if not Path(path).is_file():
                raise ConfigError(f"-r {path}: no such file on the controller")
        if self.installer not in uv_mod.INSTALLERS:
            raise ConfigError(
                f"--installer {self.installer!r}: one of {', '.join(uv_mod.INSTALLERS)}"
            )
        self.index.validate()


@dataclass
class InstallResult:
    host: str
    action: str = "failed"  # installed | unchanged | would-install | failed | refused
    message: str = ""
    env: str | None = None
    python: str | None = None
    generation: str | None = None
    previous: str | None = None
    plan: dict[str, Any] | None = None
    index: dict[str, Any] | None = None
    packages: dict[str, str] = field(default_factory=dict)  # installed name -> version
    verify: dict[str, Any] | None = None
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    pip_lines: list[str] = field(default_factory=list)
    pip_command: str = ""
    relayed: dict[str, int] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    installer: dict[str, Any] | None = None  # H8: {"tool": "uv", "path", "how"}; None: pip

    @property
    def ok(self) -> bool:
        return self.action in ("installed", "unchanged", "would-install")

    @property
    def changed(self) -> bool:
        return self.action in ("installed", "would-install")

    def as_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "action": self.action,
            "changed": self.changed,
            "message": self.message,
            "env": self.env,
            "python": self.python,
            "generation": self.generation,
            "previous": self.previous,
            "plan": self.plan,
            "index": self.index,
            "packages": self.packages,
            "verify": self.verify,
            "reasons": self.reasons,
            "warnings": self.warnings,
            "pip_lines": self.pip_lines,
            "pip_command": self.pip_command,
            "relayed": self.relayed,
            "installer": self.installer or {"tool": "pip"},
            "seconds": {k: round(v, 2) for k, v in self.timings.items()},
        }


class InstallError(HostError):
    """The install failed or was refused; `.result` holds what is known (pip's lines included)."""

    def __init__(
        self, host: str, message: str, result: InstallResult, *, no_fit: bool = False
    ) -> None:
        super().__init__(host, message)
        self.result = result
        # no torch build fits this host (Python, driver, index): a caller that can do without
        # torch (`up --no-bench`) warns and goes on; pip failures and the like stay failures
        self.no_fit = no_fit


class InstallCancelled(HostError):
    """Stopped on request (Ctrl-C); the previous environment is untouched."""


def check_cancel(options: InstallOptions, host: str, result: InstallResult) -> None:
    if options.cancel is not None and options.cancel.is_set():
        result.action = "failed"
        result.message = "interrupted; the environment is unchanged"
        raise InstallCancelled(host, result.message)


@contextlib.contextmanager
def timed(timings: dict[str, float], name: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + time.monotonic() - start
