"""Pick the connection for a host: local for localhost, SSH otherwise."""

from __future__ import annotations

import dataclasses
import logging

from provision.connection.base import Connection, ConnectOptions
from provision.connection.local import LocalConnection
from provision.connection.openssh_args import openssh_unusable
from provision.inventory.model import Host

log = logging.getLogger("provision.ssh")


def connect(host: Host, options: ConnectOptions, *, data_plane: bool = False) -> Connection:
    """A lazily-opened connection; nothing crosses the network until the first command.

    `data_plane`: bulk streams (staging) go through the OpenSSH client where it can stand in
    for paramiko (provision/connection/openssh.py). The control plane does too when
    connections are kept across runs (`options.persist`, the CLI's --persist, default 60 s):
    its master then outlives the run (connection/openssh_kept.py); the data plane's does not.
    Otherwise SSHConnection."""
    if host.local:
        return LocalConnection(host)
    if (options.default_user and not host.user) or (options.default_key_file and not host.key_file):
        host = dataclasses.replace(
            host,
            user=host.user or options.default_user,
            key_file=host.key_file or options.default_key_file,
        )
    if data_plane and options.persist:
        # a stage's bulk stream keeps its own master for the run, ended with it: its handshake
        # is a sliver of a stage, and a kept master would outlive a Ctrl-C'd stage
        options = dataclasses.replace(options, persist=0.0)
    if data_plane or options.persist > 0:
        reason = openssh_unusable(host, options)
        if reason is None:
            # start-up time: the OpenSSH data plane only for a staging connection
            from provision.connection.openssh import OpenSSHConnection

            return OpenSSHConnection(host, options)
        log.debug("%s: paramiko (%s plane): %s", host.name, "data" if data_plane else "control", reason)
    # start-up time: paramiko (~100 ms) only for an SSH host, never for localhost
    from provision.connection.ssh import SSHConnection

    return SSHConnection(host, options)


def open_early(hosts: list[Host], options: ConnectOptions, limit: int) -> dict[str, Connection]:
    """Data-plane connections to the first `limit` hosts, their handshakes begun now in the
    background (OpenSSH; a paramiko connection opens on its first command as always), so a
    command's own imports and listing overlap them. The caller hands them on or closes them."""
    opened: dict[str, Connection] = {}
    for host in hosts[: max(0, limit)]:
        conn = connect(host, options, data_plane=True)
        getattr(conn, "prestart", lambda: None)()
        opened[host.name] = conn
    return opened
