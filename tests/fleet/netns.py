"""The machinery under tests/fleet/fleet.py: network namespaces, addresses, keys, cleanup of
runs whose controller died. Nothing here knows about hosts' kinds or provision."""

from __future__ import annotations

import base64
import contextlib
import ctypes
import functools
import hashlib
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import threading
from pathlib import Path

SSHD = "/usr/sbin/sshd"
LOCK_DIR = Path("/run/provision-fleet")
# 198.18.0.0/15 (RFC 2544, benchmarking) holds 512 /24s: one per run.
_SUBNETS = [f"198.{18 + i // 256}.{i % 256}" for i in range(512)]
_MAX_HOSTS = 200  # .2 .. .201; .254 is the dead address
_MAX_FLEET = 4 * _MAX_HOSTS  # a /24 more per 200 hosts (fleet.py: more_subnets)
_DEAD_OCTET = 254
_GATEWAY_OCTET = 250  # the shared address of `gateway` hosts
_JUMP_OCTET = 251  # the jump host's address on the fleet bridge
_UNOWNED_MAC = "02:00:5e:10:00:fe"  # locally administered, owned by nobody on the bridge
# The PATH sessions get comes from sshd (no PAM, no ~/.bashrc on the hosts' tmpfs /root);
# spelled out so a pyenv shim can never come first.
SESSION_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class FleetError(RuntimeError):
    """The fleet could not be started or a helper failed; the message says which host and why."""


class ShapingUnavailable(FleetError):
    """tc netem (delay) is not in this kernel."""


def _pdeathsig() -> None:
    # Children die with the thread that spawned them, so a SIGKILLed controller leaves no sshd.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _run(
    cmd: list[str], *, input: str | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise FleetError(f"{shlex.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def _ed25519_keypair() -> tuple[bytes, str, str]:
    """(OpenSSH private key, "ssh-ed25519 AAAA...", SHA256 fingerprint) without ssh-keygen."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    blob = base64.b64decode(public.split()[1])
    fingerprint = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return private, public, fingerprint


def _encrypted_keypair(path: Path, passphrase: str) -> str:
    """An OpenSSH ed25519 key encrypted with `passphrase` (bcrypt KDF, as ssh-keygen -N does);
    returns its public line."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.BestAvailableEncryption(passphrase.encode()),
    )
    _write_private(path, private)
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    Path(f"{path}.pub").write_text(public + "\n")
    return public


def generate_keypair(path: str | os.PathLike) -> str:
    """Write a new ed25519 private key (and PATH.pub); returns its fingerprint. For "wrong key"
    tests: a key no fleet host authorizes."""
    private, public, fingerprint = _ed25519_keypair()
    _write_private(Path(path), private)
    Path(f"{path}.pub").write_text(public + "\n")
    return fingerprint


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _pid_alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped (a killed controller can linger as one)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _subnets_in_use() -> set[str]:
    """First three octets of every 198.18/15 address or route already on this machine."""
    out = (
        _run(["ip", "-o", "-4", "addr"], check=False).stdout
        + _run(["ip", "-4", "route"], check=False).stdout
    )
    used = set()
    for word in out.replace("/", " ").split():
        parts = word.split(".")
        if len(parts) == 4 and parts[0] == "198" and parts[1] in ("18", "19"):
            used.add(".".join(parts[:3]))
    return used


@functools.cache
def preflight() -> str | None:
    """Why the fleet cannot run here, or None when it can (for skip messages). Checked once."""
    if os.geteuid() != 0:
        return "fleet tests need root (network namespaces, mounts)"
    for tool in ("ip", "unshare", "nsenter", "tc"):
        if shutil.which(tool) is None:
            return f"fleet tests need `{tool}` (apt-get install iproute2 util-linux)"
    if not os.access(SSHD, os.X_OK):
        return f"fleet tests need OpenSSH's {SSHD} (apt-get install openssh-server)"
    name = f"pfprobe{os.getpid() % 100000}"
    probe = _run(["ip", "netns", "add", name], check=False)
    if probe.returncode != 0:
        return f"network namespaces are not available here: {probe.stderr.strip()}"
    _run(["ip", "netns", "del", name], check=False)
    return None


def _free_run_id() -> str:
    """4 hex digits no namespace or link on this machine uses yet. Names built from it:
    pf-RID-gpuN (netns), pfRIDbr (bridge), pfRIDh200 (veth): all within IFNAMSIZ (15)."""
    taken = (
        _run(["ip", "netns", "list"], check=False).stdout
        + _run(["ip", "-o", "link"], check=False).stdout
    )
    for _ in range(100):
        rid = secrets.token_hex(2)
        if f"pf-{rid}-" not in taken and f"pf{rid}" not in taken:
            return rid
    raise FleetError("could not find an unused fleet run id (100 tries)")


def cleanup_stale() -> list[str]:
    """Remove namespaces/bridges of runs whose controller process is gone. Returns their ids."""
    cleaned = []
    if not LOCK_DIR.is_dir():
        return cleaned
    for lock in LOCK_DIR.glob("*.json"):
        try:
            info = json.loads(lock.read_text())
        except (OSError, ValueError):
            continue
        if _pid_alive(int(info.get("pid", 0))):
            continue
        _remove_network(info["rid"], info.get("netns", []))
        if info.get("route"):
            _run(["ip", "route", "del", *info["route"].split()], check=False)
        shutil.rmtree(info.get("workdir", "/nonexistent"), ignore_errors=True)
        lock.unlink(missing_ok=True)
        cleaned.append(info["rid"])
    return cleaned


def _remove_network(rid: str, netns: list[str]) -> None:
    """Kill whatever still runs in the run's namespaces, then delete namespaces and bridge."""
    existing = set(_run(["ip", "netns", "list"], check=False).stdout.split())
    names = [n for n in existing if n.startswith(f"pf-{rid}-")] + [
        n for n in netns if n in existing
    ]
    for ns in set(names):
        for pid in _run(["ip", "netns", "pids", ns], check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
    # deleting the root-side veth ends first makes their removal synchronous (a namespace's
    # own teardown happens later, in a kernel work queue)
    links = _run(["ip", "-o", "link", "show"], check=False).stdout
    veths = {w.split("@")[0] for w in links.split() if w.startswith(f"pf{rid}h")}
    batch = [f"link del {v}" for v in veths] + [f"netns del {n}" for n in set(names)]
    if batch:
        _run(["ip", "-force", "-batch", "-"], input="\n".join(batch) + "\n", check=False)
    _run(["ip", "link", "del", f"pf{rid}br"], check=False)


_netem: bool | None = None


def _netem_available() -> bool:
    """Probe once: add a netem qdisc on a throwaway veth in a throwaway namespace."""
    global _netem
    if _netem is None:
        ns = f"pfnetem{os.getpid() % 100000}"
        _run(["ip", "netns", "add", ns], check=False)
        try:
            _run(
                ["ip", "-n", ns, "link", "add", "a", "type", "veth", "peer", "name", "b"],
                check=False,
            )
            probe = _run(
                [
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "tc",
                    "qdisc",
                    "add",
                    "dev",
                    "a",
                    "root",
                    "netem",
                    "delay",
                    "1ms",
                ],
                check=False,
            )
            _netem = probe.returncode == 0
        finally:
            _run(["ip", "netns", "del", ns], check=False)
    return _netem


def _install_sigterm_handler() -> None:
    """SIGTERM (CI timeouts, `kill`) unwinds like Ctrl-C, so atexit/finally tear the fleet down."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):

        def _exit(signum: int, frame: object) -> None:
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, _exit)
