"""The `ssh` command lines of OpenSSHConnection, and when OpenSSH cannot stand in for paramiko.

Pure functions of Host + ConnectOptions (plus the connection's private directory), so each
policy can be checked without a host. The forced options go twice: on the command line for
the target, and into a generated ssh_config (`-F`) whose `Host *` block comes before the
user's own config, so ProxyJump hops (separate `ssh -W` processes that get `-F` but not our
`-o` options) verify host keys and never prompt the same way.
"""

from __future__ import annotations

import base64
import functools
import logging
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

from provision.connection.base import ConnectOptions
from provision.connection.hostkey_files import project_known_hosts, user_known_hosts
from provision.inventory.model import Host
from provision.paths import state_dir, write_atomic

POLICIES = ("strict", "accept-new", "off")
# AES-GCM first: with AES-NI it costs ssh about half the CPU per MB of chacha20 (the default);
# `^` puts them at the head of the client's defaults, so any server still finds a match.
CIPHERS = "^aes128-gcm@openssh.com,aes256-gcm@openssh.com"
# curve25519 first: OpenSSH 9.x's default, the sntrup761 post-quantum hybrid, costs ~0.12 s of
# CPU per handshake on each end (connect 0.27 s -> 0.14 s here); it is also what paramiko, the
# other transport, negotiates. A user's own Ciphers / KexAlgorithms in their ssh config win.
KEX = "^curve25519-sha256,curve25519-sha256@libssh.org"
MIN_VERSION = (8, 5)  # KnownHostsCommand (identity()), accept-new, `^` cipher lists
CLIENT_ENV = "PROVISION_SSH_CLIENT"  # "paramiko" forces the paramiko transport everywhere


def quote_path(path: str | os.PathLike[str]) -> str:
    """One word for ssh's option parser: double-quoted (spaces), `%` escaped (ssh expands %d,
    %h... in known-hosts file names)."""
    text = str(path).replace("%", "%%")
    if '"' in text:
        raise ValueError(f"a path with a double quote cannot be passed to ssh: {text!r}")
    return f'"{text}"'


def known_hosts_options(options: ConnectOptions, private_dir: str) -> list[str]:
    """StrictHostKeyChecking + UserKnownHostsFile as hostkeys.apply_policy does it for paramiko."""
    policy = options.known_hosts
    if policy not in POLICIES:
        raise ValueError(f"--known-hosts must be one of {', '.join(POLICIES)}, got {policy!r}")
    if policy == "off":
        throwaway = os.path.join(private_dir, "known_hosts")
        return ["StrictHostKeyChecking=no", f"UserKnownHostsFile={quote_path(throwaway)}"]
    # accept-new records first-seen keys in the FIRST file: provision's, never the user's
    files = [project_known_hosts(), user_known_hosts(), *options.extra_known_hosts]
    check = "yes" if policy == "strict" else "accept-new"
    return [
        f"StrictHostKeyChecking={check}",
        "UserKnownHostsFile=" + " ".join(quote_path(f) for f in files),
        "HashKnownHosts=no",  # same lines as paramiko writes: one file, both transports
    ]


def _verbose() -> bool:
    return logging.getLogger("provision").getEffectiveLevel() <= logging.DEBUG


def forced_options(options: ConnectOptions, private_dir: str) -> list[str]:
    """`Key=value` options for every hop: never prompt, bounded connect, live-link checks."""
    verbose = _verbose()
    return [
        "BatchMode=yes",  # nothing may ever wait on a terminal
        f"ConnectTimeout={max(1, math.ceil(options.connect_timeout))}",
        f"ServerAliveInterval={max(1, round(options.keepalive))}",
        f"ServerAliveCountMax={max(1, int(options.keepalive_count))}",
        *known_hosts_options(options, private_dir),
        "UpdateHostKeys=no",  # the user's known_hosts is theirs
        *(f"{key}={value}" for key, value in preferred_algorithms(options)),
        f"LogLevel={'VERBOSE' if verbose else 'ERROR'}",
    ]


