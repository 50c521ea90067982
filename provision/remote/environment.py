"""Which Python runs host-side work that needs torch: the managed env when there is one."""

from __future__ import annotations

from typing import Any

from provision.connection.base import Connection
from provision.remote.become import wanted_by_host


def managed_python(connection: Connection, facts: dict[str, Any], env: str | None = None) -> str | None:
    """The managed environment's python on the host, or None when none is installed there.
    With no `env`: the default places (the login user's, the system location `install --become`
    uses, or the host var `provision_env_root`; provision/install/environment.py), so an env
    installed as root is found by commands run without become, and the other way round."""
    from provision.install.environment import (  # start-up time: facts and health need no install module (this file is imported by every command)
        ManagedEnv,
        env_candidates,
        find_env,
    )

    if env:
        state = ManagedEnv(connection, env).state()
        return f"{state.path}/bin/python" if state.has_python else None
    found = find_env(connection, env_candidates(facts, connection.host.vars, wanted_by_host(connection)))
    return f"{found}/bin/python" if found else None
