"""Managed environments built with uv where it is available; pip stays the fallback.

Same plan, same index configuration, same verification and atomic switch as the pip path
(installer.py): only the command that fills the new generation's venv changes. uv downloads in
parallel, installs from its cache by linking, and resolves in Rust; the same torch CPU env from
the same index measured 0.36x plain pip's time cold (docs/benchmarks.md, "install").

Where the host's uv comes from, first that works:
  1. one already there: ~/.cache/provision/uv/bin/uv (a previous bootstrap or relay), or on PATH;
  2. a bootstrap from the SAME index the install uses: `pip install --target` of the `uv` wheel
     into ~/.cache/provision/uv (the index is near the host; a one-time ~20 MB);
  3. a relay of this controller's own uv binary (the `uv` PyPI package, a dependency of
     provision) when the host's OS, CPU and C library match this machine's, else of the uv wheel
     for the host's platform that this machine downloads once and caches (uv_binary.py).
Otherwise pip builds the env, as before. `installer="pip"` forces pip, `"uv"` fails when no uv.

uv reads no pip.conf; its own configuration files and UV_* variables on the host are switched
off (UV_NO_CONFIG, the variables unset) for the reason pip's are: a rented host's settings must
not add sources the plan never chose. pip's merging of indexes is kept
(--index-strategy unsafe-best-match).

Speed (issue 14, docs/install.md "uv or pip"): the venv by `uv venv` seeded with the base
Python's bundled pip (create_venv; no ensurepip run), files hard-linked from a uv cache on the
env's filesystem (cache_dir_for), no --compile-bytecode (the verification's import compiles what
torch imports); a rebuild identical to a verified generation is checked by reuse.py.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provision.connection.base import Connection
from provision.errors import HostError
from provision.install.index_query import serves_project
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
    uv_cache: str | None = None,
    compile_bytecode: bool = False,
) -> UvCommand:
    """`uv pip install --python VENV_PYTHON ...`: what install_command does with pip. `uv_cache`
    is uv's cache dir as is; else `cache_dir` (pip's) + /uv."""
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
        "--link-mode",
        "hardlink",  # files shared with uv's cache (on the env's filesystem: see cache_dir_for)
        "--no-progress",
    ]
    if compile_bytecode:  # off by default: the verification's import compiles what torch imports
        args.append("--compile-bytecode")
    args += uv_arguments(index, env)
    if uv_cache:
        args += ["--cache-dir", uv_cache]
    elif cache_dir:
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


def uv_to_relay(facts: dict[str, Any]) -> str:
    """This machine's uv when the host is Linux on the same CPU and C library; else the uv wheel
    for the host's platform, downloaded once and cached (install/uv_binary.py)."""
    from provision.install.uv_binary import (  # looked up at call time: tests replace uv_binary.uv_for_platform (the download)
        UvBinaryUnavailable,
        host_platform,
        uv_for_platform,
    )

    try:
        arch, libc = host_platform(facts.get("os") or {})
    except UvBinaryUnavailable as exc:
        raise UvUnavailable(str(exc)) from None
    local = controller_uv()
    if local is None:  # a controller without the uv package has no version to fetch either
        raise UvUnavailable("this machine has no uv to relay (pip install uv)")
    here = platform.machine().lower()
    here_libc = "musl" if "musl" in (platform.libc_ver()[0] or "").lower() else "glibc"
    if sys.platform.startswith("linux") and (
        {here, arch} <= {"x86_64", "amd64"} or {here, arch} <= {"aarch64", "arm64"}
    ) and here_libc == libc:
        return local
    try:
        return str(uv_for_platform(arch, libc))
    except UvBinaryUnavailable as exc:
        raise UvUnavailable(f"this machine's uv is for {sys.platform}-{here}: {exc}") from None


