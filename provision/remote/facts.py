"""Gather host facts in one agent round trip."""

from __future__ import annotations

from typing import Any

from provision.remote.agent import Agent


def gather_facts(agent: Agent) -> dict[str, Any]:
    """The agent's facts for this host; the inventory's `data_dir` var overrides the choice."""
    host = agent.connection.host
    request: dict[str, Any] = {}
    if host.vars.get("data_dir"):
        request["data_dir"] = str(host.vars["data_dir"])
    return agent.call("facts", request)
