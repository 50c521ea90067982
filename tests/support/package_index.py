"""A PEP 503 "simple" package index the tests serve themselves, plus the wheelhouse it serves.

    /simple/                      every project (normalized names, PEP 503)
    /simple/<project>/            one anchor per file: href=/files/<file>#sha256=<hex>,
                                  data-requires-python from the wheel's METADATA
    /files/<file>                 the file, streamed

Bind it to 127.0.0.1 for localhost installs or to the fleet bridge address so the fleet's
hosts reach it. Failure injection is a knob, not a fake: `hide` drops projects from the index
(pip: "No matching distribution"), `broken_files` lists files whose download answers 404 (pip:
the wheel is missing), `auth` demands HTTP basic credentials, `delay` makes every answer slow. Every request is recorded, and a
`watch_secret` makes the server look through every process's command line on each request, so a
test can prove a credential never reached `ps` while pip was fetching.

The wheelhouse is the REAL torch 2.13.0 CPU wheel and its Linux x86_64 dependencies, fetched once
with `pip download` (this machine's find-links hold torch) into a cache outside the repo. It is
also the **lagging index** of issue 9: it holds torch 2.13.0 only, while the compatibility table
knows 2.14.0, like a mirror days behind or a private index with one version. For tests that only
ask what an index lists (no install), `lagging_torch_index_dir` makes a tiny stand-in with the same
torch file names and no 190 MB download.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import html
import json
import os
import re
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote


def _installed_version(name: str) -> str | None:
    """The version of an installed distribution, from its metadata (nothing imported)."""
    import importlib.metadata as metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# The torch the wheelhouse serves: the one installed where the tests run (2.13.0+cpu on the
# project's machines), so the suite holds on any machine that can import torch.
INSTALLED_TORCH = _installed_version("torch")
TORCH_VERSION = (INSTALLED_TORCH or "2.13.0").partition("+")[0]
TORCH_VARIANT = (INSTALLED_TORCH or "2.13.0+cpu").partition("+")[2] or "cpu"
TORCH_REQUIREMENT = f"torch=={INSTALLED_TORCH or '2.13.0+cpu'}"


def interpreter_key() -> str:
    """The test interpreter's wheel tag, for cache names: cp311 (x86_64), cp312-aarch64, ..."""
    impl = "cp" if sys.implementation.name == "cpython" else sys.implementation.name[:2]
    tag = f"{impl}{sys.version_info.major}{sys.version_info.minor}"
    machine = os.uname().machine
    return tag if machine == "x86_64" else f"{tag}-{machine}"