def relay_uv(connection: Connection, facts: dict[str, Any]) -> str:
    """Copy a uv for the host's platform (this machine's own, or one fetched for it) to the host."""
    with open(uv_to_relay(facts), "rb") as fh:
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


# -- the venv ----------------------------------------------------------------------------------
# Run by the BASE interpreter (host Python 3.8+, stdlib): print the wheels `python -m venv` would
# seed (ensurepip's bundled pip, and setuptools before 3.12; Debian keeps them in
# /usr/share/python-wheels), then exec `uv venv` + `uv pip install` of those local files. One
# round trip, no index, no ensurepip subprocess: users' `pip install` in the env keeps working,
# with the same pip a pip-built env has.
_SEED = r"""
import glob, os, subprocess, sys
uv, gen, cache = sys.argv[1:4]
names = ["pip"] + (["setuptools"] if sys.version_info < (3, 12) else [])
import sysconfig
dirs = [sysconfig.get_config_var("WHEEL_PKG_DIR") or ""]  # ensurepip's own order (3.11+)
try:
    import ensurepip
    dirs.append(os.path.join(os.path.dirname(ensurepip.__file__), "_bundled"))
except ImportError:
    pass
dirs = [d for d in dirs + ["/usr/share/python-wheels"] if d]
def key(p):
    v = os.path.basename(p).split("-")[1]
    return [int(x) if x.isdigit() else 0 for x in v.split(".")]
wheels = []
for d in dirs:  # the first folder with a pip wheel, as ensurepip itself picks one
    found = [sorted(glob.glob(os.path.join(d, n + "-*.whl")), key=key) for n in names]
    if found[0]:
        wheels = [f[-1] for f in found if f]
        break
if not wheels:
    sys.stderr.write("no bundled pip wheel next to %s (python -m venv makes this env)\n" % sys.executable)
    sys.exit(3)
for w in wheels:
    print("seed=" + os.path.basename(w))
sys.stdout.flush()
code = subprocess.call([uv, "venv", "--quiet", "--no-project", "--python", sys.executable, gen])
if code:
    sys.exit(code)
code = subprocess.call([uv, "pip", "install", "--quiet", "--python", gen + "/bin/python", "--no-index",
                        "--no-deps", "--link-mode", "hardlink", "--cache-dir", cache] + wheels)
# installed from a file, pip would freeze as `pip @ file:///usr/share/python-wheels/...`; ensurepip
# records no origin, so an env uv made freezes (and locks) as one `python -m venv` made does
for n in names:
    for record in glob.glob(os.path.join(gen, "lib", "python*", "site-packages", n + "-*.dist-info", "direct_url.json")):
        os.unlink(record)
sys.exit(code)
"""


def create_venv(
    connection: Connection, uv: str, base_python: str, generation: str, uv_cache: str
) -> dict[str, str]:
    """The new generation's venv by `uv venv` (no ensurepip run: ~40 s under load before),
    seeded with the base Python's bundled pip (and setuptools) from local files. Returns the
    seeded name -> version (what the env held before the install: installed_packages' `since`).
    Raises UvUnavailable with uv's words when uv cannot make it (the caller uses `python -m venv`)."""
    parent = generation.rpartition("/")[0] or "/"
    script = (
        _NO_UV_CONFIG
        + sh("mkdir -p {parent} && exec {py} -c {code} {uv} {gen} {cache}", parent=parent,
             py=base_python, code=_SEED, uv=uv, gen=generation, cache=uv_cache)  # fmt: skip
    )
    result = connection.run(script, timeout=600)
    if not result.ok:
        detail = (result.stderr.strip() or result.stdout.strip() or f"exit {result.exit_code}")
        connection.run(sh("rm -rf -- {gen}", gen=generation), timeout=120)
        raise UvUnavailable(f"uv venv from {base_python} failed: {detail.splitlines()[-1][:300]}")
    seeded = {}
    for line in result.stdout.splitlines():
        if line.startswith("seed="):
            name, _, rest = line[5:].partition("-")
            seeded[name] = rest.partition("-")[0]
    return seeded


