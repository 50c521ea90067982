"""Keeping a torch the host already has (`provision up`, `keep_base`): which interpreters to
consider, and the few small packages a kept interpreter may lack.

Rental images ship torch preinstalled — AutoDL in /root/miniconda3, others in the system
Python — and replacing a working CUDA torch is a multi-GB download for nothing. So before a
managed env is built, `up` looks at python3, then the active conda env, then conda's base (the
facts list each env's torch from its metadata, so only envs that have one are tried); the first
whose torch verifies and fits the request is kept.
"""

from __future__ import annotations

import json
from typing import Any

from provision.connection.base import Connection
from provision.install.mirrors import IndexOptions, build_index_config
from provision.install.pip import install_command, relevant_lines
from provision.shell import sh

# Runs on the host's Python: which of these distributions are not installed there.
MISSING_DISTS = (
    "import importlib.metadata as m, json, sys\n"
    "missing = []\n"
    "for name in sys.argv[1:]:\n"
    "    try: m.version(name.split('=')[0].split('<')[0].split('>')[0].split('[')[0].strip())\n"
    "    except m.PackageNotFoundError: missing.append(name)\n"
    "print(json.dumps(missing))\n"
)


def conda_pythons(facts: dict[str, Any]) -> list[str]:
    """Interpreters of the conda envs that hold a torch: the active env first, then base."""
    conda = ((facts.get("python") or {}).get("conda")) or {}
    envs = [e for e in conda.get("envs") or [] if e.get("executable") and e.get("torch")]
    envs.sort(key=lambda e: (not e.get("active"), e.get("name") != "base"))
    return [str(e["executable"]) for e in envs]


def missing_packages(connection: Connection, python: str, packages: list[str]) -> list[str] | None:
    """The requirements of `packages` that `python` lacks (None: it could not tell)."""
    if not packages:
        return []
    probe = connection.run(
        sh("{py} -c {code} {names}", py=python, code=MISSING_DISTS, names=list(packages)),
        timeout=60,
    )
    try:
        return [str(p) for p in json.loads(probe.stdout.strip().splitlines()[-1])]
    except (ValueError, IndexError):
        return None


def add_packages(
    connection: Connection,
    python: str,
    packages: list[str],
    torch_version: str,
    index: IndexOptions,
    timeout: float,
    deadline: float,
) -> tuple[bool, list[str]]:
    """pip-install the missing small packages into the kept interpreter, its torch pinned so that
    pip can't replace it. (ok, pip's relevant lines). A Python pip may not change (Debian's
    externally managed one) fails here, and the caller builds a managed env instead."""
    cfg = build_index_config(index, plan_index_url=None, variant="cpu",
                             reachable_torch_index=None, fallback_to_pypi=not index.index_url)  # fmt: skip
    cmd = install_command(python, [*packages, f"torch=={torch_version}"], cfg,
                          timeout=timeout, retries=1)  # fmt: skip
    run = connection.run(cmd.script(), stdin=cmd.stdin, timeout=deadline)
    return run.ok, relevant_lines(run.stdout + "\n" + run.stderr, cmd.secrets)
