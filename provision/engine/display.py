"""Live status for `provision run`: one line per host with its current task (not a wall of text),
failures in full as they happen, then the recap table and the elapsed time.

Everything goes to stderr (`provision.cli.common.console`); stdout is for `--json`. On a terminal
the host lines are a rich Live area; elsewhere (CI logs, pipes) only failures, debug messages,
changes with -v, and the recap are printed.
"""

from __future__ import annotations

import difflib
import threading
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from provision.engine.results import PlaybookResult, TaskResult
from provision.terminal import escape, visible

_STYLE = {
    "ok": "green",
    "changed": "yellow",
    "failed": "bold red",
    "skipped": "cyan",
    "unreachable": "bold magenta",
}
_TAIL_LINES = 20


class RichDisplay:
    def __init__(
        self, console: Console, verbosity: int = 0, live: bool | None = None, diff: bool = False
    ) -> None:
        self.console = console
        self.verbosity = verbosity
        self.use_live = console.is_terminal if live is None else live
        self.diff = diff
        self.lock = threading.Lock()
        self.hosts: dict[str, dict[str, Any]] = {}
        self.play = ""
        self._live: Live | None = None

    # -- live area -----------------------------------------------------------------------------
    def _render(self) -> Group:
        table = Table.grid(padding=(0, 2))
        table.add_column(no_wrap=True, style="bold")
        table.add_column(no_wrap=True)
        table.add_column(
            no_wrap=True, overflow="ellipsis", max_width=max(20, self.console.width - 40)
        )
        table.add_column(no_wrap=True, justify="right")
        now = time.monotonic()
        with self.lock:
            rows = list(self.hosts.items())
        for name, info in rows:
            state = info["state"]
            if state == "running":
                mark = Text("…", style="blue")
                task = Text(visible(info["task"]))
                clock = f"{now - info['since']:.1f}s"
            else:
                mark = Text(
                    "✗" if state in ("failed", "unreachable") else "✓",
                    style=_STYLE.get(state, "green"),
                )
                task = Text(state if state != "done" else "done", style=_STYLE.get(state, "dim"))
                clock = ""
            counts = f"[green]{info['ok']}[/] ok  [yellow]{info['changed']}[/] changed"
            if info["failed"]:
                counts += f"  [red]{info['failed']}[/] failed"
            table.add_row(
                escape(name), mark, task, Text.from_markup(counts + ("  " + clock if clock else ""))
            )
        return Group(Text(visible(f"PLAY {self.play}"), style="bold"), table)

    def start(self) -> None:
        if self.use_live and self._live is None:
            self._live = Live(
                self._render(),
                console=self.console,
                refresh_per_second=8,
                transient=True,
                get_renderable=self._render,
            )
            self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _print(self, *objects: Any) -> None:
        self.console.print(*objects, highlight=False)

    # -- events --------------------------------------------------------------------------------
    def play_start(self, play: Any, hosts: list[Any]) -> None:
        self.play = f"[{play.name}]"
        with self.lock:
            self.hosts = {
                h.name: {
                    "state": "waiting",
                    "task": "waiting",
                    "since": time.monotonic(),
                    "ok": 0,
                    "changed": 0,
                    "failed": 0,
                }
                for h in hosts
            }
        if not hosts:
            self._print(f"[bold]PLAY {escape(self.play)}[/] [dim]no hosts matched[/]")
        elif not self.use_live:
            self._print(f"[bold]PLAY {escape(self.play)}[/] [dim]{len(hosts)} host(s)[/]")

    def task_start(self, host: str, task: str) -> None:
        with self.lock:
            info = self.hosts.get(host)
            if info is not None:
                info.update(state="running", task=task, since=time.monotonic())

    def task_result(self, result: TaskResult, full: dict[str, Any]) -> None:
        with self.lock:
            info = self.hosts.get(result.host)
            if info is not None:
                if result.status in ("ok", "changed") or result.ignored:
                    info["ok"] += 1
                if result.status == "changed":
                    info["changed"] += 1
                if result.failed or result.status == "unreachable":
                    info["failed"] += 1
        if result.status in ("failed", "unreachable") and not result.ignored:
            self._failure(result)
        elif result.status == "failed" and result.ignored:
            self._print(
                f"[red]failed (ignored)[/] [bold]{escape(result.host)}[/] | {escape(result.task)}: {escape(result.msg)}"
            )
        elif result.action == "debug" and result.status != "skipped":
            self._debug(result)
        elif self.verbosity >= 1:
            style = _STYLE.get(result.status, "")
            self._print(
                f"[{style}]{result.status:<8}[/] [bold]{escape(result.host)}[/] | {escape(result.task)}"
                + (f" [dim]({result.seconds:.2f}s)[/]" if result.seconds >= 0.01 else "")
            )
        if self.diff and result.status == "changed" and not result.no_log:
            self._diff(result)

    def item_result(
        self, host: str, task: str, label: str, result: dict[str, Any], action: str = ""
    ) -> None:
        if self.verbosity >= 2:
            status = (
                "failed"
                if result.get("failed")
                else "skipped"
                if result.get("skipped")
                else "changed"
                if result.get("changed")
                else "ok"
            )
            self._print(
                f"  [{_STYLE[status]}]{status}[/] {escape(host)} | {escape(task)} => (item={escape(label)})"
            )

    def host_done(self, host: str) -> None:
        with self.lock:
            info = self.hosts.get(host)
            if info is not None:
                info["state"] = "failed" if info["failed"] else "done"

    def message(self, text: str) -> None:
        self._print(f"[yellow]{escape(text)}[/]")

    # -- detail --------------------------------------------------------------------------------
    def _failure(self, result: TaskResult) -> None:
        kind = "UNREACHABLE" if result.status == "unreachable" else "FAILED"
        lines = [
            f"[bold red]{kind}[/] [bold]{escape(result.host)}[/] | {escape(result.task)} [dim]{escape(result.position)}[/]"
        ]
        if result.msg:
            lines.append(f"  [red]{escape(result.msg)}[/]")
        res = result.result
        items = res.get("results") if isinstance(res, dict) else None
        sources = [r for r in items if isinstance(r, dict) and r.get("failed")] if items else [res]
        for one in sources[:5]:
            if items:
                label = one.get("_ansible_item_label", one.get(one.get("ansible_loop_var", "item")))
                lines.append(f"  item: {escape(repr(label))}: {escape(str(one.get('msg', '')))}")
            if one.get("rc") not in (None, 0):
                lines.append(f"  rc: {one['rc']}")
            for stream in ("stdout", "stderr"):
                text = one.get(stream)
                if text:
                    tail = text.rstrip("\n").splitlines()[-_TAIL_LINES:]
                    lines.append(f"  {stream}:")
                    lines.extend("    " + escape(line) for line in tail)
            if one.get("censored"):
                lines.append(f"  [dim]{escape(one['censored'])}[/]")
        self._print("\n".join(lines))

    def _debug(self, result: TaskResult) -> None:
        res = result.result
        if "msg" in res:
            value = res["msg"]
        else:
            value = {k: v for k, v in res.items() if k not in ("changed", "failed", "skipped")}
        text = value if isinstance(value, str) else _pretty(value)
        self._print(f"[bold]{escape(result.host)}[/] | {escape(result.task)}: {escape(text)}")

    def _diff(self, result: TaskResult) -> None:
        entries = result.result.get("diff") or []
        for one in entries if isinstance(entries, list) else []:
            if one.get("note") and not one.get("before") and not one.get("after"):
                self._print(
                    f"[bold]{escape(result.host)}[/] | {escape(one.get('after_header', ''))}: {escape(one['note'])}"
                )
                continue
            diff = difflib.unified_diff(
                str(one.get("before", "")).splitlines(keepends=True),
                str(one.get("after", "")).splitlines(keepends=True),
                fromfile=f"before: {one.get('before_header', '')}",
                tofile=f"after: {one.get('after_header', '')}",
            )
            out = Text()
            for line in diff:
                style = (
                    "green"
                    if line.startswith("+")
                    else "red"
                    if line.startswith("-")
                    else "cyan"
                    if line.startswith("@@")
                    else ""
                )
                out.append(visible(line.rstrip("\n")) + "\n", style=style)  # file text: no escapes
            if out:
                self._print(
                    Text.assemble(Text(visible(f"{result.host} | {result.task}") + "\n", style="bold"), out)
                )