def normalize(name: str) -> str:
    """PEP 503 name normalization."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project_of(filename: str) -> str:
    """Distribution name of a wheel or sdist file name."""
    if filename.endswith(".whl"):
        return normalize(filename.split("-")[0])
    stem = re.sub(r"\.(tar\.gz|zip|tar\.bz2)$", "", filename)
    return normalize(stem.rsplit("-", 1)[0])


def sha256_of(path: Path) -> str:
    """sha256 of a file, remembered beside it (keyed by size and mtime): torch is 190 MB."""
    stat = path.stat()
    memo = path.with_name(f".{path.name}.sha256")
    key = f"{stat.st_size}:{stat.st_mtime_ns}"
    with contextlib.suppress(OSError, ValueError):
        stored_key, digest = memo.read_text().split()
        if stored_key == key:
            return digest
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    with contextlib.suppress(OSError):
        memo.write_text(f"{key} {digest}\n")
    return digest


def requires_python(path: Path) -> str | None:
    if not path.name.endswith(".whl"):
        return None
    with zipfile.ZipFile(path) as zf:
        meta = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
        if meta is None:
            return None
        for line in zf.read(meta).decode("utf-8", "replace").splitlines():
            if not line.strip():
                break
            if line.lower().startswith("requires-python:"):
                return line.split(":", 1)[1].strip()
    return None


class PackageIndex:
    """A running PEP 503 index over the files of `directory`. Use as a context manager."""

    def __init__(
        self,
        directory: str | os.PathLike,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        hide: Iterable[str] = (),
        broken_files: Iterable[str] = (),
        auth: tuple[str, str] | None = None,
        watch_secret: str | None = None,
        delay: float = 0.0,
    ) -> None:
        self.directory = Path(directory)
        self.hide = {normalize(p) for p in hide}
        self.broken_files = set(broken_files)
        self.auth = auth
        self.watch_secret = watch_secret
        self.delay = delay  # seconds each answer waits: a slow index, for interruption tests
        self.requests: list[str] = []  # "GET /simple/torch/ 200"
        self.secret_seen_in: list[str] = []  # command lines that held watch_secret
        self._lock = threading.Lock()
        self._files: dict[str, list[tuple[str, str, str | None]]] = {}
        self._scan()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    def _scan(self) -> None:
        for path in sorted(self.directory.iterdir()):
            if path.name.startswith(".") or not path.is_file():
                continue
            if not path.name.endswith((".whl", ".tar.gz", ".zip")):
                continue
            entry = (path.name, sha256_of(path), requires_python(path))
            self._files.setdefault(project_of(path.name), []).append(entry)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """The simple index URL (no credentials)."""
        host, port = self.address
        return f"http://{host}:{port}/simple/"

    def url_with_credentials(self) -> str:
        assert self.auth, "index started without auth"
        host, port = self.address
        return f"http://{self.auth[0]}:{self.auth[1]}@{host}:{port}/simple/"

    def projects(self) -> list[str]:
        return sorted(self._files)

    def files(self) -> dict[str, list[str]]:
        return {p: [f for f, _, _ in entries] for p, entries in self._files.items()}

    def start(self) -> PackageIndex:
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="package-index"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> PackageIndex:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving ---------------------------------------------------------------------------
    def _check_secret_in_process_list(self) -> None:
        if not self.watch_secret:
            return
        needle = self.watch_secret.encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if needle in cmdline:
                with self._lock:
                    self.secret_seen_in.append(
                        cmdline.replace(b"\0", b" ").decode("utf-8", "replace")
                    )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        index = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: object) -> None:  # quiet: tests read .requests
                pass

            def _record(self, status: int) -> None:
                with index._lock:
                    index.requests.append(f"{self.command} {self.path} {status}")

            def _send(
                self, status: int, body: bytes, ctype: str = "text/html; charset=utf-8"
            ) -> None:
                self._record(status)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                if status == 401:
                    self.send_header("WWW-Authenticate", 'Basic realm="test-index"')
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _authorized(self) -> bool:
                if index.auth is None:
                    return True
                expected = base64.b64encode(f"{index.auth[0]}:{index.auth[1]}".encode()).decode()
                return self.headers.get("Authorization", "") == f"Basic {expected}"

            def do_HEAD(self) -> None:  # noqa: N802
                self.do_GET()

            def do_GET(self) -> None:  # noqa: N802
                index._check_secret_in_process_list()
                if index.delay:
                    time.sleep(index.delay)
                if not self._authorized():
                    self._send(401, b"credentials required\n", "text/plain")
                    return
                path = unquote(self.path.split("?", 1)[0].split("#", 1)[0])
                if path in ("/simple", "/simple/"):
                    links = "".join(
                        f'<a href="/simple/{p}/">{p}</a>\n'
                        for p in index.projects()
                        if p not in index.hide
                    )
                    self._send(
                        200, f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode()
                    )
                    return
                m = re.fullmatch(r"/simple/([^/]+)/?", path)
                if m:
                    project = normalize(m.group(1))
                    if project != m.group(1):  # PEP 503: redirect to the normalized name
                        self._record(301)
                        self.send_response(301)
                        self.send_header("Location", f"/simple/{project}/")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    entries = [] if project in index.hide else index._files.get(project, [])
                    if not entries:
                        self._send(404, b"not found\n", "text/plain")
                        return
                    anchors = []
                    for name, digest, rp in entries:
                        attr = f' data-requires-python="{html.escape(rp)}"' if rp else ""
                        anchors.append(
                            f'<a href="/files/{name}#sha256={digest}"{attr}>{html.escape(name)}</a><br/>\n'
                        )
                    body = f"<!DOCTYPE html><html><body>\n{''.join(anchors)}</body></html>\n"
                    self._send(200, body.encode())
                    return
                m = re.fullmatch(r"/files/([^/]+)", path)
                if m and m.group(1) not in index.broken_files:
                    file = index.directory / m.group(1)
                    if file.is_file() and not file.name.startswith("."):
                        self._send_file(file)
                        return
                self._send(404, b"not found\n", "text/plain")

            def _send_file(self, file: Path) -> None:
                size = file.stat().st_size
                self._record(200)
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(size))
                # as PyPI does: files never change, so pip's HTTP cache may keep them
                self.send_header("Cache-Control", "max-age=365000000, immutable, public")
                self.end_headers()
                if self.command == "HEAD":
                    return
                with (
                    file.open("rb") as fh,
                    contextlib.suppress(BrokenPipeError, ConnectionResetError),
                ):
                    while chunk := fh.read(1 << 20):
                        self.wfile.write(chunk)

        return Handler


# -- the wheelhouse -----------------------------------------------------------------------------


def cache_root() -> Path:
    """Outside the repo, so repeated test runs (and fresh checkouts) reuse the 190 MB download."""
    base = os.environ.get("PROVISION_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "provision-tests"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pip(args: list[str]) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


def wheel_requirements(wheel: Path) -> list[str]:
    """A wheel's Requires-Dist that apply to the running interpreter (no extras)."""
    from packaging.requirements import Requirement

    out = []
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        for line in zf.read(meta).decode().splitlines():
            if not line.strip():
                break
            if line.startswith("Requires-Dist:"):
                req = Requirement(line.split(":", 1)[1].strip())
                if req.marker is None or req.marker.evaluate({"extra": ""}):
                    out.append(str(req))
    return out


