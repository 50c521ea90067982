"""What a fleet host itself says about its GPUs, OS and Python, read outside provision.

Fleet tests compare provision's facts with these, never with fixed values: the suite must
pass unchanged on a GPU server, on Ubuntu, or with another Python (hosts share this machine's
/usr and /dev unless they have a root filesystem of their own).
"""

from __future__ import annotations

from fleet import Fleet, FleetHost


def nvidia_gpu_names(fleet: Fleet, host: FleetHost | str) -> list[str]:
    """The GPU names `nvidia-smi` lists on the host ([] when it has none or no nvidia-smi)."""
    proc = fleet.ns_exec(
        host,
        "command -v nvidia-smi >/dev/null 2>&1 || exit 0; "
        "nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true",
        check=False,
    )
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()]


def os_release(fleet: Fleet, host: FleetHost | str) -> dict[str, str]:
    text = fleet.ns_exec(host, "cat /etc/os-release").stdout
    out = {}
    for line in text.splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip().strip('"')
    return out


def python3(fleet: Fleet, host: FleetHost | str, python: str = "python3") -> tuple[str, str]:
    """(path `command -v` finds on the session PATH, version "3.X.Y") of the host's python3;
    ("", "") when there is none."""
    proc = fleet.ns_exec(
        host,
        f"p=$(command -v {python}) || exit 3; echo \"$p\"; "
        f"\"$p\" -c 'import platform; print(platform.python_version())'",
        check=False,
    )
    lines = proc.stdout.split()
    return (lines[0], lines[1]) if proc.returncode == 0 and len(lines) >= 2 else ("", "")


def nproc(fleet: Fleet, host: FleetHost | str) -> int:
    return int(fleet.ns_exec(host, "nproc").stdout.strip())
