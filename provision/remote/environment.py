"""The managed Python environment on a host: where it lives, how it is replaced safely, and which
Python runs host-side work that needs torch (`managed_python`: the managed env when there is one).
Here in remote/, below install/ and the commands that only look for the env (bench, compat,
facts), so finding it never loads the install stack.

Layout (for the default `~/.provision/envs/provision`):

    ~/.provision/envs/provision -> .provision.gens/20250101T120000-a1b2c3   (a symlink)
    ~/.provision/envs/.provision.gens/
        20250101T120000-a1b2c3/    a complete venv: bin/python, provision-env.json (manifest)
        20250102T090000-d4e5f6/    the previous one, kept for rollback
        .lock/                     held while an install runs (mkdir is atomic)

An install builds a NEW generation beside the others, installs and verifies it, and only then
renames a fresh symlink over the stable path (`mv -T`, one rename(2): a reader sees the old env or
the new one, never half of either). Until that rename the stable path — the env users activate and
scripts run — is untouched, so any failure (index down, wheel missing, verification failed,
Ctrl-C, a dropped connection) leaves it exactly as it was; the half-built generation is removed.
A venv is not relocatable (its scripts carry absolute paths), which is why generations never move
and only the symlink changes.

Where it lives, and why: `~/.provision/envs/<name>` on the system disk by default. On AutoDL the
system disk is kept on shutdown, saved into custom images and migrated with the instance, while
the data SSD (/root/autodl-tmp) is not saved into images nor migrated — an env there would vanish
from a saved image and leave a dangling interpreter path in every script. The SSD's speed does not
matter for an env (imported once per process). On RunPod-style hosts, where everything outside the
volume (/workspace) is lost on stop, the env goes under the volume instead. `--env PATH` overrides.
The pip cache goes to the data dir when there is a local one (AutoDL's docs advise caches there;
the system disk is small).
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from provision.connection.base import Connection
from provision.errors import ConfigError, HostError
from provision.remote.become import wanted_by_host
from provision.shell import path as shell_path
from provision.shell import quote, sh

MANIFEST = "provision-env.json"
_MANIFEST_MARK = "manifest-follows:"  # in state(): everything after it is the manifest, as stored
DEFAULT_NAME = "provision"
# Where envs go when installed as root (become): root-owned, readable by the login user, found
# by later commands with or without become. The host var `provision_env_root` overrides it.
SYSTEM_ENV_ROOT = "/opt/provision/envs"
ENV_ROOT_VAR = "provision_env_root"
PIP_PID_FILE = ".provision-pip.pid"
STALE_LOCK_MINUTES = 360
_GEN_NAME = re.compile(r"^\d{8}T\d{6}-[0-9a-f]{6}$")


class EnvironmentError_(HostError):
    """Creating, switching or removing a managed environment failed on the host."""


def default_env_path(
    facts: dict[str, Any],
    name: str = DEFAULT_NAME,
    *,
    system: bool = False,
    root: str | None = None,
) -> str:
    """Where the managed env lives when the user does not say (see the module docstring).
    `system`: installing as root (become): the system location, owned by root and readable by
    every user, instead of the login user's home. `root`: the host var `provision_env_root`,
    which overrides both."""
    if root:
        return f"{str(root).rstrip('/') or '/'}/{name}".replace("//", "/")
    provider = str(((facts.get("os") or {}).get("provider") or {}).get("name") or "").lower()
    data_dir = facts.get("data_dir") or {}
    if provider == "runpod" or data_dir.get("path") == "/workspace":
        return f"/workspace/.provision/envs/{name}"
    if system:
        return f"{SYSTEM_ENV_ROOT}/{name}"
    return f"~/.provision/envs/{name}"


def env_root_of(host_vars: dict[str, Any] | None) -> str | None:
    """The inventory's `provision_env_root` for a host, checked (None when not set)."""
    value = (host_vars or {}).get(ENV_ROOT_VAR)
    if value in (None, ""):
        return None
    text = str(value)
    if not (text.startswith("/") or text == "~" or text.startswith("~/")):
        raise ConfigError(
            f"{ENV_ROOT_VAR}={text!r}: give an absolute path or one under ~/ (e.g. /opt/provision/envs)"
        )
    return text