torch_requirements = wheel_requirements  # the name older callers use


def repack_installed(name: str, directory: Path) -> Path:
    """A wheel rebuilt from an installed distribution (its RECORD's files under site-packages,
    its own WHEEL tags, a fresh RECORD): for a machine where the wheel file itself can't be had
    (no network, another Python than the cached wheels'). Scripts outside site-packages are left
    out; pip writes console scripts from entry_points.txt anyway."""
    import importlib.metadata as metadata

    dist = metadata.distribution(name)
    files = [f for f in dist.files or [] if not str(f).startswith("..") and "__pycache__" not in str(f)]
    info = next(str(f).split("/")[0] for f in files if str(f).endswith(".dist-info/METADATA"))
    base = Path(str(dist.locate_file(info))).parent
    wheel_meta = (base / info / "WHEEL").read_text()
    tags = [ln.split(":", 1)[1].strip() for ln in wheel_meta.splitlines() if ln.startswith("Tag:")]
    if not tags:
        raise RuntimeError(f"{name}: its WHEEL file names no tag; can't rebuild a wheel from it")
    py, abi, plat = (sorted({t.split("-")[i] for t in tags}) for i in range(3))
    dist_name = dist.metadata["Name"].replace("-", "_")
    path = directory / f"{dist_name}-{dist.version}-{'.'.join(py)}-{'.'.join(abi)}-{'.'.join(plat)}.whl"
    skip = {f"{info}/{n}" for n in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")}
    tmp = path.with_name(path.name + ".part")
    records = []
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for f in files:
            arc = str(f)
            source = base / arc
            if arc in skip or not source.is_file():
                continue
            data = source.read_bytes()
            zf.writestr(zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0)), data,
                        compress_type=zipfile.ZIP_DEFLATED, compresslevel=1)  # fmt: skip
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{arc},sha256={digest},{len(data)}")
        records.append(f"{info}/RECORD,,")
        zf.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    tmp.rename(path)
    return path


