"""The playbook engine: load + validate (playbook.py), templating, variables, runner, results."""

from __future__ import annotations

from provision.engine.playbook import PlaybookError, load_playbook
from provision.engine.results import HostStats, PlaybookResult, TaskResult
from provision.engine.runner import RunOptions, run_playbook

__all__ = [
    "HostStats",
    "PlaybookError",
    "PlaybookResult",
    "RunOptions",
    "TaskResult",
    "load_playbook",
    "run_playbook",
]
