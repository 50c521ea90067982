"""Pack the agent for the host: two bundles, each named by its content hash.

* core: what the light commands (ping, facts, health) import -- protocol, facts/, nvidia/,
  health and whatever those import from provision.agent (followed through the sources). About a
  fifth of the agent; a first contact ships only this.
* full: all of provision/agent/, shipped by the first heavy command (stage, bench, train, ...).

A bundle is zlib-compressed records `SIZE NAME\\n` + bytes. Beside each module's source it
carries the controller's bytecode as an unchecked hash-based .pyc (PEP 552) under
__pycache__/NAME.<cache tag>.pyc: where the host's Python has the same cache tag and magic
number, its import system loads that bytecode and compiles nothing on first contact; anywhere
else Python's own checks (tag in the file name, magic in the header) skip it and the host
compiles from source, as before. Unchecked is safe here: the folder is named by the sources'
hash, so source and bytecode never diverge. The last record is MANIFEST (size and name of every
file), which the host's bootstrap checks to tell a complete agent from a partial one.

Building costs ~0.1 s of controller CPU (compiling, compressing), so bundles are kept in the
controller's state dir per content hash and cache tag, and built only when missing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import marshal
import re
import sys
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

from provision.paths import state_dir, write_atomic

log = logging.getLogger("provision.agent")
_PACKAGE_DIR = Path(__file__).resolve().parent.parent
# Kept for running a folder by hand (`python3 DIR/__main__.py facts`); the controller starts
# the agent through its bootstrap (provision/remote/agent.py). Bytecode writing on: the folder
# is ours and the agent runs again and again (Docker images often set PYTHONDONTWRITEBYTECODE=1).
MAIN = (
    b"import sys\n"
    b"sys.dont_write_bytecode = False\n"
    b"from provision.agent.protocol import main\n"
    b"sys.exit(main())\n"
)
# Folders the light commands may import anything from (GPU-only paths import lazily inside them).
_CORE_ROOTS = ("provision/__init__.py", "provision/agent/__init__.py", "provision/agent/protocol.py",
               "provision/agent/health.py", "provision/agent/bootstrap.py", "provision/agent/facts/",
               "provision/agent/nvidia/", "provision/agent/serve.py")
_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(provision\.agent[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)"
    r"|import[ \t]+(provision\.agent[\w.]*))",
    re.MULTILINE,
)
FORMAT = 1  # bumps every bundle's name when the bundle layout changes


@dataclass(frozen=True)
class Bundle:
    kind: str  # core | full
    digest: str  # 16 hex digits, names the folder on the host: agent-DIGEST
    data: bytes  # compressed records, what goes on the wire


_lock = threading.Lock()
_sources: dict[str, bytes] | None = None
_digests: dict[str, str] = {}
_bundles: dict[str, Bundle] = {}


def sources() -> dict[str, bytes]:
    """{path in the bundle: bytes} of provision/__init__.py and provision/agent/**.py, read once
    per controller process."""
    global _sources
    if _sources is None:
        files = [_PACKAGE_DIR / "__init__.py", *sorted((_PACKAGE_DIR / "agent").rglob("*.py"))]
        _sources = {"provision/" + p.relative_to(_PACKAGE_DIR).as_posix(): p.read_bytes() for p in files}
    return _sources


def _module_file(module: str, files: dict[str, bytes]) -> str | None:
    base = module.replace(".", "/")
    for name in (base + ".py", base + "/__init__.py"):
        if name in files:
            return name
    return None


def core_names(files: dict[str, bytes]) -> list[str]:
    """The files the light commands need: the core roots plus, transitively, every
    provision.agent module they import (at any depth, lazily or not) and its packages."""
    wanted = {n for n in files if any(n == r or (r.endswith("/") and n.startswith(r)) for r in _CORE_ROOTS)}
    todo = list(wanted)
    while todo:
        text = files[todo.pop()].decode("utf-8", "replace")
        for match in _IMPORT.finditer(text):
            module = match.group(1) or match.group(3)
            names = [n.split(" as ")[0].strip() for n in (match.group(2) or "").strip("()").split(",")]
            candidates = [module] + [f"{module}.{n}" for n in names if n.isidentifier()]
            parts = module.split(".")
            candidates += [".".join(parts[:i]) for i in range(2, len(parts))]  # parent packages
            for candidate in candidates:
                name = _module_file(candidate, files)
                if name is not None and name not in wanted:
                    wanted.add(name)
                    todo.append(name)
    return sorted(wanted)


def _digest(names: list[str], files: dict[str, bytes]) -> str:
    digest = hashlib.sha256(b"format %d\0__main__.py\0" % FORMAT + MAIN)
    for name in names:
        digest.update(name.encode() + b"\0" + files[name])
    return digest.hexdigest()[:16]


def _names(kind: str) -> list[str]:
    files = sources()
    return core_names(files) if kind == "core" else sorted(files)


def digest(kind: str = "full") -> str:
    """The content hash of one bundle (its folder on the host is agent-DIGEST). Cheap: no
    compiling, no compressing; a warm run never builds a bundle."""
    with _lock:
        if kind not in _digests:
            _digests[kind] = _digest(_names(kind), sources())
        return _digests[kind]


def _pyc(name: str, source: bytes) -> bytes:
    """Unchecked hash-based .pyc (PEP 552 flags 0b01) of one module, for this Python."""
    code = compile(source, name, "exec", dont_inherit=True, optimize=0)
    return (importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little")
            + importlib.util.source_hash(source) + marshal.dumps(code))


def _records(names: list[str], files: dict[str, bytes]) -> bytes:
    tag = sys.implementation.cache_tag
    entries: list[tuple[str, bytes]] = [("__main__.py", MAIN)]
    # the bootstrap's own module at the top of the folder, so a warm call loads its bytecode
    boot = {"provision_boot.py": files["provision/agent/bootstrap.py"]}
    for name in [*boot, *names]:
        source = boot.get(name) or files[name]
        entries.append((name, source))
        if tag:
            folder, _, leaf = name.rpartition("/")
            cached = f"{folder}/__pycache__/{leaf[:-3]}.{tag}.pyc" if folder else f"__pycache__/{leaf[:-3]}.{tag}.pyc"
            entries.append((cached, _pyc(name, source)))
    manifest = "".join(f"{len(data)} {name}\n" for name, data in entries).encode()
    entries.append(("MANIFEST", manifest))  # last: the host writes it last
    return b"".join(b"%d %s\n" % (len(data), name.encode()) + data for name, data in entries)


def _cache_file(kind: str, bundle_digest: str) -> Path:
    return state_dir() / "agent" / f"{bundle_digest}-{kind}-{sys.implementation.cache_tag or 'src'}.bin"


def bundle(kind: str = "full") -> Bundle:
    """The bundle to ship, from the controller's cache or built (once per content hash)."""
    bundle_digest = digest(kind)
    with _lock:
        if kind in _bundles:
            return _bundles[kind]
        cache = _cache_file(kind, bundle_digest)
        try:
            data = cache.read_bytes()
            zlib.decompress(data)  # its checksum: a damaged cache file is rebuilt, never shipped
        except (OSError, zlib.error):
            data = zlib.compress(_records(_names(kind), sources()), 6)
            try:
                write_atomic(cache, data)
                _prune(cache)
            except OSError as exc:  # a read-only state dir costs a rebuild per run, nothing else
                log.debug("agent bundle cache %s not written: %s", cache, exc)
        _bundles[kind] = Bundle(kind, bundle_digest, data)
        return _bundles[kind]


def _prune(keep: Path) -> None:
    """Bundles of older agent versions in the controller's cache: keep the newest few."""
    olds = sorted((p for p in keep.parent.glob("*.bin") if p != keep), key=lambda p: p.stat().st_mtime)
    for path in olds[:-8]:
        path.unlink(missing_ok=True)


def reset() -> None:
    """Forget what was read and built (tests that change the sources)."""
    global _sources
    with _lock:
        _sources = None
        _digests.clear()
        _bundles.clear()
