"""`pause`: wait on the controller for `seconds`/`minutes`; a `prompt` with no terminal does not wait.

Runs without touching the host. Like Ansible, a prompt is answered only from an interactive
terminal: in CI or with `--json` (stdin not a TTY) the pause is skipped with a note, so a playbook
never hangs waiting for a person. The wait is bounded by the given time.
"""

from __future__ import annotations

import sys
import threading
import time
from datetime import datetime
from typing import Any

from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register

_MAX_SECONDS = 24 * 3600  # a typo like minutes: 6000 should not park a run for days
_PROMPT_LOCK = threading.Lock()  # hosts run in parallel: one prompt on the terminal at a time


@register
class Pause(Module):
    name = "pause"
    needs_connection = False
    args = {
        "minutes": Arg("raw"),
        "seconds": Arg("raw"),
        "prompt": Arg("str"),
        "echo": Arg("bool", default=True),
    }
    mutually_exclusive = (("minutes", "seconds"),)

    def run(self, ctx: TaskContext) -> ModuleResult:
        a = ctx.args
        seconds: float | None = None
        for key, scale in (("seconds", 1), ("minutes", 60)):
            if a.get(key) is not None:
                try:
                    seconds = float(a[key]) * scale
                except (TypeError, ValueError):
                    raise ModuleFailure(f"pause: {key} must be a number, got {a[key]!r}") from None
        if seconds is not None and not 0 <= seconds <= _MAX_SECONDS:
            raise ModuleFailure(f"pause: {seconds:g} s is outside 0..{_MAX_SECONDS} s")
        start = datetime.now()
        data: dict[str, Any] = {"start": str(start), "user_input": "", "echo": a["echo"]}
        if seconds is not None:
            time.sleep(seconds)
            stdout = f"Paused for {seconds / 60:.2f} minutes" if a.get("minutes") is not None else f"Paused for {seconds:g} seconds"
            msg = ""
        elif a.get("prompt") is not None or seconds is None:
            if sys.stdin is not None and sys.stdin.isatty():
                try:
                    with _PROMPT_LOCK:
                        data["user_input"] = input((a.get("prompt") or "Press enter to continue") + ": ")
                except EOFError:
                    pass
                msg = ""
            else:
                msg = "Not waiting for response to prompt as stdin is not interactive"
            stdout = "Paused for 0.0 minutes"
        stop = datetime.now()
        data.update(stop=str(stop), delta=int((stop - start).total_seconds()), stdout=stdout)
        return ModuleResult(msg=msg, data=data)


__all__ = ["Pause"]
