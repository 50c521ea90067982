"""Results of a run: one TaskResult per task per host, per-host stats (the recap), the whole
PlaybookResult with its exit code. JSON shapes are what `provision run --json` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provision.secrets import NO_LOG_MESSAGE, Masker

RESULTS_SCHEMA = 1
STATUSES = ("ok", "changed", "failed", "skipped", "unreachable")


@dataclass
class TaskResult:
    host: str
    task: str
    play: str
    action: str
    status: str  # ok | changed | failed | skipped | unreachable
    msg: str = ""
    result: dict[str, Any] = field(default_factory=dict)  # the registered value (masked / censored)
    changed: bool = False  # also for a failed task that changed something (counted when ignored)
    ignored: bool = False  # failed, but ignore_errors
    rescued: bool = False
    items: int = 0  # loop items, 0 without a loop
    seconds: float = 0.0
    position: str = ""  # file:line:col of the task
    no_log: bool = False
    run_once_from: str | None = None

    @property
    def failed(self) -> bool:
        return self.status == "failed" and not self.ignored

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "host": self.host,
            "play": self.play,
            "task": self.task,
            "action": self.action,
            "status": self.status,
            "seconds": round(self.seconds, 3),
            "position": self.position,
        }
        if self.msg:
            out["msg"] = self.msg
        if self.ignored:
            out["ignored"] = True
        if self.rescued:
            out["rescued"] = True
        if self.items:
            out["items"] = self.items
        if self.result:
            out["result"] = self.result
        return out


def censor(result: dict[str, Any]) -> dict[str, Any]:
    """What a no_log task shows: its status, never its arguments or output."""
    kept = {k: result[k] for k in ("changed", "failed", "skipped") if k in result}
    kept["censored"] = NO_LOG_MESSAGE
    return kept


def clean_result(result: dict[str, Any], masker: Masker, no_log: bool) -> dict[str, Any]:
    if no_log:
        out = censor(result)
        if "results" in result:
            out["results"] = [censor(r) if isinstance(r, dict) else r for r in result["results"]]
        return out
    return masker.mask({k: v for k, v in result.items() if not k.startswith("_")})


@dataclass
class HostStats:
    ok: int = 0
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    unreachable: int = 0
    ignored: int = 0
    rescued: int = 0

    def add(self, result: TaskResult) -> None:
        """Ansible's counting: `ok` includes changed tasks; an ignored failure counts as ok and
        ignored (and changed when it changed something); a rescued failure only as rescued."""
        if result.status == "unreachable":
            self.unreachable += 1
        elif result.status == "skipped":
            self.skipped += 1
        elif result.status == "failed":
            if result.ignored:
                self.ok += 1
                self.ignored += 1
                if result.changed:
                    self.changed += 1
            elif result.rescued:
                self.rescued += 1
            else:
                self.failed += 1
        else:
            self.ok += 1
            if result.status == "changed":
                self.changed += 1

    def to_json(self) -> dict[str, int]:
        return {
            "ok": self.ok,
            "changed": self.changed,
            "failed": self.failed,
            "skipped": self.skipped,
            "unreachable": self.unreachable,
            "ignored": self.ignored,
            "rescued": self.rescued,
        }


@dataclass
class PlaybookResult:
    playbook: str
    recap: dict[str, HostStats] = field(default_factory=dict)
    results: list[TaskResult] = field(default_factory=list)
    elapsed: float = 0.0
    interrupted: bool = False
    check_mode: bool = False

    @property
    def failed_hosts(self) -> list[str]:
        return [h for h, s in self.recap.items() if s.failed]

    @property
    def unreachable_hosts(self) -> list[str]:
        return [h for h, s in self.recap.items() if s.unreachable]

    @property
    def ok(self) -> bool:
        return not self.failed_hosts and not self.unreachable_hosts and not self.interrupted

    def exit_code(self) -> int:
        """0 ok; 1 a host failed; 4 a host unreachable (none failed); 130 interrupted."""
        if self.interrupted:
            return 130
        if self.failed_hosts:
            return 1
        if self.unreachable_hosts:
            return 4
        return 0

    def for_host(self, host: str) -> list[TaskResult]:
        return [r for r in self.results if r.host == host]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RESULTS_SCHEMA,
            "playbook": self.playbook,
            "check_mode": self.check_mode,
            "recap": {host: stats.to_json() for host, stats in self.recap.items()},
            "results": [r.to_json() for r in self.results],
            "elapsed": round(self.elapsed, 3),
            "interrupted": self.interrupted,
        }
