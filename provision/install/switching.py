"""Switching: the only step that touches the env users run. A new generation is built under the
env's lock (building_aside); it becomes the env with one rename (Aside.switch), after its
manifest is written; until then any failure, Ctrl-C included, removes the half-built generation
and leaves the env as it was. Older generations are pruned after the switch.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from provision import __version__
from provision.errors import HostError
from provision.install.lockfile import Lock
from provision.install.outcome import InstallOptions, InstallResult, timed
from provision.install.planning import Plan, PythonInfo
from provision.install.verification import Verification
from provision.remote.environment import ManagedEnv


def _owner() -> str:
    return f"{socket.gethostname()} pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}"


@dataclass
class Aside:
    env: ManagedEnv
    generation: str
    switched: bool = False

    def switch(self, result: InstallResult) -> None:
        """Point the env at the generation (one rename); result.previous: what it pointed at."""
        with timed(result.timings, "switch"):
            result.previous = self.env.switch(self.generation)
            self.switched = True


@contextlib.contextmanager
def building_aside(env: ManagedEnv, result: InstallResult) -> Iterator[Aside]:
    """Hold the env's lock while a new generation is built beside it; remove the generation
    unless it was switched to."""
    env.acquire(_owner())
    aside = Aside(env, env.new_generation_path())
    result.generation = aside.generation
    try:
        yield aside
    except BaseException:
        if not aside.switched:
            with contextlib.suppress(Exception):
                env.discard(aside.generation)
            result.generation = None
        raise
    finally:
        with contextlib.suppress(Exception):
            env.release()


def write_manifest(
    env: ManagedEnv,
    generation: str,
    fp: str,
    plan: Plan,
    options: InstallOptions,
    py: PythonInfo,
    result: InstallResult,
    check: Verification,
    gpus: int,
    lock: Lock | None,
) -> None:
    """What the generation holds and how it verified: the next install compares fingerprints."""
    manifest: dict[str, Any] = {
        "fingerprint": fp,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "provision": __version__,
        "plan": plan.as_dict(),
        "with": options.with_,
        "extras": options.extras,
        "python": py.version,
        "base_python": py.executable,
        "index": result.index,
        "packages": result.packages,
        "verify": {"torch": (check.data.get("torch") or {}),
                   "devices": check.data.get("devices") or []},  # fmt: skip
        "gpus": gpus,
        "locked": bool(lock),
    }
    env.write_manifest(generation, manifest)


def prune_old(env: ManagedEnv, generation: str, previous: str | None, keep_generations: int) -> None:
    """Remove generations beyond the current (and the previous one, when two are kept)."""
    with contextlib.suppress(HostError):
        env.prune(keep=[generation, previous] if keep_generations > 1 else [generation])