def _closure_from_installed(requirements: list[str], directory: Path) -> None:
    """Repack every installed distribution the requirements need, transitively."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement

    todo, seen = list(requirements), set()
    while todo:
        req = Requirement(todo.pop())
        key = normalize(req.name)
        if key in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            raise RuntimeError(
                f"{req} is neither downloadable here nor installed in {sys.executable}"
            ) from None
        if not any(project_of(p.name) == key for p in directory.glob("*.whl")):
            repack_installed(req.name, directory)
        todo += [r for r in dist.requires or [] if "extra ==" not in r]


def wheels_for_interpreter(requirements: list[str], directory: Path) -> None:
    """Wheels the running interpreter can install for `requirements` (and their dependencies)
    into `directory`: `pip download` (this machine's index/find-links), else — offline, or an
    interpreter no download fits — rebuilt from what is installed in the test environment."""
    try:
        _pip(["download", "--only-binary=:all:", "-d", str(directory), *requirements])
    except RuntimeError:
        _closure_from_installed(requirements, directory)


def torch_wheelhouse() -> Path:
    """A directory with the installed torch's wheel (2.13.0 CPU on the project's machines) and
    every dependency it needs, for the running interpreter's Python and platform: the wheel file
    pip can fetch here for that torch, else one rebuilt from the installed torch (no network
    needed). Built once per interpreter tag, reused while its manifest is complete; skips the test
    when no torch is installed at all."""
    if INSTALLED_TORCH is None:
        import pytest

        pytest.skip(f"no torch installed in {sys.executable}: the install tests serve that torch")
    root = cache_root() / f"wheelhouse-torch-{TORCH_VERSION}-{TORCH_VARIANT}-{interpreter_key()}"
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / ".complete.json"
    with (cache_root() / ".wheelhouse.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two pytest processes must not download into it at once
        if manifest.exists():
            with contextlib.suppress(ValueError, OSError):
                names = json.loads(manifest.read_text())
                if all((root / n).is_file() for n in names):
                    return root
        try:
            _pip(["download", "--no-deps", "--only-binary=:all:", "-d", str(root), TORCH_REQUIREMENT])
        except RuntimeError:
            repack_installed("torch", root)
        wheel = next(root.glob(f"torch-{TORCH_VERSION}*.whl"))
        wheels_for_interpreter(wheel_requirements(wheel), root)
        names = sorted(p.name for p in root.iterdir() if p.is_file() and not p.name.startswith("."))
        for name in names:
            sha256_of(root / name)
        manifest.write_text(json.dumps(names))
        return root


def lagging_torch_index_dir(directory: Path) -> Path:
    """Tiny wheels under torch's real 2.13.0 CPU file name (and an older 2.12.1): an index that
    lags behind the newest known torch, for listing and planning tests. Not installable as torch
    (each is a one-module stub), so only tests that never pip-install from it may use it."""
    directory.mkdir(parents=True, exist_ok=True)
    for version in ("2.13.0+cpu", "2.12.1+cpu"):
        stub = build_wheel(directory, "torch", version)
        stub.rename(directory / f"torch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl")
    return directory


def small_wheelhouse(directory: Path) -> Path:
    """Tiny pure-Python wheels built on the spot (no network): for fast tests of the install
    machinery that do not need torch. Packages `provtest-alpha` 1.0 and 2.0, `provtest-beta` 1.0."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, version in (
        ("provtest_alpha", "1.0"),
        ("provtest_alpha", "2.0"),
        ("provtest_beta", "1.0"),
    ):
        build_wheel(directory, name, version)
    return directory


def build_wheel(
    directory: Path, name: str, version: str, requires: Iterable[str] = (), body: str = ""
) -> Path:
    """A minimal valid pure-Python wheel `name` with module `name` exposing __version__ (then
    `body`: e.g. a raise, for a package that installs but cannot be imported)."""
    dist = f"{name}-{version}.dist-info"
    path = directory / f"{name}-{version}-py3-none-any.whl"
    files = {
        f"{name}/__init__.py": (f'__version__ = "{version}"\n' + body).encode(),
        f"{dist}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires)
        ).encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: provision-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    records = []
    for arc, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        records.append(f"{arc},sha256={digest},{len(data)}")
    records.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(records) + "\n").encode()
    with zipfile.ZipFile(path, "w") as zf:
        for arc, data in files.items():
            zf.writestr(zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return path