def env_candidates(facts: dict[str, Any], host_vars: dict[str, Any] | None, become: bool) -> list[str]:
    """Where a managed env installed with the defaults may be, in the order to use it: the one
    this mode installs to first (become: the system location), then the other. So `check`,
    `bench`, `train` and `health` run as the login user find an env `install --become` put
    under the system location, and the other way round."""
    root = env_root_of(host_vars)
    if root:
        return [default_env_path(facts, root=root)]
    user, system = default_env_path(facts), default_env_path(facts, system=True)
    ordered = [system, user] if become else [user, system]
    return list(dict.fromkeys(ordered))


def find_env(connection: Connection, candidates: list[str]) -> str | None:
    """The first candidate that holds an env with a python (one round trip), as the host
    spells it (`~/` expanded by the login user's shell), or None."""
    script = " ".join(
        str(sh("if [ -x {p}/bin/python ]; then printf '%s\\n' {p}; exit 0; fi;", p=shell_path(c)))
        for c in candidates
    ) + " exit 0"
    result = connection.run(script, timeout=30)
    found = [line for line in result.stdout.splitlines() if line.startswith("/")]
    return found[0] if found else None


def default_pip_cache(facts: dict[str, Any]) -> str | None:
    data_dir = facts.get("data_dir") or {}
    if data_dir.get("path") and not data_dir.get("network"):
        return data_dir["path"].rstrip("/") + "/.cache/pip"
    return None


def _q(path: str) -> str:
    return quote(path)


def home_of(connection: Connection) -> str:
    """$HOME of whoever runs `connection`'s commands (root's under become)."""
    result = connection.run('printf %s "$HOME"', timeout=30)
    if not result.ok or not result.stdout.startswith("/"):
        raise EnvironmentError_(connection.host.name, f"cannot read $HOME: {result.stderr.strip()}")
    return result.stdout.strip()


@dataclass
class EnvState:
    """What is at the stable path now."""

    path: str  # absolute
    exists: bool = False
    managed: bool = False  # a symlink into our generations dir
    target: str | None = None  # the generation it points to
    has_python: bool = False
    manifest: dict[str, Any] | None = None
    generations: list[str] = field(default_factory=list)
    lock_holder: str | None = None


