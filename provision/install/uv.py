"""Managed environments built with uv where it is available; pip stays the fallback.

Same plan, same index configuration, same verification and atomic switch as the pip path
(installer.py): only the command that fills the new generation's venv changes. uv downloads in
parallel, installs from its cache by linking, and resolves in Rust; the same torch CPU env from
the same index measured ~0.4x pip's time cold and a few seconds warm (docs/benchmarks.md).

Where the host's uv comes from, first that works:
  1. one already there: ~/.cache/provision/uv/bin/uv (a previous bootstrap or relay), or on PATH;
  2. a bootstrap from the SAME index the install uses: `pip install --target` of the `uv` wheel
     into ~/.cache/provision/uv (the index is near the host; a one-time ~20 MB);
  3. a relay of this controller's own uv binary (the `uv` PyPI package) when the host's OS and
     CPU match this machine's.
Otherwise pip builds the env, as before. `installer="pip"` forces pip, `"uv"` fails when no uv.

uv reads no pip.conf; its own configuration files and UV_* variables on the host are switched
off (UV_NO_CONFIG, the variables unset) for the reason pip's are: a rented host's settings must
not add sources the plan never chose. pip's merging of indexes is kept
(--index-strategy unsafe-best-match), and bytecode is compiled as pip does.
"""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provision.connection.base import Connection
from provision.install.mirrors import IndexConfig, scrub
from provision.install.pip import (
    _SUPERVISOR,
    PipCommand,
    _prelude,
    finish_install_args,
    index_arguments,
    install_command,
)
from provision.shell import argv, path, sh

INSTALLERS = ("auto", "uv", "pip")
HOST_DIR = "~/.cache/provision/uv"
HOST_UV = HOST_DIR + "/bin/uv"
_NO_UV_CONFIG = (
    "for v in $(env | sed -n 's/^\\(UV_[A-Za-z0-9_]*\\)=.*/\\1/p'); do unset \"$v\"; done; "
    "export UV_NO_CONFIG=1 UV_PYTHON_DOWNLOADS=never; "
)
# pip's credential-bearing variables and uv's names for them
_ENV_NAMES = {
    "PIP_INDEX_URL": "UV_INDEX_URL",
    "PIP_EXTRA_INDEX_URL": "UV_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS": "UV_FIND_LINKS",
}


class UvUnavailable(RuntimeError):
    """No uv on the host and none could be bootstrapped or relayed; says why."""


@dataclass
class UvCommand(PipCommand):
    """`uv pip install` into a venv: run under the same supervisor as pip (by the venv's python)."""

    python: str = ""

    def script(self, pid_file: str | None = None) -> str:
        return (
            _NO_UV_CONFIG
            + _prelude(self.network_turbo, pid_file)
            + sh("exec {argv}", argv=self.argv)
        )

    def detached_script(self, log: str, exit_file: str, pid_file: str) -> str:
        sup = argv([self.python, "-c", _SUPERVISOR, log, exit_file, pid_file, *self.argv])
        return (
            _NO_UV_CONFIG
            + _prelude(self.network_turbo, None)
            + sh("nohup {sup} >/dev/null 2>&1 </dev/null & echo $!", sup=sup)
        )


def uv_arguments(index: IndexConfig, env: dict[str, str]) -> list[str]:
    """pip's index options (index_arguments) in uv's spelling; secrets stay in `env`."""
    pip_env: dict[str, str] = {}
    args: list[str] = []
    pip_args = index_arguments(index, pip_env)
    k = 0
    while k < len(pip_args):
        arg = pip_args[k]
        if arg == "--trusted-host":
            args += ["--allow-insecure-host", pip_args[k + 1]]
            k += 2
            continue
        args.append(arg)
        k += 1
    for key, value in pip_env.items():
        env[_ENV_NAMES.get(key, key)] = value
    return args


def install_command_uv(
    uv: str,
    python: str,
    requirements: list[str],
    index: IndexConfig,
    *,
    requirement_files: list[str] = (),  # type: ignore[assignment]
    require_hashes: bool = False,
    cache_dir: str | None = None,
    timeout: float = 30,
    retries: int = 2,
) -> UvCommand:
    """`uv pip install --python VENV_PYTHON ...`: what install_command does with pip."""
    env: dict[str, str] = {
        "UV_HTTP_TIMEOUT": f"{max(1, int(timeout))}",
        "UV_HTTP_RETRIES": str(max(0, retries)),
    }
    args = [
        uv,
        "pip",
        "install",
        "--python",
        python,
        "--index-strategy",
        "unsafe-best-match",  # pip's rule: the best version from every index
        "--compile-bytecode",  # as pip: the first import must not compile torch's 2,000 files
        "--no-progress",
    ]
    args += uv_arguments(index, env)
    if cache_dir:
        args += ["--cache-dir", cache_dir.rstrip("/") + "/uv"]
    if require_hashes:
        args.append("--require-hashes")
    secrets, display = finish_install_args(args, requirements, requirement_files, index, env, "UV_INDEX_URL")
    return UvCommand(
        argv=args,
        env=env,
        display=display,
        secrets=secrets,
        network_turbo=index.network_turbo,
        python=python,
    )


# -- getting uv onto the host -------------------------------------------------------------------
def _works(connection: Connection, uv: Any) -> str | None:
    result = connection.run(sh("{uv} --version", uv=uv), timeout=60)
    if result.ok and result.stdout.strip().startswith("uv "):
        return result.stdout.strip().splitlines()[-1]
    return None


