"""`--relay`: the controller downloads the wheels once, the hosts get them over SSH.

For hosts whose route to the index is slow or absent (rentals behind a national firewall, an
air-gapped cluster). Steps:

1. resolve on the controller *for the host's interpreter and platform* (`pip install --dry-run
   --report` with `--python-version/--platform/--abi`, or the lock's list when --locked): the
   exact files and their sha256;
2. fetch the missing ones into the cache (`state_dir()/wheels`, flat, shared by every host and
   run; each file checked against its sha256);
3. push what the host lacks as ONE tar stream over the existing connection (no per-file SFTP);
4. the host installs with `--no-index --find-links DIR --require-hashes`: nothing else can sneak
   in, and a truncated transfer fails the hash check instead of installing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from provision.connection.base import Connection
from provision.errors import HostError, ProvisionError
from provision.install.lockfile import LockedPackage, packages_from_report
from provision.install.mirrors import IndexConfig, secrets_of
from provision.install.pins import wheel_problem
from provision.install.pip import KEEP_PIP_VARS, index_arguments, relevant_lines
from provision.install.planning import PythonInfo
from provision.paths import state_dir
from provision.shell import quote, sh

REMOTE_DIR = ".cache/provision/wheels"  # under the host user's home
_CHUNK = 1 << 20
_thread_lock = threading.Lock()


class RelayError(ProvisionError):
    """Resolving or downloading on the controller failed (with pip's relevant lines)."""

    def __init__(self, message: str, lines: list[str] | None = None) -> None:
        super().__init__(message + ("\n  " + "\n  ".join(lines) if lines else ""))
        self.lines = lines or []


def cache_dir() -> Path:
    path = state_dir() / "wheels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def controller_pip_env(index: IndexConfig) -> dict[str, str]:
    """The controller's environment for pip, with its pip configuration switched off exactly as
    on the hosts; index credentials ride in the environment, not argv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in KEEP_PIP_VARS}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def _pip(args: list[str], index: IndexConfig, what: str) -> subprocess.CompletedProcess:
    env = controller_pip_env(index)
    extra_env: dict[str, str] = {}
    index_args = index_arguments(index, extra_env)
    env.update(extra_env)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        *args[:1],
        "--no-input",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        *index_args,
        *args[1:],
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        secrets = secrets_of(index.urls() + [index.proxy])
        raise RelayError(
            f"{what} on the controller failed", relevant_lines(proc.stdout + proc.stderr, secrets)
        )
    return proc


def _target_args(py: PythonInfo) -> list[str]:
    args = [
        "--only-binary=:all:",
        "--python-version",
        py.major_minor,
        "--implementation",
        "cp",
        "--abi",
        py.abi,
    ]
    for tag in py.platform_tags():
        args += ["--platform", tag]
    return args


def resolve_for(
    py: PythonInfo, requirements: list[str], index: IndexConfig, requirement_files: list[str] = ()
) -> list[LockedPackage]:  # type: ignore[assignment]
    """The exact wheels (with sha256) pip would install on a host with interpreter `py`."""
    with tempfile.TemporaryDirectory(prefix="provision-resolve-") as tmp:
        report = Path(tmp) / "report.json"
        args = [
            "install",
            "--dry-run",
            "--ignore-installed",
            *_target_args(py),
            "--target",
            str(Path(tmp) / "target"),
            "--report",
            str(report),
        ]
        for f in requirement_files:
            args += ["-r", f]
        _pip(args + list(requirements), index, "resolving " + " ".join(requirements))
        packages = packages_from_report(json.loads(report.read_text()), "the controller's pip report")
    unhashed = [p for p in packages if not p.sha256]
    if unhashed:
        raise RelayError(f"the index gave no sha256 for {', '.join(p.name for p in unhashed)}")
    return packages


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(packages: list[LockedPackage], index: IndexConfig, py: PythonInfo) -> list[Path]:
    """The files of `packages` in the controller's cache, downloading only what is missing.
    Serialized across threads and processes: hosts of one run share the downloads."""
    cache = cache_dir()
    with _thread_lock, (cache / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        by_hash = _cached_by_hash(cache)
        missing = [p for p in packages if p.sha256 not in by_hash]
        # wheels only, by name==pin: a source archive would run its build on the controller
        refused = [f"{p.name}: {wheel_problem(p.filename)}" for p in missing if p.filename and wheel_problem(p.filename)]
        if refused:
            raise RelayError("the relay downloads wheels only", refused)
        if missing:
            with tempfile.TemporaryDirectory(prefix="provision-relay-") as tmp:
                reqs = Path(tmp) / "requirements.txt"
                reqs.write_text("".join(p.requirement_line() + "\n" for p in missing))
                _pip(
                    [
                        "download",
                        "--no-deps",
                        "--require-hashes",
                        *_target_args(py),
                        "-d",
                        tmp,
                        "-r",
                        str(reqs),
                    ],
                    index,
                    "downloading wheels",
                )
                for f in Path(tmp).iterdir():
                    if f.suffix == ".whl" and not f.name.startswith("."):
                        digest = _sha256(f)
                        os.replace(f, cache / f.name)
                        _remember(cache / f.name, digest)
            by_hash = _cached_by_hash(cache)
        files = []
        for p in packages:
            path = by_hash.get(p.sha256)
            if path is None:
                raise RelayError(
                    f"{p.name}=={p.version}: downloaded, but no file with sha256 {p.sha256[:12]}…"
                )
            files.append(path)
        return files


def _digest_of(path: Path) -> str:
    """The cached file's sha256, from its memo when size and mtime still match."""
    memo = path.with_name(f".{path.name}.sha256")
    st = path.stat()
    with contextlib.suppress(OSError, ValueError):
        key, value = memo.read_text().split()
        if key == f"{st.st_size}:{st.st_mtime_ns}":
            return value
    digest = _sha256(path)
    with contextlib.suppress(OSError):
        _remember(path, digest)
    return digest


def _remember(path: Path, digest: str) -> None:
    st = path.stat()
    path.with_name(f".{path.name}.sha256").write_text(f"{st.st_size}:{st.st_mtime_ns} {digest}\n")


def _cached_by_hash(cache: Path) -> dict[str, Path]:
    out = {}
    for f in cache.iterdir():
        if f.name.startswith(".") or not f.is_file():
            continue
        memo = f.with_name(f".{f.name}.sha256")
        st = f.stat()
        digest = None
        with contextlib.suppress(OSError, ValueError):
            key, value = memo.read_text().split()
            if key == f"{st.st_size}:{st.st_mtime_ns}":
                digest = value
        if digest is None:
            digest = _sha256(f)
            _remember(f, digest)
        out[digest] = f
    return out


def tar_stream(files: list[Path]) -> Iterator[bytes]:
    """A ustar/pax stream of `files` (flat), produced chunk by chunk: 2 GB of CUDA wheels never sit
    in memory."""
    for path in files:
        info = tarfile.TarInfo(path.name)
        info.size = path.stat().st_size
        info.mode = 0o644
        info.mtime = int(path.stat().st_mtime)
        yield info.tobuf(format=tarfile.PAX_FORMAT)
        with path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                yield chunk
        pad = (-info.size) % tarfile.BLOCKSIZE
        if pad:
            yield b"\0" * pad
    yield b"\0" * (tarfile.BLOCKSIZE * 2)


def push(connection: Connection, files: list[Path], remote_dir: str) -> tuple[int, int]:
    """Send the files the host does not have yet (same name and sha256, hashed ON the host) as
    one tar stream; a corrupt wheel of the right size is replaced, not kept forever.
    Returns (files sent, bytes sent)."""
    d = quote(remote_dir)
    # sha256sum (coreutils) where present, else the host's python3: hashing ~GB/s, seconds
    # even for CUDA wheels, and pip's --require-hashes would refuse a bad file anyway
    listing = connection.run(
        sh(
            'mkdir -p {d} && cd {d} && for f in {names}; do [ -f "$f" ] || continue; '
            'if command -v sha256sum >/dev/null 2>&1; then h=$(sha256sum < "$f"); '
            'else h=$(python3 -c {hasher} < "$f"); fi; '
            "printf '%s\\t%s\\n' \"${h%% *}\" \"$f\"; done; true",
            d=remote_dir,
            names=[f.name for f in files],
            hasher="import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())",
        ),
        timeout=600,
    )
    have: dict[str, str] = {}
    for line in listing.stdout.splitlines():
        digest, _, name = line.partition("\t")
        have[name] = digest.strip()
    send = [f for f in files if have.get(f.name) != _digest_of(f)]
    if not send:
        return 0, 0
    # into a temp dir first, then renamed: an interrupted stream leaves no half file behind
    script = (
        f'tmp=$(mktemp -d {d}/.incoming-XXXXXX) && tar -x -o -C "$tmp" -f - && '
        f'mv -f "$tmp"/* {d}/ && rmdir "$tmp" || {{ rm -rf "$tmp"; exit 1; }}'
    )
    result = connection.stream(script, source=tar_stream(send), timeout=3600)
    if not result.ok:
        raise HostError(
            connection.host.name,
            f"pushing wheels to {remote_dir} failed: {result.stderr.strip()[-500:]}",
        )
    return len(send), sum(f.stat().st_size for f in send)


def relay_index(remote_dir: str) -> IndexConfig:
    return IndexConfig(
        index_url=None,
        no_index=True,
        find_links=[remote_dir],
        kind="local",
        torch_source=f"relayed from the controller into {remote_dir}",
    )
