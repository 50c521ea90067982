"""Which Python runs host-side work that needs torch: the managed env when there is one."""

from __future__ import annotations

from typing import Any

from provision.connection.base import Connection


def managed_python(connection: Connection, facts: dict[str, Any], env: str | None = None) -> str | None:
    """The managed environment's python on the host, or None when none is installed there."""
    from provision.install.environment import ManagedEnv, default_env_path

    state = ManagedEnv(connection, env or default_env_path(facts)).state()
    return f"{state.path}/bin/python" if state.has_python else None