def cache_dir_for(pip_cache: str | None, explicit: bool, gens: str) -> str:
    """uv's cache: beside the generations (same filesystem, so `--link-mode hardlink` links and
    an env costs no space beyond the cache's copy) unless a cache was named (--pip-cache):
    then <it>/uv, as before; uv copies where that is another filesystem."""
    if explicit and pip_cache:
        return pip_cache.rstrip("/") + "/uv"
    return gens.rstrip("/") + "/.uv-cache"


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
    found: str | None = None,
    how: str = "found",
) -> str | None:
    """The uv to build with, or None for pip: per `options.installer` (auto | uv | pip).
    auto falls back to pip with a warning in `result`; uv raises InstallError's cause.
    `found`: a uv already located on the host (find_host_uv), not looked for again."""
    mode = getattr(options, "installer", "auto") or "auto"
    if mode == "pip":
        return None
    try:
        if found:
            uv = found
        else:
            uv, how = obtain_uv(connection, python, index, facts, cache_dir, say)
    except UvUnavailable as exc:
        if mode == "uv":
            raise HostError(
                connection.host.name,
                f"--installer uv: no uv on the host ({exc}); use --installer pip or auto",
            ) from None
        result.warnings.append(f"uv unavailable ({exc}): pip builds the environment")
        return None
    result.installer = {"tool": "uv", "path": uv, "how": how}
    return uv


def _index_lacks_uv(connection: Connection, python: str, index: IndexConfig, options: Any) -> bool:
    """True only when every index of the install answered and none lists a uv wheel."""
    opts = getattr(options, "index", None)
    if opts is None:
        return False
    return serves_project(connection, python, index, opts, "uv") is False


def create_with_uv(
    connection: Connection, options: Any, base_python: str, generation: str, uv_cache: str,
    warnings: list[str], index: IndexConfig | None = None, pip_cache: str | None = None,
    say: Callable[[str], None] = lambda m: None, facts: dict[str, Any] | None = None,
) -> tuple[str | None, str, dict[str, str] | None]:
    """(uv on the host or None, how it got there, the seeded packages when uv made the venv,
    else None: then the caller runs `python -m venv`). With no uv on the host yet, a base
    Python that has pip (conda, pyenv, python:3.x images; not Debian's) bootstraps it first
    from `index`; otherwise the first install's venv pip does that later (choose). An index
    that answers without any uv wheel: this machine's uv is relayed first (`facts`: the host's,
    for its platform)."""
    if (getattr(options, "installer", "auto") or "auto") == "pip":
        return None, "", None
    found, how = find_host_uv(connection), "found"
    if not found and index is not None and not index.no_index:
        if facts is not None and _index_lacks_uv(connection, base_python, index, options):
            # nothing to bootstrap from: relay now, so uv makes the venv too (`python -m venv`
            # with ensurepip, then a pip install that must fail first, cost seconds)
            say("the index has no uv: relaying this machine's uv")
            try:
                found, how = relay_uv(connection, facts), "relayed"
            except (UvUnavailable, OSError) as exc:
                warnings.append(f"uv could not be relayed ({exc})")
                return None, "", None
        else:
            has_pip = connection.run(sh("{py} -m pip --version", py=base_python), timeout=60)
            if has_pip.ok:
                say("bootstrapping uv from the index")
                try:
                    found, how = bootstrap_uv(connection, base_python, index, pip_cache), "bootstrapped"
                except UvUnavailable as exc:
                    warnings.append(f"uv could not be bootstrapped with {base_python}'s pip ({exc})")
    if not found:
        return None, "", None
    try:
        return found, how, create_venv(connection, found, base_python, generation, uv_cache)
    except UvUnavailable as exc:
        warnings.append(f"{exc}: made with python -m venv")
        return found, how, None