def _pretty(value: Any) -> str:
    import json

    try:
        return json.dumps(value, indent=2, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def print_recap(console: Console, result: PlaybookResult) -> None:
    """The PLAY RECAP table: one row per host, then the elapsed time."""
    show_extra = any(s.ignored or s.rescued for s in result.recap.values())
    table = Table(
        title="PLAY RECAP" + (" (check mode: nothing was changed)" if result.check_mode else ""),
        title_justify="left",
        title_style="bold",
        show_edge=False,
        pad_edge=False,
    )
    table.add_column("host", style="bold")
    for name in ("ok", "changed", "failed", "skipped", "unreachable") + (
        ("ignored", "rescued") if show_extra else ()
    ):
        table.add_column(name, justify="right")
    for host, stats in result.recap.items():
        row = [escape(host)]
        for name, style in (
            ("ok", "green"),
            ("changed", "yellow"),
            ("failed", "red"),
            ("skipped", "cyan"),
            ("unreachable", "magenta"),
        ) + ((("ignored", "blue"), ("rescued", "blue")) if show_extra else ()):
            value = getattr(stats, name)
            row.append(f"[{style}]{value}[/]" if value else "[dim]0[/]")
        table.add_row(*row)
    console.print(table)
    note = " [yellow](interrupted)[/]" if result.interrupted else ""
    console.print(f"elapsed {result.elapsed:.2f}s{note}")
