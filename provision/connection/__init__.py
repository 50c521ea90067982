"""Run commands and move files on ONE host: over SSH (Fabric) or locally."""

from provision.connection.base import CommandResult, Connection, ConnectOptions

__all__ = ["CommandResult", "Connection", "ConnectOptions"]
