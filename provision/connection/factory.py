"""Pick the connection for a host: local for localhost, SSH otherwise."""

from __future__ import annotations

from provision.connection.base import Connection, ConnectOptions
from provision.inventory.model import Host


def connect(host: Host, options: ConnectOptions) -> Connection:
    """A lazily-opened connection; nothing crosses the network until the first command."""
    if host.local:
        from provision.connection.local import LocalConnection

        return LocalConnection(host)
    from provision.connection.ssh import SSHConnection

    return SSHConnection(host, options)
