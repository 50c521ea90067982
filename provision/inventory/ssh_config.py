"""~/.ssh/config as ssh reads it: aliases, HostName, Port, User, IdentityFile, ProxyJump.

paramiko's SSHConfig does the matching (Host/Match blocks, first value wins, %h tokens); this
file only turns its answer into Host fields, never overriding what the user wrote elsewhere.
paramiko is imported only when there is a config with something in it: importing it costs
~0.2 s, which a command that goes through the OpenSSH client (staging) otherwise never pays.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from provision.errors import ConfigError
from provision.inventory.model import Host
from provision.inventory.targets import AddressError, parse_port

if TYPE_CHECKING:  # imported where a config is parsed: paramiko costs ~0.2 s of a CLI start
    import paramiko

DEFAULT_PATH = "~/.ssh/config"
_cache: dict[tuple[str, int, int], paramiko.SSHConfig | None] = {}


@dataclass(frozen=True)
class SSHConfigEntry:
    hostname: str
    port: int | None
    user: str | None
    identity_files: tuple[str, ...]
    proxy_jump: str | None
    explicit: bool  # a Host line names it, or HostName rewrites it: it is an alias, not a DNS name


def config_path(path: str | None) -> str | None:
    """The file to read: `path` (must exist) or ~/.ssh/config when there is one."""
    if path:
        full = os.path.expanduser(path)
        if not os.path.exists(full) or os.path.isdir(full):  # /dev/null is fine: "no config"
            raise ConfigError(f"ssh config file {path} does not exist (--ssh-config)")
        return full
    full = os.path.expanduser(DEFAULT_PATH)
    return full if os.path.isfile(full) else None


def _load(full: str) -> paramiko.SSHConfig:
    st = os.stat(full)
    key = (full, st.st_mtime_ns, st.st_size)
    config = _cache.get(key)
    if config is None:
        import paramiko

        try:
            config = paramiko.SSHConfig.from_path(full)
        except (paramiko.ssh_exception.ConfigParseError, OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"ssh config {full}: {exc}") from None
        _cache[key] = config
    return config


def lookup(name: str, path: str | None = None) -> SSHConfigEntry | None:
    """What ssh would use for `name`; None when there is no ssh config file at all."""
    full = config_path(path)
    if full is None or os.stat(full).st_size == 0:  # an empty file (/dev/null): no config
        return None
    config = _load(full)
    try:
        found = config.lookup(name)
    except Exception as exc:  # paramiko raises bare errors for bad Match/tokens
        raise ConfigError(f"ssh config {full}: cannot resolve {name!r}: {exc}") from None
    port = None
    if "port" in found:
        try:
            port = parse_port(found["port"], f"{full} (Host {name})")
        except AddressError as exc:
            raise ConfigError(str(exc)) from None
    literal = {p for p in config.get_hostnames() if not any(c in p for c in "*?!")}
    hostname = found.get("hostname", name)
    jump = found.get("proxyjump")
    return SSHConfigEntry(
        hostname=hostname,
        port=port,
        user=found.get("user"),
        identity_files=tuple(found.get("identityfile", [])),
        proxy_jump=None if not jump or jump.lower() == "none" else jump,
        explicit=name in literal or hostname != name,
    )


def is_alias(name: str, path: str | None = None) -> bool:
    entry = lookup(name, path)
    return entry is not None and entry.explicit


def apply_ssh_config(host: Host, path: str | None = None) -> Host:
    """`host` with the gaps filled from ssh config; values already set are kept."""
    if host.local:
        return host
    entry = lookup(host.connect_address, path)
    if entry is None:
        return host
    # Only keys that exist: ssh falls through a missing default IdentityFile, and so do we.
    key_file = next(
        (k for k in entry.identity_files if os.path.isfile(os.path.expanduser(k))), None
    )
    return dataclasses.replace(
        host,
        address=entry.hostname,
        port=host.port if host.port is not None else entry.port,
        user=host.user or entry.user,
        key_file=host.key_file or key_file,
        proxy_jump=host.proxy_jump or entry.proxy_jump,
    )
