"""Controller side of the bridge: find the Python Ansible is installed in, have it build a module's
AnsiballZ payload (once per module and Ansible install: cached in memory and on disk), and fill in
a call's arguments.

The builder, gpl/build_payload.py, is GPL-3.0 like the ansible-core it imports; it is executed as
its own process and spoken to in JSON, never imported: the process boundary keeps provision
(Apache-2.0) and Ansible apart. The payload it returns has no arguments in it, only a marker where
they go, so it can be cached and shared; the arguments are put in here, in memory, and travel to
the host inside the payload on ssh's stdin (never argv, never a file on the host).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.paths import state_dir

log = logging.getLogger(__name__)
BUILDER = Path(__file__).parent / "gpl" / "build_payload.py"
PARAMS_MARKER = "__PROVISION_ANSIBLE_PARAMS__"  # same text as in gpl/build_payload.py
INSTALL_CORE = "python3 -m pip install ansible-core"
BUILD_TIMEOUT = 120.0  # importing ansible and walking a module's imports: seconds, not minutes
_CACHE_FORMAT = 2  # 2: script modules (style)
_lock = threading.Lock()
_python: dict[str, str | None] = {}
_built: dict[tuple[str, str, str, tuple[str, ...]], Built | BridgeError] = {}


class BridgeError(Exception):
    """Ansible's module cannot be used: `kind` is no_ansible, not_found, unsupported or broken."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class Built:
    """One module's payload, without arguments."""

    fqcn: str
    ansible_version: str
    module_path: str
    template: str  # the AnsiballZ wrapper; PARAMS_MARKER stands where the arguments go
    # "new": template is that wrapper; "old" / "non_native_want_json": a script module Ansible
    # runs as it is (its arguments in a file, key=value or JSON), template is the script
    style: str = "new"

    def with_args(self, args: dict[str, Any]) -> bytes:
        """The program to run on the host: the wrapper with `args` in it (a Python str literal)."""
        params = json.dumps({"ANSIBLE_MODULE_ARGS": args}, default=str)
        return self.template.replace(f"params={PARAMS_MARKER},", f"params={params!r},", 1).encode()


def collection_install_hint(name: str) -> str:
    """`ansible-galaxy collection install ns.coll` for a collection module's FQCN, else ''."""
    parts = name.split(".")
    if len(parts) >= 3 and parts[0] != "ansible":
        return f"ansible-galaxy collection install {parts[0]}.{parts[1]}"
    if len(parts) >= 3 and parts[0] == "ansible" and parts[1] not in ("builtin", "legacy"):
        return f"ansible-galaxy collection install ansible.{parts[1]}"
    return ""


def _is_python(text: str) -> bool:
    return re.search(r"python[0-9.]*$", text) is not None


def _python_from_shebang(script: str) -> str | None:
    try:
        with open(script, "rb") as fh:
            first = fh.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if not words:
        return None
    if Path(words[0]).name == "env" and len(words) > 1:
        words = [w for w in words[1:] if not w.startswith("-")]
        found = shutil.which(words[0]) if words else None
        return found if found and _is_python(words[0]) else None
    return words[0] if _is_python(words[0]) else None