def find_host_uv(connection: Connection) -> str | None:
    """The host's uv: ours under ~/.cache/provision/uv, else one on PATH; None if neither."""
    probe = connection.run(
        sh("if [ -x {ours} ]; then echo {ours}; else command -v uv || true; fi", ours=path(HOST_UV)),
        timeout=60,
    )
    found = (probe.stdout.strip().splitlines() or [""])[-1]
    if not found:
        return None
    return found if _works(connection, found) else None


def host_home(connection: Connection) -> str:
    result = connection.run('printf "%s\\n" "$HOME"', timeout=60)
    home = (result.stdout.strip().splitlines() or [""])[-1]
    if not result.ok or not home.startswith("/"):
        raise UvUnavailable("could not read $HOME on the host")
    return home


def bootstrap_uv(
    connection: Connection, python: str, index: IndexConfig, cache_dir: str | None
) -> str:
    """`pip install --target ~/.cache/provision/uv uv` from the install's own index, with the
    new env's pip (the base interpreter may have none). Returns the uv path; raises
    UvUnavailable with pip's last line."""
    final = host_home(connection) + HOST_DIR[1:]
    target = final + ".tmp"
    pip = install_command(python, ["uv"], index, cache_dir=cache_dir, timeout=30, retries=1)
    pip.argv[4:4] = ["--target", target, "--no-deps", "--only-binary", ":all:"]
    result = connection.run(sh("rm -rf {tmp} && ", tmp=target) + pip.script(), stdin=pip.stdin, timeout=600)
    if not result.ok:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["?"]
        raise UvUnavailable(
            f"pip install uv from {index.describe()} failed: {scrub(last[0], pip.secrets)}"
        )
    uv = final + "/bin/uv"
    move = connection.run(
        sh("rm -rf {final} && mv {tmp} {final} && test -x {uv}", final=final, tmp=target, uv=uv),
        timeout=60,
    )
    if not move.ok or not _works(connection, uv):
        raise UvUnavailable(f"uv was installed into {final} but does not run there")
    return uv


def controller_uv() -> str | None:
    """This machine's uv binary (the `uv` PyPI package, or one on PATH)."""
    try:
        import uv as uv_package  # type: ignore[import-not-found]

        found = uv_package.find_uv_bin()
        if found and os.path.isfile(found):
            return found
    except Exception:
        pass
    return shutil.which("uv")


def relay_uv(connection: Connection, facts: dict[str, Any]) -> str:
    """Copy this machine's uv to the host when both are Linux on the same CPU architecture."""
    local = controller_uv()
    if local is None:
        raise UvUnavailable("this machine has no uv to relay (pip install uv)")
    os_facts = facts.get("os") or {}
    host_arch = str(os_facts.get("arch") or os_facts.get("machine") or "")
    here = platform.machine()
    if (os_facts.get("system") or "Linux") != "Linux" or (host_arch and host_arch != here):
        raise UvUnavailable(f"the host is {host_arch or '?'}, this machine's uv is for {here}")
    with open(local, "rb") as fh:
        data = fh.read()
    uv = host_home(connection) + HOST_UV[1:]
    connection.run(sh("mkdir -p {d}", d=os.path.dirname(uv)), timeout=60)
    connection.put(data, uv, mode=0o755)
    if not _works(connection, uv):
        raise UvUnavailable("the relayed uv does not run on the host")
    return uv


def obtain_uv(
    connection: Connection,
    python: str,
    index: IndexConfig,
    facts: dict[str, Any],
    cache_dir: str | None,
    say: Callable[[str], None],
) -> tuple[str, str]:
    """(uv path on the host, how it got there: found | bootstrapped | relayed)."""
    found = find_host_uv(connection)
    if found:
        return found, "found"
    reasons = []
    if not index.no_index:
        say("bootstrapping uv from the index")
        try:
            return bootstrap_uv(connection, python, index, cache_dir), "bootstrapped"
        except UvUnavailable as exc:
            reasons.append(str(exc))
    say("relaying this machine's uv")
    try:
        return relay_uv(connection, facts), "relayed"
    except (UvUnavailable, OSError) as exc:
        reasons.append(str(exc))
    raise UvUnavailable("; ".join(reasons))


_LIST = (
    "import importlib.metadata as m, json; "
    "print(json.dumps(dict((d.metadata['Name'], d.version) for d in m.distributions())))"
)


def installed_packages(
    connection: Connection, python: str, since: dict[str, str] | None = None
) -> dict[str, str]:
    """name -> version of the env's distributions, named as in their metadata (as pip's
    --report names them); with `since` (a listing before the install), only what the install
    added or changed: what pip's report gives the pip path."""
    import json

    result = connection.run(sh("{python} -c {code}", python=python, code=_LIST), timeout=120)
    try:
        found = json.loads((result.stdout.strip().splitlines() or ["{}"])[-1])
    except ValueError:
        return {}
    if since is None:
        return found
    return {name: v for name, v in found.items() if since.get(name) != v}


def choose(
    connection: Connection,
    options: Any,
    facts: dict[str, Any],
    python: str,
    index: IndexConfig,
    cache_dir: str | None,
    say: Callable[[str], None],
    result: Any,
) -> str | None:
    """The uv to build with, or None for pip: per `options.installer` (auto | uv | pip).
    auto falls back to pip with a warning in `result`; uv raises InstallError's cause."""
    mode = getattr(options, "installer", "auto") or "auto"
    if mode == "pip":
        return None
    try:
        uv, how = obtain_uv(connection, python, index, facts, cache_dir, say)
    except UvUnavailable as exc:
        if mode == "uv":
            from provision.errors import HostError

            raise HostError(
                connection.host.name,
                f"--installer uv: no uv on the host ({exc}); use --installer pip or auto",
            ) from None
        result.warnings.append(f"uv unavailable ({exc}): pip builds the environment")
        return None
    result.installer = {"tool": "uv", "path": uv, "how": how}
    return uv