def user_configs(options: ConnectOptions) -> list[str]:
    """The ssh config files ssh would read for the user: --ssh-config, else ~/.ssh/config and
    /etc/ssh/ssh_config (those that exist)."""
    if options.ssh_config:
        paths = [options.ssh_config]
    else:
        paths = [os.path.expanduser("~/.ssh/config"), "/etc/ssh/ssh_config"]
    return [os.path.abspath(p) for p in paths if os.path.isfile(p)]


_sets_cache: dict[tuple[str, str, int, int], bool] = {}


def _user_sets(keyword: str, configs: list[str]) -> bool:
    """Whether any of the user's config files sets `keyword` (a line starting with it, in any
    Host block): then their choice stands, not ours. Every ssh command line asks, so each file
    is read once per version (path, mtime, size)."""
    pattern = re.compile(rb"^\s*" + keyword.encode() + rb"[\s=]", re.I | re.M)
    for path in configs:
        try:
            st = os.stat(path)
            key = (keyword, path, st.st_mtime_ns, st.st_size)
            if key not in _sets_cache:
                with open(path, "rb") as fh:
                    _sets_cache[key] = bool(pattern.search(fh.read()))
        except OSError:
            continue
        if _sets_cache[key]:
            return True
    return False


def preferred_algorithms(options: ConnectOptions) -> list[tuple[str, str]]:
    """Ciphers / KexAlgorithms put first, unless the user's ssh config chooses them."""
    configs = user_configs(options)
    wanted = [("Ciphers", CIPHERS), ("KexAlgorithms", KEX)]
    return [(key, value) for key, value in wanted if not _user_sets(key, configs)]


def config_text(options: ConnectOptions, private_dir: str) -> str:
    """The generated ssh_config: the forced options first (first value wins in ssh_config),
    then the user's config for aliases (HostName, User, IdentityFile, ProxyJump)."""
    lines = ["Host *"]
    lines += ["  " + option.replace("=", " ", 1) for option in forced_options(options, private_dir)]
    if options.key_file:  # --key: also a jump host's key, as for paramiko's gateway
        lines.append(f"  IdentityFile {quote_path(os.path.expanduser(options.key_file))}")
    for path in user_configs(options):  # not /dev/null: ssh refuses a world-writable include
        lines.append(f"  Include {quote_path(path)}")
    return "\n".join(lines) + "\n"


def target_args(host: Host, options: ConnectOptions, private_dir: str) -> list[str]:
    """Everything before the destination, for the target (the master and each session)."""
    args = ["-F", os.path.join(private_dir, "config")]
    user = host.user or options.user
    if user:
        args += ["-l", user]
    port = host.port or options.port
    if port:
        args += ["-p", str(port)]
    key = host.key_file or options.key_file
    if key:
        args += ["-i", os.path.expanduser(key), "-o", "IdentitiesOnly=yes"]
    if host.proxy_jump:
        args += ["-J", host.proxy_jump]  # aliases resolve through the same -F config
    for option in forced_options(options, private_dir):
        args += ["-o", option]
    args += ["-o", "ClearAllForwardings=yes", "-T"]  # a user's LocalForward must not bind here
    return args


def master_argv(host: Host, options: ConnectOptions, private_dir: str, persist: float = 0.0) -> list[str]:
    """The ControlMaster, in the foreground (provision/connection/openssh_master.py): it binds
    the control socket once authenticated, and records the key the host offered. With
    `persist` > 0 it goes to the background once authenticated and stays that many seconds
    after its last session (a kept master: connection/openssh_kept.py)."""
    socket = os.path.join(private_dir, "m")
    record = os.path.join(private_dir, "record-key")
    keep = f"{max(1, math.ceil(persist))}" if persist > 0 else "no"
    return [
        "ssh", "-N", "-S", socket, "-o", "ControlMaster=yes", "-o", f"ControlPersist={keep}",
        # the offered key, for identity(); prints nothing, so the known_hosts files decide
        "-o", f"KnownHostsCommand={record} %t %K",
        # its stderr is master.log: INFO says why a link died ("Timeout, server not responding")
        *(["-o", "LogLevel=INFO"] if not _verbose() else []),
        *target_args(host, options, private_dir), "--", host.connect_address,
    ]  # fmt: skip