class ManagedEnv:
    """One managed environment on one host, driven over its Connection."""

    def __init__(self, connection: Connection, path: str, home: str | None = None) -> None:
        self.connection = connection
        self.home = home or self._home()
        self.path = self._absolute(path)
        parent, _, base = self.path.rpartition("/")
        if not base or base in (".", ".."):
            raise ConfigError(
                f"--env {path!r}: needs a directory name (e.g. ~/.provision/envs/myenv)"
            )
        self.parent = parent or "/"
        self.gens = f"{self.parent.rstrip('/')}/.{base}.gens"
        self.lock_dir = f"{self.gens}/.lock"

    @property
    def host(self) -> str:
        return self.connection.host.name

    def _home(self) -> str:
        return home_of(self.connection)

    def _absolute(self, path: str) -> str:
        if path == "~" or path.startswith("~/"):
            path = self.home.rstrip("/") + path[1:]
        if not path.startswith("/"):
            raise ConfigError(
                f"--env {path!r}: give an absolute path or one under ~/ (the host's home)"
            )
        return path.rstrip("/") or "/"

    def python_of(self, generation_or_path: str) -> str:
        return f"{generation_or_path}/bin/python"

    @property
    def python(self) -> str:
        return self.python_of(self.path)

    def _run(self, command: str, what: str, timeout: float | None = 600) -> str:
        result = self.connection.run(command, timeout=timeout)
        if not result.ok:
            detail = (
                result.stderr.strip() or result.stdout.strip() or f"exit code {result.exit_code}"
            )
            raise EnvironmentError_(self.host, f"{what} failed: {detail[-1500:]}")
        return result.stdout

    # -- reading -------------------------------------------------------------------------------
    def state(self) -> EnvState:
        """One round trip: link target, python present, manifest, generations, lock."""
        p, g = _q(self.path), _q(self.gens)
        script = (
            f"if [ -L {p} ]; then echo link=$(readlink {p}); fi; "
            f"if [ -e {p} ]; then echo exists=1; fi; "
            f"if [ -x {p}/bin/python ]; then echo python=1; fi; "
            f'if [ -d {g} ]; then for d in {g}/*; do [ -d "$d" ] && echo gen="$d"; done; fi; '
            f"if [ -d {g}/.lock ]; then echo lock=$(cat {g}/.lock/owner 2>/dev/null | tr -d '\\n'); fi; "
            # last, byte-exact: `echo $(cat …)` under dash rewrote `\\n` and `\\\\` inside JSON
            # strings, so such an env never matched and was rebuilt on every `up`
            f"if [ -r {p}/{MANIFEST} ]; then printf '%s' {_MANIFEST_MARK}; cat {p}/{MANIFEST}; fi"
        )
        out = self._run(script, "reading the environment", timeout=60)
        st = EnvState(path=self.path)
        out, found, manifest = out.partition(_MANIFEST_MARK)
        if found:
            try:
                st.manifest = json.loads(manifest)
            except ValueError:
                st.manifest = None
        for line in out.splitlines():
            key, _, value = line.partition("=")
            if key == "link":
                target = value if value.startswith("/") else f"{self.parent}/{value}"
                st.target = target
                st.managed = target.startswith(self.gens + "/")
            elif key == "exists":
                st.exists = True
            elif key == "python":
                st.has_python = True
            elif key == "gen":
                if _GEN_NAME.match(value.rpartition("/")[2]):
                    st.generations.append(value)
            elif key == "lock":
                st.lock_holder = value or "unknown"
        st.generations.sort()
        return st

    def free_bytes(self) -> int | None:
        """Free space where generations are built (df of the nearest existing parent)."""
        script = (
            f'd={_q(self.parent)}; while [ ! -d "$d" ]; do d=$(dirname "$d"); done; '
            "df -Pk \"$d\" | awk 'NR==2 {print $4}'"
        )
        result = self.connection.run(script, timeout=30)
        try:
            return int(result.stdout.strip()) * 1024
        except ValueError:
            return None

    # -- the lock ------------------------------------------------------------------------------
    def acquire(self, owner: str) -> None:
        """One install per environment at a time (two would race for the switch)."""
        g, lock = _q(self.gens), _q(self.lock_dir)
        # A lock older than STALE_LOCK_MINUTES is from an install whose controller vanished (a
        # dropped connection leaves it behind); it is taken over.
        script = (
            f'mkdir -p {g} && {{ [ -z "$(find {lock} -maxdepth 0 -mmin +{STALE_LOCK_MINUTES} 2>/dev/null)" ] '
            f"|| rm -rf -- {lock}; }} && mkdir {lock} 2>/dev/null && printf '%s\\n' {_q(owner)} > {lock}/owner"
        )
        result = self.connection.run(script, timeout=60)
        if not result.ok:
            holder = self.connection.run(f"cat {lock}/owner 2>/dev/null", timeout=30).stdout.strip()
            raise EnvironmentError_(
                self.host,
                f"another install into {self.path} is running ({holder or 'owner unknown'}); if none is, "
                f"remove the stale lock: rm -r {self.lock_dir}",
            )

    def release(self) -> None:
        self.connection.run(f"rm -rf -- {_q(self.lock_dir)}", timeout=60)

    # -- generations ---------------------------------------------------------------------------
    def new_generation_path(self) -> str:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        return f"{self.gens}/{stamp}-{secrets.token_hex(3)}"

    def create_venv(self, base_python: str, generation: str) -> None:
        """`python -m venv` (never --system-site-packages: the env must not see, or be broken
        by, whatever the image has in its system site-packages)."""
        py = _q(base_python)
        script = f"mkdir -p {_q(self.gens)} && {py} -m venv {_q(generation)}"
        result = self.connection.run(script, timeout=600)
        if not result.ok:
            detail = (result.stderr.strip() or result.stdout.strip())[-800:]
            hint = ""
            if "ensurepip" in detail or "venv" in detail and "No module" in detail:
                hint = (
                    " — this Python has no venv/ensurepip module; on Debian/Ubuntu: "
                    "apt-get install -y python3-venv (or python3.X-venv for that version)"
                )
            raise EnvironmentError_(self.host, f"{base_python} -m venv failed: {detail}{hint}")

    def write_manifest(self, generation: str, manifest: dict[str, Any]) -> None:
        data = json.dumps(manifest, sort_keys=True).encode() + b"\n"
        self.connection.put(data, f"{generation}/{MANIFEST}", mode=0o644)

    def switch(self, generation: str) -> str | None:
        """Point the stable path at `generation` with one atomic rename. Returns the previous
        generation (or None)."""
        before = self.state()
        if before.exists and not before.managed:
            raise EnvironmentError_(self.host, self.unmanaged_message())
        tmp = f"{self.path}.provision-new-{secrets.token_hex(3)}"
        script = (
            f"mkdir -p {_q(self.parent)} && ln -s {_q(generation)} {_q(tmp)} && "
            f"mv -T -f {_q(tmp)} {_q(self.path)} || {{ rm -f {_q(tmp)}; exit 1; }}"
        )
        self._run(script, f"switching {self.path} to the new environment", timeout=60)
        return before.target

    def unmanaged_message(self) -> str:
        return (
            f"{self.path} exists and is not an environment provision manages (not a symlink into "
            f"{self.gens}); it is left alone. Use another --env, or move it away first."
        )

    def discard(self, generation: str) -> None:
        """Remove a half-built generation; stop its pip first if it still runs (Ctrl-C, lost
        connection). Only paths inside our generations dir are ever removed."""
        if not generation.startswith(self.gens + "/") or not _GEN_NAME.match(
            generation.rpartition("/")[2]
        ):
            raise ValueError(f"refusing to remove {generation!r}: not a generation of {self.path}")
        g = _q(generation)
        pid_file = _q(f"{generation}/{PIP_PID_FILE}")
        # TERM the pip supervisor (it stops pip and exits), wait up to 10 s, then KILL; only a
        # process whose command line names this generation is ever signalled (pid reuse).
        script = (
            f"if [ -r {pid_file} ]; then pid=$(cat {pid_file}); "
            f'if [ -n "$pid" ] && tr "\\0" " " < /proc/$pid/cmdline 2>/dev/null | grep -qF {g}; then '
            f'kill "$pid" 2>/dev/null; i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do '
            f'sleep 0.1; i=$((i+1)); done; kill -9 "$pid" 2>/dev/null; fi; fi; '
            f"rm -rf -- {g}"
        )
        self.connection.run(script, timeout=300)

    def prune(self, keep: list[str | None]) -> list[str]:
        """Remove generations other than `keep` (current and previous). Returns those removed."""
        st = self.state()
        keep_set = {k for k in keep if k}
        if st.target:
            keep_set.add(st.target)
        doomed = [g for g in st.generations if g not in keep_set]
        for g in doomed:
            self.discard(g)
        return doomed


def managed_python(connection: Connection, facts: dict[str, Any], env: str | None = None) -> str | None:
    """The managed environment's python on the host, or None when none is installed there.
    With no `env`: the default places (the login user's, the system location `install --become`
    uses, or the host var `provision_env_root`: env_candidates above), so an env
    installed as root is found by commands run without become, and the other way round."""
    if env:
        state = ManagedEnv(connection, env).state()
        return f"{state.path}/bin/python" if state.has_python else None
    found = find_env(connection, env_candidates(facts, connection.host.vars, wanted_by_host(connection)))
    return f"{found}/bin/python" if found else None
