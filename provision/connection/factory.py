"""Pick the connection for a host: local for localhost, SSH otherwise."""

from __future__ import annotations

import dataclasses

from provision.connection.base import Connection, ConnectOptions
from provision.inventory.model import Host


def connect(host: Host, options: ConnectOptions) -> Connection:
    """A lazily-opened connection; nothing crosses the network until the first command."""
    if host.local:
        from provision.connection.local import LocalConnection

        return LocalConnection(host)
    from provision.connection.ssh import SSHConnection

    if (options.default_user and not host.user) or (options.default_key_file and not host.key_file):
        host = dataclasses.replace(
            host,
            user=host.user or options.default_user,
            key_file=host.key_file or options.default_key_file,
        )
    return SSHConnection(host, options)