def _python_from_version(script: str) -> str | None:
    """`ansible-playbook --version` names its interpreter: `python version = 3.x (...) (/path)`
    (for launchers such as pyenv shims, whose shebang is a shell)."""
    try:
        out = subprocess.run(
            [script, "--version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        if line.strip().startswith("python version"):
            match = re.search(r"\((/[^()]+)\)\s*$", line)
            if match:
                return match.group(1)
    return None


def _imports_ansible(python: str) -> bool:
    try:
        done = subprocess.run(
            [python, "-c", "import ansible.release"], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _installed_elsewhere() -> list[str]:
    """Where Ansible is installed off PATH, in the order looked: pipx's venvs (PIPX_HOME, the old
    ~/.local/pipx and the XDG ~/.local/share/pipx), pipx's ~/.local/bin launcher, the active and
    the usual virtualenvs, then the distro's python3 (its /usr/lib/python3/dist-packages)."""
    home = Path.home()
    pipx = [Path(os.environ["PIPX_HOME"])] if os.environ.get("PIPX_HOME") else []
    pipx += [home / ".local" / "pipx", home / ".local" / "share" / "pipx"]
    out = [str(p / "venvs" / name / "bin" / "python") for p in pipx for name in ("ansible-core", "ansible")]
    launcher = home / ".local" / "bin" / "ansible-playbook"
    out += [c for c in (_python_from_shebang(str(launcher)),) if c]
    venvs = [os.environ["VIRTUAL_ENV"]] if os.environ.get("VIRTUAL_ENV") else []
    venvs += [str(home / n) for n in (".venv", "venv", ".ansible-venv", "ansible-venv")]
    venvs += sorted(str(p) for p in (home / ".virtualenvs").glob("*"))
    out += [os.path.join(v, "bin", "python") for v in venvs]
    return out + ["/usr/bin/python3"]


def ansible_python() -> str | None:
    """The Python Ansible runs in: $PROVISION_ANSIBLE_PYTHON, else that of `ansible-playbook` on
    PATH (its shebang, else its --version), else a `python3` on PATH that imports ansible, else
    one installed elsewhere (_installed_elsewhere: pipx, virtualenvs, the distro's)."""
    path = os.environ.get("PATH", "")
    key = os.environ.get("PROVISION_ANSIBLE_PYTHON", "") + "\0" + path
    with _lock:
        if key in _python:
            return _python[key]
    found: str | None = None
    override = os.environ.get("PROVISION_ANSIBLE_PYTHON")
    if override:
        found = override if _imports_ansible(override) else None
    else:
        script = shutil.which("ansible-playbook", path=path)
        candidates = []
        if script:
            candidates += [_python_from_shebang(script), _python_from_version(script)]
        candidates.append(shutil.which("python3", path=path))
        candidates += _installed_elsewhere()
        for candidate in dict.fromkeys(c for c in candidates if c):
            if os.access(candidate, os.X_OK) and _imports_ansible(candidate):
                found = candidate
                break
    if found:  # said once per process: which Ansible provision's fallback runs
        log.info("Ansible's own modules run from %s", found)
    with _lock:
        _python[key] = found
    return found


def looked_for_ansible() -> str:
    """Where ansible_python looked, for the message when it found none."""
    places = ["$PROVISION_ANSIBLE_PYTHON", "ansible-playbook and python3 on PATH"]
    return ", ".join(places + [p for p in _installed_elsewhere()])


def _disk_key(python: str, name: str, playbook_dir: str, dirs: tuple[str, ...] = ()) -> str:
    env = [
        os.environ.get(k, "")
        for k in (
            "ANSIBLE_COLLECTIONS_PATH",
            "ANSIBLE_COLLECTIONS_PATHS",
            "ANSIBLE_CONFIG",
            "ANSIBLE_LIBRARY",
        )
    ]
    raw = json.dumps([_CACHE_FORMAT, python, name, playbook_dir, env, list(dirs)])
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _load_cached(file: Path) -> Built | None:
    try:
        entry = json.loads(file.read_text())
        if entry.get("stamp") is None or entry["stamp"] != _stamp(entry["module_path"]):
            return None  # the module file changed (Ansible upgraded): build again
        return Built(
            entry["fqcn"],
            entry["ansible_version"],
            entry["module_path"],
            entry["payload"],
            entry.get("style", "new"),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(file: Path, built: Built) -> None:
    entry = {
        "fqcn": built.fqcn,
        "ansible_version": built.ansible_version,
        "module_path": built.module_path,
        "stamp": _stamp(built.module_path),
        "payload": built.template,
        "style": built.style,
    }
    try:
        file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = file.with_name(f"{file.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(entry, fh)
        os.replace(tmp, file)
    except OSError:
        pass  # a cache that cannot be written only costs time


def _run_builder(python: str, name: str, playbook_dir: str, dirs: tuple[str, ...] = ()) -> Built:
    request = json.dumps({"name": name, "playbook_dir": playbook_dir, "plugin_dirs": list(dirs)})
    try:
        done = subprocess.run(
            [python, str(BUILDER)],
            input=request,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT,
            cwd=playbook_dir if os.path.isdir(playbook_dir) else None,  # its ansible.cfg
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise BridgeError(
            "broken", f"Ansible ({python}) took over {BUILD_TIMEOUT:.0f}s to build module {name!r}"
        ) from None
    except OSError as exc:
        raise BridgeError("no_ansible", f"could not run Ansible's Python {python}: {exc}") from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise BridgeError(
            "broken",
            f"Ansible ({python}) failed to build module {name!r}: {' / '.join(tail) or f'exit {done.returncode}'}",
        ) from None
    if not answer.get("ok"):
        raise BridgeError(str(answer.get("kind") or "broken"), str(answer.get("error")))
    return Built(
        answer["fqcn"],
        answer["ansible_version"],
        answer["module_path"],
        answer["payload"],
        str(answer.get("style") or "new"),
    )


def build(name: str, playbook_dir: str, dirs: tuple[str, ...] = ()) -> Built:
    """Ansible's module `name` as a payload, resolved as ansible-playbook would for a playbook in
    `playbook_dir` whose roles are `dirs` (their library/ and module_utils/ are Ansible's plugin
    folders too). Raises BridgeError (no Ansible, no such module, not runnable this way)."""
    python = ansible_python()
    if python is None:
        hint = collection_install_hint(name)
        raise BridgeError(
            "no_ansible",
            "provision does not implement it, and Ansible's own module runs in its place only "
            f"when Ansible is installed on this controller: {INSTALL_CORE}"
            + (f" && {hint}" if hint else "")
            + f" (looked in: {looked_for_ansible()}; or set PROVISION_ANSIBLE_PYTHON)",
        )
    key = (python, name, playbook_dir, dirs)
    with _lock:
        known = _built.get(key)
    if known is None:
        file = state_dir() / "ansible-modules" / f"{_disk_key(python, name, playbook_dir, dirs)}.json"
        cached = _load_cached(file)
        if cached is not None:
            known = cached
        else:
            try:
                known = _run_builder(python, name, playbook_dir, dirs)
                _store(file, known)
            except BridgeError as exc:
                known = exc
        with _lock:
            _built[key] = known
    if isinstance(known, BridgeError):
        hint = collection_install_hint(name)
        if known.kind == "not_found" and hint:
            raise BridgeError(known.kind, f"{known.message}; install its collection: {hint}")
        raise known
    return known


def forget() -> None:
    """Drop what this process found (tests change PATH between runs)."""
    with _lock:
        _python.clear()
        _built.clear()
