"""`provision.lock`: a resolved environment a team can reproduce, and the hardware it needs.

YAML (readable in review, comments allowed, pyyaml is already a dependency):

    lock_version: 1
    generated_by: provision 0.1.0
    created: '2025-01-01T12:00:00Z'
    resolved_on: {host: gpu1, gpus: [...], driver: '535.104.05', python: 3.11.2, glibc: '2.36'}
    request: {torch: '2.13', variant: null, with: [], extras: []}
    plan: {torch: 2.13.0, torchvision: null, torchaudio: null, variant: cpu, cuda: null, index_url: ...}
    requires:                 # what a host must have to run it; `install --locked` checks these
      python: '3.11'
      machine: x86_64
      min_glibc: '2.28'       # from the wheels' manylinux tags
      variant: cpu
    index: {index_url: ..., extra_index_urls: [...], find_links: [...]}   # never credentials
    packages:                 # the exact files, by sha256
    - {name: torch, version: 2.13.0+cpu, filename: torch-2.13.0+cpu-...whl, url: ..., sha256: ...}

`install --locked` installs with `pip --require-hashes`, so each package is the very file that was
locked, from whichever index or relay serves it. Whether the host can run the build (driver, GPU
architectures) is the resolver's judgement, asked with the lock's exact version and variant.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml

from provision import __version__
from provision.errors import ConfigError, ProvisionError
from provision.install.mirrors import mask_url
from provision.install.pins import filename_problem, pin_problem
from provision.paths import write_atomic

LOCK_VERSION = 1
DEFAULT_LOCK_FILE = "provision.lock"
_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_|manylinux(2014|2010|1)_")
_LEGACY_GLIBC = {"2014": (2, 17), "2010": (2, 12), "1": (2, 5)}


class PinError(ProvisionError, ValueError):
    """A package entry that is not a plain name, pin, hash and file name (provision/install/pins.py)."""


@dataclass
class LockedPackage:
    name: str
    version: str
    sha256: str
    filename: str = ""
    url: str = ""

    def requirement_line(self) -> str:
        """`name==version --hash=…`: checked again here, the one place a requirements line is made."""
        problem = pin_problem(self.name, self.version, self.sha256)
        if problem:
            raise PinError(f"refusing to write a requirement: {problem}")
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"


@dataclass
class Lock:
    plan: dict[str, Any]
    requires: dict[str, Any]
    packages: list[LockedPackage]
    index: dict[str, Any] = field(default_factory=dict)
    request: dict[str, Any] = field(default_factory=dict)
    resolved_on: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    generated_by: str = ""
    source: str = ""  # the file it was read from, for messages

    def requirements_text(self) -> str:
        """A requirements file pip installs with --require-hashes."""
        return "".join(p.requirement_line() + "\n" for p in self.packages)

    def package(self, name: str) -> LockedPackage | None:
        norm = _norm(name)
        return next((p for p in self.packages if _norm(p.name) == norm), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lock_version": LOCK_VERSION,
            "generated_by": self.generated_by or f"provision {__version__}",
            "created": self.created or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "resolved_on": self.resolved_on,
            "request": self.request,
            "plan": self.plan,
            "requires": self.requires,
            "index": self.index,
            "packages": [
                {
                    "name": p.name,
                    "version": p.version,
                    "filename": p.filename,
                    "url": mask_url(p.url),
                    "sha256": p.sha256,
                }
                for p in self.packages
            ],
        }


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def packages_from_report(report: dict[str, Any], source: str = "pip's report") -> list[LockedPackage]:
    """pip's `--report` JSON (format version 1, pip >= 22.2) -> locked packages; entries without
    a sha256 come back with sha256="" for the caller to hash. The report may come from a host:
    every entry must be a plain name, pin, hash and file name (PinError names the entry)."""
    out = []
    items = report.get("install", []) if isinstance(report, dict) else None
    if not isinstance(items, list):
        raise PinError(f"{source}: `install` is not a list")
    for i, item in enumerate(items):
        item = item if isinstance(item, dict) else {}
        meta = item.get("metadata") or {}
        info = item.get("download_info") or {}
        meta, info = (meta if isinstance(meta, dict) else {}), (info if isinstance(info, dict) else {})
        archive = info.get("archive_info") or {}
        archive = archive if isinstance(archive, dict) else {}
        hashes = archive.get("hashes") or {}
        sha = hashes.get("sha256", "") if isinstance(hashes, dict) else ""
        if not sha and str(archive.get("hash", "")).startswith("sha256="):
            sha = archive["hash"].split("=", 1)[1]
        url = str(info.get("url", ""))
        package = LockedPackage(
            name=meta.get("name", ""),
            version=meta.get("version", ""),
            sha256=sha,
            filename=unquote(urlsplit(url).path.rpartition("/")[2]),
            url=url,
        )
        problem = (pin_problem(package.name, package.version, package.sha256 or None)
                   or filename_problem(package.filename))
        if problem:
            raise PinError(f"{source}: install[{i}]: {problem}")
        out.append(package)
    return sorted(out, key=lambda p: _norm(p.name))


def min_glibc(filenames: list[str]) -> str | None:
    """The newest glibc any of the wheels needs (a wheel tagged with several manylinux tags needs
    only the oldest of them)."""
    need: tuple[int, int] | None = None
    for name in filenames:
        if not name.endswith(".whl"):
            continue
        platform_tags = name[:-4].split("-")[-1].split(".")
        versions = []
        for tag in platform_tags:
            m = _MANYLINUX.search(tag + "_")
            if not m:
                continue
            versions.append(
                (int(m.group(1)), int(m.group(2))) if m.group(1) else _LEGACY_GLIBC[m.group(3)]
            )
        if versions:
            lowest = min(versions)
            need = lowest if need is None else max(need, lowest)
    return f"{need[0]}.{need[1]}" if need else None


def build_lock(
    *,
    plan: dict[str, Any],
    packages: list[LockedPackage],
    python_version: str,
    machine: str,
    index: dict[str, Any],
    request: dict[str, Any],
    resolved_on: dict[str, Any],
) -> Lock:
    missing = [p.name for p in packages if not p.sha256]
    if missing:
        raise ConfigError(f"cannot lock without hashes for: {', '.join(missing)}")
    major_minor = ".".join(python_version.split(".")[:2])
    requires: dict[str, Any] = {
        "python": major_minor,
        "machine": machine,
        "variant": plan.get("variant"),
    }
    glibc = min_glibc([p.filename for p in packages])
    if glibc:
        requires["min_glibc"] = glibc
    return Lock(
        plan=plan,
        requires=requires,
        packages=packages,
        index=index,
        request=request,
        resolved_on=resolved_on,
    )


def write_lock(lock: Lock, path: str | Path) -> Path:
    path = Path(path)
    header = (
        "# provision.lock — exact packages (by sha256) and the hardware they were resolved for.\n"
        f"# Reproduce on another host: provision install HOST --locked {path.name}\n"
    )
    text = header + yaml.safe_dump(
        lock.to_dict(), sort_keys=False, default_flow_style=False, width=120
    )

    return write_atomic(path, text)


def read_lock(path: str | Path) -> Lock:
    """Parse and validate; errors name the file and line."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the lock file: {exc.strerror or exc}") from None
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None

    def line_of(*keys: str | int) -> str:
        cur = node
        for key in keys:
            if isinstance(cur, yaml.MappingNode):
                cur = next((v for k, v in cur.value if k.value == key), cur)
            elif (
                isinstance(cur, yaml.SequenceNode) and isinstance(key, int) and key < len(cur.value)
            ):
                cur = cur.value[key]
        return f"{path}:{cur.start_mark.line + 1}" if cur is not None else str(path)

    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: a lock file is a YAML mapping (written by `provision lock`)")
    version = data.get("lock_version")
    if version != LOCK_VERSION:
        raise ConfigError(
            f"{line_of('lock_version')}: lock_version {version!r} is not supported (this provision reads "
            f"{LOCK_VERSION}); re-create it with `provision lock`"
        )
    for key, kind in (("plan", dict), ("requires", dict), ("packages", list)):
        if not isinstance(data.get(key), kind):
            raise ConfigError(f"{line_of(key)}: `{key}` missing or not a {kind.__name__}")
    packages = []
    for i, item in enumerate(data["packages"]):
        if not isinstance(item, dict) or not all(
            item.get(k) for k in ("name", "version", "sha256")
        ):
            raise ConfigError(
                f"{line_of('packages', i)}: each package needs name, version and sha256"
            )
        sha = str(item["sha256"])
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise ConfigError(
                f"{line_of('packages', i)}: sha256 of {item['name']} is not 64 hex digits"
            )
        # names and versions are data, never requirement syntax (provision/install/pins.py)
        for key, problem in (("name", pin_problem(str(item["name"]), "0")),
                             ("version", pin_problem("x", str(item["version"]))),
                             ("filename", filename_problem(item.get("filename") or ""))):
            if problem:
                which = "" if key == "name" else f"{item['name']!r}: "
                raise ConfigError(f"{line_of('packages', i, key)}: {which}{problem.removeprefix('x: ')}")
        packages.append(
            LockedPackage(
                str(item["name"]),
                str(item["version"]),
                sha,
                str(item.get("filename") or ""),
                str(item.get("url") or ""),
            )
        )
    if not any(_norm(p.name) == "torch" for p in packages):
        raise ConfigError(f"{line_of('packages')}: the lock holds no torch package")
    if not data["requires"].get("python"):
        raise ConfigError(f"{line_of('requires')}: `requires.python` missing")
    return Lock(
        plan=data["plan"],
        requires=data["requires"],
        packages=packages,
        index=data.get("index") or {},
        request=data.get("request") or {},
        resolved_on=data.get("resolved_on") or {},
        created=str(data.get("created") or ""),
        generated_by=str(data.get("generated_by") or ""),
        source=str(path),
    )


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def platform_problems(
    lock: Lock, python_version: str, machine: str, glibc: str | None
) -> list[str]:
    """Why this host's Python/platform cannot install the locked wheels (empty: it can). The
    GPU/driver side is the resolver's (see installer.check_lock)."""
    problems = []
    req = lock.requires
    have = ".".join(python_version.split(".")[:2])
    if str(req.get("python")) != have:
        problems.append(
            f"the lock was resolved for Python {req.get('python')}, this host's interpreter is {python_version}: "
            f"its wheels (cp{str(req.get('python')).replace('.', '')}) do not install here — use --python "
            f"with a {req.get('python')} interpreter, or re-lock for this host"
        )
    if req.get("machine") and machine and req["machine"] != machine:
        problems.append(f"the lock is for {req['machine']}, this host is {machine}")
    if (
        req.get("min_glibc")
        and glibc
        and _version_tuple(glibc) < _version_tuple(str(req["min_glibc"]))
    ):
        problems.append(
            f"the locked wheels need glibc >= {req['min_glibc']}, this host has {glibc} (an older OS image)"
        )
    return problems
