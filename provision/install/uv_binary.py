"""A uv binary for the host's platform, on the controller, to relay to a host that has none.

provision depends on the `uv` PyPI package, so the controller always carries a uv for its own
platform. A host of another platform (a Mac laptop driving a Linux rental, an x86_64 laptop and
an aarch64 GH200 host) gets the `uv` wheel built for *its* platform instead: downloaded once by
this machine's pip (`pip download --platform ... --only-binary :all:`, the same version as the
controller's uv), the binary taken out of the wheel and kept in provision's state dir. So a host
whose index has no uv still installs with uv (install/uv.py, `obtain_uv`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from provision.errors import ProvisionError
from provision.paths import state_dir, write_atomic

# Wheel platform tags pip may take for a Linux host, by C library; uv publishes manylinux2014 and
# musllinux_1_1 wheels for both architectures.
_LINUX_TAGS = {
    "glibc": ("manylinux_2_17_{arch}", "manylinux2014_{arch}"),
    "musl": ("musllinux_1_1_{arch}",),
}
_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
DOWNLOAD_TIMEOUT = 300  # seconds for `pip download` of one ~20 MB wheel


class UvBinaryUnavailable(ProvisionError):
    """No uv for that platform could be had on this machine."""


def host_platform(facts_os: dict) -> tuple[str, str]:
    """(arch, libc kind) of a Linux host from its facts' `os` section; raises for other hosts."""
    system = str(facts_os.get("system") or "Linux")
    if system != "Linux":
        raise UvBinaryUnavailable(f"the host runs {system}: only Linux hosts get a relayed uv")
    raw = str(facts_os.get("arch") or facts_os.get("machine") or "")
    arch = _ARCH.get(raw.lower())
    if arch is None:
        raise UvBinaryUnavailable(f"no uv wheel for the host's CPU architecture {raw or '?'}")
    libc = str(facts_os.get("libc") or "glibc").lower()
    return arch, ("musl" if "musl" in libc else "glibc")


def controller_uv_version() -> str | None:
    """The version of the `uv` package this controller carries (None when it has none)."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("uv")
    except (ImportError, PackageNotFoundError):
        return None


def cached_path(arch: str, libc: str, version: str | None) -> Path:
    return state_dir() / "uv-binaries" / (version or "latest") / f"linux-{arch}-{libc}" / "uv"


def uv_for_platform(arch: str, libc: str, *, version: str | None = None) -> Path:
    """The uv binary for Linux on `arch` with `libc` (glibc | musl): from the cache, else
    downloaded once as a wheel for that platform. Raises UvBinaryUnavailable with pip's reason."""
    version = version if version is not None else controller_uv_version()
    target = cached_path(arch, libc, version)
    if target.is_file() and os.access(target, os.X_OK):
        return target
    tags = [t.format(arch=arch) for t in _LINUX_TAGS[libc]]
    with tempfile.TemporaryDirectory(prefix="provision-uv-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
               "--no-deps", "--only-binary", ":all:", "--implementation", "py",
               "--python-version", "3", "-d", tmp]  # fmt: skip
        for tag in tags:
            cmd += ["--platform", tag]
        cmd.append(f"uv=={version}" if version else "uv")
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT,
                                  stdin=subprocess.DEVNULL)  # fmt: skip
        except subprocess.TimeoutExpired:
            raise UvBinaryUnavailable(
                f"pip download of uv for linux-{arch} gave no wheel within {DOWNLOAD_TIMEOUT}s"
            ) from None
        wheels = sorted(Path(tmp).glob("uv-*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip() or done.stdout.strip() or "no wheel").splitlines()[-1]
            raise UvBinaryUnavailable(f"pip download of uv for linux-{arch} ({libc}) failed: {last}")
        data = _binary_from_wheel(wheels[0])
    write_atomic(target, data, mode=0o755)
    return target


def _binary_from_wheel(wheel: Path) -> bytes:
    """The `uv` executable inside a uv wheel (`uv-X.data/scripts/uv`)."""
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            parts = name.split("/")
            if len(parts) == 3 and parts[0].endswith(".data") and parts[1:] == ["scripts", "uv"]:
                return archive.read(name)
    raise UvBinaryUnavailable(f"{wheel.name} holds no scripts/uv")