def session_argv(host: Host, options: ConnectOptions, private_dir: str, command: str) -> list[str]:
    socket = os.path.join(private_dir, "m")
    return [
        "ssh", "-S", socket, "-o", "ControlMaster=no",
        *target_args(host, options, private_dir), "--", host.connect_address, command,
    ]  # fmt: skip


def control_argv(host: Host, options: ConnectOptions, private_dir: str, op: str) -> list[str]:
    """`ssh -O check|exit` on the master."""
    socket = os.path.join(private_dir, "m")
    return ["ssh", "-S", socket, "-F", os.devnull, "-O", op, "--", host.connect_address]


# ssh runs it twice per handshake, waiting each time: `${0%/*}`, not $(dirname), forks nothing
RECORD_KEY_SCRIPT = '#!/bin/sh\nprintf "%s %s\\n" "$1" "$2" > "${0%/*}/hostkey"\nexit 0\n'


# -- eligibility ---------------------------------------------------------------------------------
def key_is_encrypted(path: str | os.PathLike[str]) -> bool:
    """A passphrase-protected private key (OpenSSH or PEM format). BatchMode cannot ask for it."""
    text = Path(path).read_text(errors="replace")
    if "ENCRYPTED" in text:  # PEM: Proc-Type: 4,ENCRYPTED or BEGIN ENCRYPTED PRIVATE KEY
        return True
    body = re.search(r"-----BEGIN OPENSSH PRIVATE KEY-----(.*?)-----END", text, re.S)
    if not body:
        return False
    try:
        blob = base64.b64decode("".join(body.group(1).split()))
    except ValueError:
        return False
    magic = b"openssh-key-v1\0"
    if not blob.startswith(magic) or len(blob) < len(magic) + 4:
        return False
    size = int.from_bytes(blob[len(magic) : len(magic) + 4], "big")
    cipher = blob[len(magic) + 4 : len(magic) + 4 + size]
    return cipher != b"none"


def client_version() -> tuple[int, int] | None:
    """(major, minor) of the `ssh` on PATH, or None when there is none."""
    path = shutil.which("ssh")
    return None if path is None else _version_of(path)


@functools.cache
def _version_of(path: str) -> tuple[int, int] | None:
    """`ssh -V`, remembered on disk per binary (path, mtime, size): running it costs every CLI
    start ~30 ms before the handshake can begin; an upgraded ssh is a new key."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = f"{os.path.realpath(path)}\t{st.st_mtime_ns}\t{st.st_size}\t"
    memo = None
    try:
        memo = state_dir() / "ssh-version"
        said = memo.read_text()
        if said.startswith(key):
            major, minor = said[len(key) :].strip().split(".")
            return int(major), int(minor)
    except (OSError, ValueError):
        pass
    try:
        done = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"OpenSSH_(\d+)\.(\d+)", done.stderr + done.stdout)
    version = (int(found.group(1)), int(found.group(2))) if found else (0, 0)
    if memo is not None and found:
        try:
            write_atomic(memo, f"{key}{version[0]}.{version[1]}\n")
        except OSError:
            pass  # a read-only state dir: ask again next time
    return version


def openssh_unusable(host: Host, options: ConnectOptions) -> str | None:
    """Why the OpenSSH client cannot run this host's data plane (then paramiko does), or None."""
    if os.environ.get(CLIENT_ENV, "").strip().lower() == "paramiko":
        return f"{CLIENT_ENV}=paramiko"
    version = client_version()
    if version is None:
        return "no ssh binary on PATH"
    if version < MIN_VERSION:
        return f"OpenSSH {version[0]}.{version[1]} is older than {MIN_VERSION[0]}.{MIN_VERSION[1]}"
    if host.vars.get("password_env") or options.password_env:
        return "a password is configured (ssh would have to prompt for it)"
    if host.vars.get("passphrase_env") or options.passphrase_env:
        return "a key passphrase is configured (ssh would have to prompt for it)"
    if options.known_hosts not in POLICIES:
        return f"unknown --known-hosts policy {options.known_hosts!r}"
    key = host.key_file or options.key_file
    if key:
        path = os.path.expanduser(key)
        try:
            if key_is_encrypted(path):
                return f"the private key {key} is encrypted"
        except OSError:
            return f"the private key {key} cannot be read"  # paramiko's path says why
    return None
