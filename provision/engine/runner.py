"""Plays × hosts: the runner.

Hosts run in parallel (at most `forks` at once), each through its own tasks in order over its
one connection (the "free" strategy: a fast host never waits for a slow one). Coordination is
only where the semantics need it: `run_once` (the first host runs, the others take its result),
`any_errors_fatal` and `meta: end_play` (every host stops before its next task), Ctrl-C (every
host stops before its next task; the recap shows what ran). Handlers run once per host at the
end of each section (pre_tasks, roles + tasks, post_tasks) when notified, in the order they are
defined. A host that fails stops; the others go on. Failed hosts sit out later plays.
"""

from __future__ import annotations

import threading
import time
from collections import ChainMap
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from provision.connection.base import Connection, ConnectOptions
from provision.engine.dynamic_inventory import add_dynamic_group, add_dynamic_host, refresh_groups
from provision.engine.play_setup import batches, prompt_values
from provision.engine.playbook import (
    DELEGATE_LOCAL,
    Block,
    Include,
    Meta,
    Node,
    Play,
    Playbook,
    PlaybookError,
    Task,
    find_runtime_tasks_file,
    load_playbook,
    load_tasks_at_runtime,
)
from provision.engine.results import HostStats, PlaybookResult, TaskResult, clean_result
from provision.engine.templating import (
    OMIT,
    Templar,
    TemplateError,
    UndefinedVariableError,
    to_bool,
)
from provision.engine.variables import HostVars, VariableManager
from provision.engine.yamlpos import load_yaml
from provision.errors import (
    AuthError,
    ConfigError,
    HostError,
    HostKeyError,
    UnreachableError,
)
from provision.inventory.model import Host, Inventory
from provision.modules.base import (
    ArgError,
    ModuleFailure,
    ModuleResult,
    TaskContext,
    normalize_args,
    secret_arg_values,
)
from provision.paths import bundle_dir
from provision.secrets import Masker, collect_secrets

_UNREACHABLE = (UnreachableError, AuthError, HostKeyError)
_DEFAULT_DELAY = 5


@dataclass
class RunOptions:
    forks: int = 32
    check: bool = False
    diff: bool = False
    tags: frozenset[str] = frozenset()
    skip_tags: frozenset[str] = frozenset()
    limit: str | None = None
    connect: ConnectOptions = field(default_factory=ConnectOptions)
    extra_vars: dict[str, Any] = field(default_factory=dict)
    verbosity: int = 0


class Stop(Exception):
    """Internal: this host stops running tasks (failure, end_host, abort)."""


def tags_selected(tags: frozenset[str], only: frozenset[str], skip: frozenset[str]) -> bool:
    """Ansible's tag rules, including `always`, `never`, `tagged`, `untagged` and `all`."""
    task_tags = set(tags) or {"untagged"}
    only = only or frozenset({"all"})
    if "always" in task_tags:
        run = True
    elif "all" in only and "never" not in task_tags:
        run = True
    elif not task_tags.isdisjoint(only):
        run = True
    elif "tagged" in only and task_tags != {"untagged"} and "never" not in task_tags:
        run = True
    else:
        run = False
    if run and skip:
        if "all" in skip:
            if "always" not in task_tags or "always" in skip:
                run = False
        elif not task_tags.isdisjoint(skip):
            run = False
        elif "tagged" in skip and task_tags != {"untagged"}:
            run = False
    return run


class HostRuntime:
    """One host for the whole run: its connection (opened on first use, one thread at a time),
    agent, accumulated variables and whether it failed."""

    def __init__(
        self,
        host: Host,
        connect_options: ConnectOptions,
        variables: HostVars,
        connections: Mapping[str, Connection] | None = None,
    ) -> None:
        self.host = host
        self.options = connect_options
        self.vars = variables
        self._connections: dict[str, Connection] = {}
        if connections and host.name in connections:
            self._connections["default"] = connections[host.name]
            self._borrowed = True
        else:
            self._borrowed = False
        self._agent: Any = None
        self.failed = False
        self.unreachable = False
        self.facts_gathered = False
        self.run_count: dict[int, int] = {}

    def connection(self, local: bool = False, user: str | None = None) -> Connection:
        key = "local" if local else "default"
        conn = self._connections.get(key)
        if conn is None:
            if local:
                from provision.connection.local import LocalConnection

                conn = LocalConnection(self.host)
            else:
                from provision.connection.factory import connect

                host = self.host if not user or self.host.user else replace(self.host, user=user)
                conn = connect(host, self.options)
            self._connections[key] = conn
        return conn

    def agent(self, connection: Connection, become: bool | None = None) -> Any:
        """The host's agent; `become`: the current play's/task's (the agent runs as root then)."""
        if self._agent is None or self._agent.connection is not connection:
            from provision.remote.agent import Agent

            self._agent = Agent(connection)
        self._agent.become = become
        return self._agent

    def close(self) -> None:
        for key, conn in list(self._connections.items()):
            if key == "default" and self._borrowed:
                continue
            try:
                conn.close()
            except Exception:  # closing must never hide the run's result
                pass
        self._connections.clear()


class _RunOnce:
    """run_once: the first host (in play order) still running the play runs the task; the
    others wait for and take its result."""

    def __init__(self, order: list[str]) -> None:
        self.order = order
        self.active = set(order)
        self.cond = threading.Condition()
        self.claimed: set[tuple[int, int]] = set()
        self.shared: dict[tuple[int, int], Any] = {}

    def enter(
        self, key: tuple[int, int], host: str, stopped: Callable[[], bool]
    ) -> tuple[bool, Any]:
        with self.cond:
            while True:
                if key in self.shared:
                    return False, self.shared[key]
                if key not in self.claimed:
                    first = next((h for h in self.order if h in self.active), host)
                    if first == host:
                        self.claimed.add(key)
                        return True, None
                if stopped():
                    raise Stop()
                self.cond.wait(0.2)

    def publish(self, key: tuple[int, int], value: Any) -> None:
        with self.cond:
            self.shared[key] = value
            self.cond.notify_all()

    def done(self, host: str) -> None:
        with self.cond:
            self.active.discard(host)
            self.cond.notify_all()


class _PlayState:
    def __init__(self, play: Play, hosts: list[Host]) -> None:
        self.play = play
        self.hosts = hosts
        self.abort = threading.Event()  # any_errors_fatal / end_play / end_batch
        self.end_play = False  # end_play (or any_errors_fatal) also skips the later batches
        self.batch_ended = False  # meta: end_batch ends only this batch
        self.run_once = _RunOnce([h.name for h in hosts])
        # any_errors_fatal plays run in lockstep (Ansible's linear strategy): no host starts
        # task k+1 before every host still in the play has finished task k, so one failure
        # stops everyone before the next task.
        self.lockstep = play.any_errors_fatal
        self.completed = {h.name: 0 for h in hosts}

    def wait_turn(self, host: str, step: int, stopped: Callable[[], bool]) -> None:
        cond = self.run_once.cond
        with cond:
            while any(self.completed[h] < step for h in self.run_once.active if h != host):
                if stopped():
                    return
                cond.wait(0.2)

    def step_done(self, host: str) -> None:
        with self.run_once.cond:
            self.completed[host] += 1
            self.run_once.cond.notify_all()


class _HostPlay:
    """One host's walk through one play."""

    def __init__(self, runner: PlaybookRunner, rt: HostRuntime, pstate: _PlayState) -> None:
        self.runner = runner
        self.rt = rt
        self.pstate = pstate
        self.play = pstate.play
        self.failed = False
        self.last_failure: TaskResult | None = None
        self.rescue_depth = 0
        self.notified: list[str] = []  # handler names/topics, in notification order
        self.loop_scope: list[Mapping[str, Any]] = []  # include_tasks loop vars
        self.steps = 0  # tasks started (lockstep plays)

    # -- helpers -------------------------------------------------------------------------------
    @property
    def templar(self) -> Templar:
        return self.runner.templar

    def stopped(self) -> bool:
        return self.runner.stop.is_set() or self.pstate.abort.is_set()

    def vars_for(self, node: Node | None, loop_vars: Mapping[str, Any] | None = None) -> ChainMap:
        scope: dict[str, Any] = {}
        for layer in self.loop_scope:
            scope.update(layer)
        if loop_vars:
            scope.update(loop_vars)
        return self.runner.vm.task_vars(self.rt.vars, node, scope or None)

    def connection(self) -> Connection:
        return self.rt.connection(local=self.play.connection == "local", user=self.play.remote_user)

    def record(self, result: TaskResult, full: dict[str, Any] | None = None) -> None:
        self.runner.record(result, full or {})

    # -- sections ------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            if self.play.gather_facts and not self.rt.facts_gathered:
                self.gather_facts()
            for section in (
                self.play.pre_tasks,
                self.play.roles + self.play.tasks,
                self.play.post_tasks,
            ):
                self.run_nodes(section)
                self.flush_handlers()
                if self.failed or self.stopped():
                    break
        except Stop:
            pass
        finally:
            if self.failed:
                self.rt.failed = True  # sits out the later plays, as in Ansible
            if (
                self.failed
                and self.play.force_handlers
                and self.notified
                and not self.runner.stop.is_set()
            ):
                self.failed_handlers()
            self.pstate.run_once.done(self.rt.host.name)

    def failed_handlers(self) -> None:
        self.failed = False
        try:
            self.flush_handlers()
        except Stop:
            pass
        self.failed = True

    def gather_facts(self) -> None:
        from provision.modules.control import gather_facts

        start = time.monotonic()
        self.runner.display.task_start(self.rt.host.name, "Gathering Facts")
        conn = self.connection()
        ctx = TaskContext(
            host=self.rt.host,
            connection=conn,
            args={},
            vars=self.vars_for(None),
            agent_factory=lambda: self.rt.agent(
                conn, self._bool(self.play.become, self.play, self.vars_for(None))
            ),
            task_name="Gathering Facts",
        )
        result = TaskResult(
            host=self.rt.host.name,
            task="Gathering Facts",
            play=self.play.name,
            action="gather_facts",
            status="ok",
            position=str(self.play.pos),
        )
        try:
            facts = gather_facts(ctx)
        except _UNREACHABLE as exc:
            self.unreachable(result, exc)
            return
        except (HostError, ModuleFailure, OSError) as exc:
            result.status = "failed"
            result.msg = f"gathering facts failed: {getattr(exc, 'detail', None) or exc}"
            result.seconds = time.monotonic() - start
            self.record(result)
            self.fail(result, fatal=self.play.any_errors_fatal)
            return
        self.rt.vars.facts.update(facts)
        self.rt.facts_gathered = True
        self.runner.masker.add(collect_secrets([facts]))
        result.seconds = time.monotonic() - start
        self.record(result)

    def unreachable(self, result: TaskResult, exc: BaseException) -> None:
        result.status = "unreachable"
        result.msg = getattr(exc, "detail", None) or str(exc)
        self.record(result)
        self.rt.unreachable = True
        self.failed = True
        raise Stop()

    def fail(self, result: TaskResult, fatal: bool) -> None:
        """A task failed for this host (not ignored)."""
        self.failed = True
        self.last_failure = result
        if self.rescue_depth == 0:
            if fatal:
                self.pstate.abort.set()
            raise Stop()

    # -- nodes ---------------------------------------------------------------------------------
    def run_nodes(self, nodes: list[Node]) -> None:
        for node in nodes:
            if self.failed or self.stopped():
                return
            if isinstance(node, Task):
                self.run_task(node)
            elif isinstance(node, Block):
                self.run_block(node)
            elif isinstance(node, Include):
                self.run_include(node)
            elif isinstance(node, Meta):
                self.run_meta(node)

    def included(self, node: Node, action: str, status: str = "ok") -> None:
        """Ansible counts each include (per loop item) in the recap: ok, or skipped."""
        if tags_selected(node.tags, self.runner.options.tags, self.runner.options.skip_tags):
            name = node.name or action
            self.record(
                TaskResult(
                    host=self.rt.host.name,
                    task=name,
                    play=self.play.name,
                    action=action,
                    status=status,
                    position=str(node.pos),
                )
            )

    def run_block(self, block: Block) -> None:
        if block.when_once:  # include_role: decided once, counted like a task
            try:
                if block.when and not self.templar.condition(
                    list(block.when), self.vars_for(block)
                ):
                    self.included(block, "include_role", "skipped")
                    return
            except TemplateError as exc:
                self.task_error(block, block.name or "block", "include_role", exc)
                return
            self.included(block, "include_role")
        if block.rescue:
            self.rescue_depth += 1
        try:
            self.run_nodes(block.block)
        finally:
            if block.rescue:
                self.rescue_depth -= 1
        if self.failed and block.rescue and not self.stopped():
            if self.last_failure is not None:
                self.last_failure.rescued = True
            self.failed = False
            self.rt.vars.set_facts["ansible_failed_result"] = (
                self.last_failure.result if self.last_failure else {}
            )
            self.rt.vars.set_facts["ansible_failed_task"] = failed_task_var(self.last_failure)
            self.run_nodes(block.rescue)
        if block.always and not self.runner.stop.is_set():
            was_failed = self.failed
            self.failed = False
            self.run_nodes(block.always)
            self.failed = self.failed or was_failed
        if self.failed and self.rescue_depth == 0:
            if self.last_failure is not None and (
                block.any_errors_fatal or self.play.any_errors_fatal
            ):
                self.pstate.abort.set()
            raise Stop()

    def run_meta(self, node: Meta) -> None:
        if not tags_selected(node.tags, self.runner.options.tags, self.runner.options.skip_tags):
            return
        if node.when and not self.templar.condition(list(node.when), self.vars_for(node)):
            return
        if node.action == "flush_handlers":
            self.flush_handlers()
        elif node.action == "end_host":
            raise Stop()
        elif node.action in ("end_play", "end_batch"):
            self.pstate.end_play = self.pstate.end_play or node.action == "end_play"
            self.pstate.batch_ended = node.action == "end_batch" and not self.pstate.end_play
            self.pstate.abort.set()
            raise Stop()
        elif node.action == "clear_host_errors":
            self.failed = False

    def run_include(self, node: Include) -> None:
        if not tags_selected(node.tags, self.runner.options.tags, self.runner.options.skip_tags):
            return
        name = node.display_name
        variables = self.vars_for(node)
        try:
            if node.when and not self.templar.condition(list(node.when), variables):
                result = TaskResult(
                    host=self.rt.host.name,
                    task=name,
                    play=self.play.name,
                    action="include_tasks",
                    status="skipped",
                    position=str(node.pos),
                )
                self.record(result)
                return
            items = self.loop_items(node, variables) if node.loop is not None else [None]
        except TemplateError as exc:
            self.task_error(node, name, "include_tasks", exc)
            return
        loop_var = str(node.loop_control.get("loop_var") or "item")
        for index, item in enumerate(items):
            scope = {} if node.loop is None else {loop_var: item, "ansible_loop_var": loop_var}
            if node.loop is not None and node.loop_control.get("index_var"):
                scope[str(node.loop_control["index_var"])] = index
            try:
                if node.static_children is not None:
                    children = node.static_children
                else:
                    file = self.templar.render(node.file, ChainMap(scope, variables))
                    children = self.runner.include_cache(node, str(file))
            except (TemplateError, ConfigError) as exc:
                self.task_error(node, name, "include_tasks", exc)
                return
            self.included(node, "include_tasks")
            self.loop_scope.append(scope)
            try:
                self.run_nodes(children)
            finally:
                self.loop_scope.pop()
            if self.failed:
                return

    def task_error(self, node: Node, name: str, action: str, exc: Exception) -> None:
        msg = self.describe_error(node, name, exc)
        result = TaskResult(
            host=self.rt.host.name,
            task=name,
            play=self.play.name,
            action=action,
            status="failed",
            msg=msg,
            position=str(node.pos),
        )
        self.record(result)
        self.fail(result, fatal=bool(node.any_errors_fatal or self.play.any_errors_fatal))

    def describe_error(self, node: Node, name: str, exc: Exception) -> str:
        where = f"task '{name}' ({node.pos}) on host {self.rt.host.name}"
        if isinstance(exc, UndefinedVariableError) and not exc.attribute and exc.variable:
            inside = f" in template {exc.source}" if exc.source else ""
            return (
                f"{where}: undefined variable '{exc.variable}'{inside}. Define it (vars, inventory, "
                f"-e {exc.variable}=...) or use `| default(...)`"
            )
        if isinstance(exc, UndefinedVariableError):
            return f"{where}: {exc} (use `| default(...)` where it may be missing)"
        return f"{where}: {exc}"

    # -- handlers ------------------------------------------------------------------------------
    def flush_handlers(self) -> None:
        if not self.notified or (self.failed and not self.play.force_handlers):
            return
        handlers = self.play.handlers
        ran: set[int] = set()
        for _ in range(len(handlers) * 2 + 1):
            pending = [h for h in handlers if h.id not in ran and self.is_notified(h)]
            if not pending:
                break
            handler = pending[0]
            ran.add(handler.id)
            self.consume(handler)
            self.run_task(handler, is_handler=True)
            if self.failed or self.stopped():
                break
        self.notified = []

    def is_notified(self, handler: Task) -> bool:
        names = {handler.name, *handler.listen}
        if handler.role and handler.name:
            names.add(f"{handler.role.name} : {handler.name}")
        return any(n in names for n in self.notified)

    def consume(self, handler: Task) -> None:
        names = {handler.name, *handler.listen}
        if handler.role and handler.name:
            names.add(f"{handler.role.name} : {handler.name}")
        self.notified = [
            n for n in self.notified if n not in names or self._other_listeners(n, handler)
        ]

    def _other_listeners(self, name: str, handler: Task) -> bool:
        """A topic several handlers listen to stays notified until each has run."""
        return any(h is not handler and name in h.listen for h in self.play.handlers)

    # -- tasks ---------------------------------------------------------------------------------
    def run_task(self, task: Task, is_handler: bool = False) -> None:
        if not is_handler and not tags_selected(
            task.tags, self.runner.options.tags, self.runner.options.skip_tags
        ):
            return
        if self.stopped():
            raise Stop()
        host = self.rt.host.name
        lockstep = self.pstate.lockstep and not is_handler
        if lockstep:
            self.pstate.wait_turn(host, self.steps, self.stopped)
            self.steps += 1
            if self.stopped():
                raise Stop()
        try:
            self._run_task(task, host)
        finally:
            if lockstep:
                self.pstate.step_done(host)

    def _run_task(self, task: Task, host: str) -> None:
        run_once = self._bool(task.run_once, task)
        key = (task.id, self.rt.run_count.get(task.id, 0))
        self.rt.run_count[task.id] = key[1] + 1
        if run_once:
            runs, shared = self.pstate.run_once.enter(key, host, self.stopped)
            if not runs:
                self.apply_shared(task, shared)
                return
        self.runner.display.task_start(host, task.display_name)
        start = time.monotonic()
        outcome = self.execute(task)
        result, full, facts, notify = outcome
        result.seconds = time.monotonic() - start
        if run_once:
            self.pstate.run_once.publish(key, (result, full, facts, notify))
            for other in self.pstate.hosts:
                if other.name != host:
                    self.runner.note_run_once(other.name)
        self.finish(task, result, full, facts, notify)

    def apply_shared(
        self, task: Task, shared: tuple[TaskResult, dict[str, Any], dict[str, Any], bool]
    ) -> None:
        result, full, facts, notify = shared
        if task.register:
            self.rt.vars.set_facts[task.register] = full
        self.rt.vars.set_facts.update(facts)
        if notify:
            self.notified.extend(task.notify)
        if result.status == "failed" and not result.ignored:
            mine = replace(
                result,
                host=self.rt.host.name,
                run_once_from=result.host,
                msg=f"run_once task failed on {result.host}: {result.msg}",
            )
            self.record(mine)
            self.fail(mine, fatal=bool(task.any_errors_fatal or self.play.any_errors_fatal))

    def finish(
        self,
        task: Task,
        result: TaskResult,
        full: dict[str, Any],
        facts: dict[str, Any],
        notify: bool,
    ) -> None:
        if task.register and result.status != "unreachable":
            self.rt.vars.set_facts[task.register] = full
        if facts:
            if task.action in ("facts", "setup"):
                self.rt.vars.facts.update(facts)
            else:
                self.rt.vars.set_facts.update(facts)
            self.runner.masker.add(collect_secrets([facts]))
        if notify and task.notify:
            variables = self.vars_for(task)
            for name in task.notify:
                self.notified.append(str(self.templar.render(name, variables)))
        self.record(result, full)
        if result.status == "unreachable":
            self.rt.unreachable = True
            self.failed = True
            if not self._bool(task.ignore_unreachable, task):
                raise Stop()
            self.failed = False
            return
        if result.status == "failed" and not result.ignored:
            self.fail(
                result,
                fatal=bool(self._bool(task.any_errors_fatal, task) or self.play.any_errors_fatal),
            )

    def _bool(self, value: Any, node: Node, variables: Mapping[str, Any] | None = None) -> bool:
        if value is None:
            return False
        if isinstance(value, bool):
            return value
        return to_bool(
            self.templar.render(value, variables if variables is not None else self.vars_for(node))
        )

    def execute(self, task: Task) -> tuple[TaskResult, dict[str, Any], dict[str, Any], bool]:
        """Run one task (with its loop) on this host: (result, registered value, facts, notify)."""
        host = self.rt.host.name
        result = TaskResult(
            host=host,
            task=task.display_name,
            play=self.play.name,
            action=task.action,
            status="ok",
            position=str(task.pos),
        )
        variables = self.vars_for(task)
        try:
            no_log = self._bool(task.no_log, task, variables)
        except TemplateError:
            no_log = True
        result.no_log = no_log
        facts: dict[str, Any] = {}
        try:
            if task.loop is None:
                if task.when and not self.templar.condition(list(task.when), variables):
                    full = skipped_result(task)
                    result.status = "skipped"
                    result.result = clean_result(full, self.runner.masker, no_log)
                    return result, full, {}, False
                full, facts = self.execute_one(task, variables)
            else:
                full, facts = self.execute_loop(task, variables, result)
        except _UNREACHABLE as exc:
            result.status = "unreachable"
            result.msg = getattr(exc, "detail", None) or str(exc)
            return result, {"unreachable": True, "msg": result.msg}, {}, False
        except (TemplateError, ArgError) as exc:
            full = {
                "failed": True,
                "changed": False,
                "msg": self.describe_error(task, task.display_name, exc),
            }
            facts = {}
        except Stop:
            raise
        except (HostError, ConfigError, OSError) as exc:
            detail = getattr(exc, "detail", None) or str(exc)
            full = {"failed": True, "changed": False, "msg": detail}
        except Exception as exc:  # a bug in a module: report it on this host, keep the run going
            full = {
                "failed": True,
                "changed": False,
                "msg": f"{type(exc).__name__}: {exc} (internal error in module {task.action})",
            }
        failed = bool(full.get("failed"))
        changed = bool(full.get("changed"))
        if full.get("skipped") and not failed:
            result.status = "skipped"
        elif failed:
            result.status = "failed"
            result.changed = changed
            try:
                result.ignored = self._bool(task.ignore_errors, task, variables)
            except TemplateError:
                result.ignored = False
        else:
            result.status = "changed" if changed else "ok"
        msg = full.get("msg")
        result.msg = (
            ""
            if msg is None
            else self.runner.masker.text(str(msg))
            if not no_log
            else ("" if not failed else "(output hidden by no_log)")
        )
        result.result = clean_result(full, self.runner.masker, no_log)
        return result, full, facts, changed and not failed

    def execute_loop(
        self, task: Task, variables: ChainMap, result: TaskResult
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        try:
            items = self.loop_items(task, variables)
        except UndefinedVariableError:
            # Ansible: an undefined loop is fine when `when` (without the item) is false
            try:
                if task.when and not self.templar.condition(list(task.when), variables):
                    return skipped_result(task), {}
            except UndefinedVariableError:
                pass
            raise
        control = task.loop_control
        loop_var = str(control.get("loop_var") or "item")
        index_var = control.get("index_var")
        pause = float(control.get("pause") or 0)
        results: list[dict[str, Any]] = []
        facts: dict[str, Any] = {}
        for index, item in enumerate(items):
            if self.stopped():
                raise Stop()
            loop_vars: dict[str, Any] = {loop_var: item, "ansible_loop_var": loop_var}
            if index_var:
                loop_vars[str(index_var)] = index
            if control.get("extended"):
                loop_vars["ansible_loop"] = {
                    "index": index + 1,
                    "index0": index,
                    "first": index == 0,
                    "last": index == len(items) - 1,
                    "length": len(items),
                    "revindex": len(items) - index,
                    "revindex0": len(items) - index - 1,
                    "allitems": items,
                    "previtem": items[index - 1] if index else None,
                    "nextitem": items[index + 1] if index + 1 < len(items) else None,
                }
            item_vars = self.vars_for(task, loop_vars)
            label = item
            if control.get("label") is not None:
                label = self.templar.render(control["label"], item_vars)
            self.runner.display.task_start(
                self.rt.host.name, f"{task.display_name} ({_short(label)})"
            )
            if task.when and not self.templar.condition(list(task.when), item_vars):
                one = skipped_result(task)
            else:
                try:
                    one, item_facts = self.execute_one(task, item_vars)
                    facts.update(item_facts)
                    if item_facts:  # set_fact in a loop: later items see earlier ones
                        self.rt.vars.set_facts.update(item_facts)
                except (TemplateError, ArgError) as exc:
                    one = {
                        "failed": True,
                        "changed": False,
                        "msg": self.describe_error(task, task.display_name, exc),
                    }
            one[loop_var] = item
            one["ansible_loop_var"] = loop_var
            if control.get("label") is not None:
                one["_ansible_item_label"] = label
            results.append(one)
            self.runner.display.item_result(
                self.rt.host.name, task.display_name, _short(label), one
            )
            if pause and index + 1 < len(items):
                self.runner.stop.wait(pause)
        result.items = len(items)
        full: dict[str, Any] = {
            "results": results,
            "changed": any(r.get("changed") for r in results),
            "failed": any(r.get("failed") for r in results),
            "skipped": bool(results) and all(r.get("skipped") for r in results),
        }
        if not results:
            full["skipped"] = True
            full["skipped_reason"] = "No items in the list"
        full["msg"] = "One or more items failed" if full["failed"] else "All items completed"
        if full["failed"]:
            first = next(r for r in results if r.get("failed"))
            label = first.get("_ansible_item_label", first.get(loop_var))
            full["msg"] = (
                f"One or more items failed (first: {_short(label)}: {first.get('msg', '')})"
            )
        return full, facts

    def loop_items(self, node: Task | Include, variables: Mapping[str, Any]) -> list[Any]:
        raw = self.templar.render(node.loop, variables)
        kind = node.loop_kind
        if kind == "with_dict":
            if not isinstance(raw, Mapping):
                raise TemplateError(f"with_dict needs a mapping, got {type(raw).__name__}")
            return [{"key": k, "value": v} for k, v in raw.items()]
        if isinstance(raw, str):
            if kind in ("with_items", "with_list"):
                return [raw]
            raise TemplateError(
                f"loop needs a list, got the string {raw!r} (use a YAML list or a list variable)"
            )
        if raw is None:
            return []
        if isinstance(raw, Mapping):
            raise TemplateError("loop needs a list, got a mapping (use `| dict2items`)")
        items = list(raw)
        if kind == "with_items":
            flat: list[Any] = []
            for item in items:
                flat.extend(item if isinstance(item, list) else [item])
            return flat
        return items

    def execute_one(self, task: Task, variables: ChainMap) -> tuple[dict[str, Any], dict[str, Any]]:
        """One module run (with retries/until, changed_when/failed_when): (registered value, facts)."""
        module = task.module
        assert module is not None
        lazy = self.templar.vars(variables)
        args: dict[str, Any] = {}
        for key, value in task.args.items():
            if key in module.raw_args:
                args[key] = value
            elif key in module.shell_args or (
                key == "_raw" and module.free_form in module.shell_args
            ):
                args[key] = (
                    self.templar.render_shell(value, lazy)
                    if isinstance(value, str)
                    else self.templar.render(value, lazy)
                )
            else:
                args[key] = self.templar.render(value, lazy)
        args = {k: v for k, v in args.items() if not (isinstance(v, str) and v == OMIT)}
        args = normalize_args(module, args)
        self.runner.masker.add(secret_arg_values(module, args))  # Arg.no_log, secret names
        check = self.runner.options.check
        if task.check_mode is not None:
            check = self._bool(task.check_mode, task, lazy)
        diff = self.runner.options.diff
        if task.diff is not None:
            diff = self._bool(task.diff, task, lazy)
        if check and not module.supports_check_mode:
            return {
                "changed": False,
                "skipped": True,
                "msg": f"{module.name} does not support check mode",
            }, {}
        environment: dict[str, str] = {}
        for layer in task.environment:
            rendered = self.templar.render(layer, lazy)
            if not isinstance(rendered, Mapping):
                raise TemplateError(f"environment must be a mapping, got {type(rendered).__name__}")
            environment.update({str(k): "" if v is None else str(v) for k, v in rendered.items()})
        become = self._bool(
            task.become if task.become is not None else self.play.become, task, lazy
        )
        become_user = task.become_user if task.become_user is not None else self.play.become_user
        timeout = task.timeout
        delegate = (
            None if task.delegate_to is None else str(self.templar.render(task.delegate_to, lazy))
        )
        if delegate is not None and delegate not in DELEGATE_LOCAL:
            raise TemplateError(
                f"delegate_to: {delegate!r}: only the controller (localhost) is supported"
            )
        # delegate_to: localhost runs on the controller with this host's variables
        conn = self.rt.connection(local=True) if delegate else self.connection()
        if task.become is None and self.play.become is None and not delegate:
            from provision.remote.become import wanted_by_host

            become = wanted_by_host(conn)  # --become / ansible_become: every task's default
        ctx = TaskContext(
            host=self.rt.host,
            connection=conn,
            args=args,
            check_mode=check,
            diff=diff,
            vars=lazy,
            facts=self.rt.vars.facts.get("provision_facts") or {},
            become=become,
            become_user=None
            if become_user is None
            else str(self.templar.render(become_user, lazy)),
            environment=environment or None,
            timeout=None if timeout is None else float(self.templar.render(timeout, lazy)),
            task_name=task.display_name,
            search_paths=self.search_paths(task),
            templar=self.templar,
            agent_factory=lambda: self.rt.agent(conn, become),
            on_progress=lambda text: self.runner.display.task_start(
                self.rt.host.name, f"{task.display_name}: {text}"
            ),
        )
        retries = task.retries
        until = task.until
        if retries is not None or until is not None:
            attempts = 1 + (int(self.templar.render(retries, lazy)) if retries is not None else 3)
        else:
            attempts = 1
        delay = (
            float(self.templar.render(task.delay, lazy))
            if task.delay is not None
            else _DEFAULT_DELAY
        )
        full: dict[str, Any] = {}
        mres = ModuleResult()
        for attempt in range(1, attempts + 1):
            conn.doing = f"task '{task.display_name}'"  # named when the link dies mid-task
            try:
                mres = module.run(ctx)
            except ModuleFailure as exc:
                mres = ModuleResult(failed=True, msg=exc.msg, data=dict(exc.data))
            finally:
                conn.doing = None
            full = mres.as_dict()
            if module.name in ("add_host", "group_by") and not mres.failed:
                full["changed"] = self.runner.change_inventory(self.rt.host, full)
            if attempts > 1:
                full["attempts"] = attempt
            post = ChainMap({task.register: full}, variables) if task.register else variables
            if not mres.skipped:
                if task.changed_when is not None:
                    full["changed"] = self.templar.condition(list(task.changed_when), post)
                if task.failed_when is not None:
                    full["failed"] = full["failed_when_result"] = self.templar.condition(
                        list(task.failed_when), post
                    )
            if attempts > 1:
                done = (
                    (not full.get("failed"))
                    if until is None
                    else self.templar.condition(list(until), post)
                )
                if done:
                    break
                if attempt < attempts:
                    self.runner.display.task_start(
                        self.rt.host.name, f"{task.display_name} (retry {attempt}/{attempts - 1})"
                    )
                    if self.runner.stop.wait(delay):
                        raise Stop()
                else:
                    full["failed"] = True
                    full.setdefault("msg", "")
                    full["msg"] = (
                        full["msg"] + " " if full["msg"] else ""
                    ) + f"(gave up after {attempts} attempts)"
        return full, dict(mres.facts)

    def search_paths(self, node: Node) -> list[Path]:
        paths = []
        if node.role is not None:
            paths.append(node.role.path)
        paths.append(node.base_dir)
        paths.append(self.runner.playbook_dir)
        paths.append(bundle_dir("templates").parent)  # the built-in templates/ (pip.conf.j2, ...)
        out: list[Path] = []
        for p in paths:
            if p not in out:
                out.append(p)
        return out


def failed_task_var(failure: TaskResult | None) -> dict[str, Any]:
    """`ansible_failed_task` in a rescue: the failed task's name, action and place."""
    if failure is None:
        return {}
    return {"name": failure.task, "action": failure.action, "position": failure.position}


def skipped_result(task: Task) -> dict[str, Any]:
    return {
        "changed": False,
        "skipped": True,
        "skip_reason": "Conditional result was False",
        "false_condition": str(task.when[-1]) if task.when else "",
    }


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class NullDisplay:
    """Display interface (see display.py); the API default prints nothing."""

    def play_start(self, play: Play, hosts: list[Host]) -> None: ...
    def task_start(self, host: str, task: str) -> None: ...
    def task_result(self, result: TaskResult, full: dict[str, Any]) -> None: ...
    def item_result(self, host: str, task: str, label: str, result: dict[str, Any]) -> None: ...
    def host_done(self, host: str) -> None: ...
    def message(self, text: str) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...


class PlaybookRunner:
    def __init__(
        self,
        playbook: Playbook,
        inventory: Inventory,
        options: RunOptions,
        display: Any = None,
        connections: Mapping[str, Connection] | None = None,
    ) -> None:
        self.playbook = playbook
        self.inventory = inventory
        self.options = options
        self.display = display or NullDisplay()
        self.connections = connections
        self.playbook_dir = playbook.base_dir
        self.templar = Templar()
        self.vm = VariableManager(
            inventory, options.extra_vars, self.playbook_dir, options.check, options.diff
        )
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.result = PlaybookResult(playbook=str(playbook.path), check_mode=options.check)
        self.runtimes: dict[str, HostRuntime] = {}
        self.masker = Masker(collect_secrets([options.extra_vars]))
        self._include_cache: dict[tuple[int, str], list[Node]] = {}

    # -- shared bookkeeping --------------------------------------------------------------------
    def record(self, result: TaskResult, full: dict[str, Any]) -> None:
        with self.lock:
            self.result.results.append(result)
            self.result.recap.setdefault(result.host, HostStats())
        self.display.task_result(result, full)

    def change_inventory(self, host: Host, result: dict[str, Any]) -> bool:
        """add_host / group_by: the shared inventory changes for the later plays."""
        with self.lock:
            if "add_host" in result:
                changed = add_dynamic_host(self.inventory, result["add_host"])
            else:
                changed = add_dynamic_group(
                    self.inventory, host, result["add_group"], result["parent_groups"]
                )
            self.vm.groups = refresh_groups(self.inventory)
        return changed

    def note_run_once(self, host: str) -> None:
        with self.lock:
            self.result.recap.setdefault(host, HostStats())

    def include_cache(self, node: Include, file: str) -> list[Node]:
        key = (node.id, file)
        with self.lock:
            cached = self._include_cache.get(key)
        if cached is not None:
            return cached
        path = find_runtime_tasks_file(file, node, self.playbook_dir)
        nodes = load_tasks_at_runtime(path, node.inherit, self.playbook_dir)
        with self.lock:
            self._include_cache[key] = nodes
        return nodes

    def runtime(self, host: Host) -> HostRuntime:
        rt = self.runtimes.get(host.name)
        if rt is None:
            rt = HostRuntime(host, self.options.connect, self.vm.state(host), self.connections)
            self.runtimes[host.name] = rt
            self.masker.add(collect_secrets([host.vars]))
        return rt

    # -- plays ---------------------------------------------------------------------------------
    def select(self, play: Play) -> list[Host]:
        from provision.inventory.patterns import UnknownPatternError, select_hosts

        try:
            hosts = select_hosts(self.inventory, play.hosts, limit=self.options.limit)
        except UnknownPatternError as exc:
            # as Ansible: a play whose pattern matches nothing is skipped, with a warning
            self.display.message(f"play '{play.name}' ({play.pos}): {exc}; skipping the play")
            return []
        return [
            h
            for h in hosts
            if not (
                h.name in self.runtimes
                and (self.runtimes[h.name].failed or self.runtimes[h.name].unreachable)
            )
        ]

    def play_vars(self, play: Play, rt: HostRuntime) -> dict[str, Any]:
        merged = dict(play.vars)
        for file, pos in play.vars_files:
            name = file
            if "{{" in file:
                name = str(self.templar.render(file, self.vm.task_vars(rt.vars)))
            path = Path(name).expanduser()
            path = path if path.is_absolute() else play.base_dir / path
            data = load_yaml(path)
            if data is None:
                continue
            if not isinstance(data, Mapping):
                raise ConfigError(f"{pos}: vars file {name} must hold a mapping")
            merged.update(data)
        return merged

    def run(self) -> PlaybookResult:
        start = time.monotonic()
        self.display.start()
        try:
            for play in self.playbook.plays:
                if self.stop.is_set():
                    break
                self.run_play(play)
        except KeyboardInterrupt:
            self.interrupt()
        finally:
            for rt in self.runtimes.values():
                rt.close()
            self.result.elapsed = time.monotonic() - start
            self.result.recap = self.recap()
            self.display.stop()
        return self.result

    def recap(self) -> dict[str, HostStats]:
        stats: dict[str, HostStats] = {name: HostStats() for name in self.result.recap}
        for res in self.result.results:
            stats.setdefault(res.host, HostStats()).add(res)
        return stats

    def interrupt(self) -> None:
        self.stop.set()
        self.result.interrupted = True

    def run_play(self, play: Play) -> None:
        hosts = self.select(play)
        try:
            prompted = prompt_values(play.vars_prompt, self.options.extra_vars)
            groups = batches(hosts, play.serial, str(play.pos))
        except ConfigError as exc:
            raise PlaybookError([str(exc)]) from None
        if not hosts:
            self.vm.play_hosts = []
            self.display.play_start(play, hosts)
            return
        for batch in groups:  # serial: one batch after the other; else one batch of all
            alive = [h for h in batch if h in self.select(play)] if len(groups) > 1 else batch
            if self.stop.is_set() or not alive:
                continue
            pstate = self.run_batch(play, alive, prompted)
            if pstate.end_play or (pstate.abort.is_set() and not pstate.batch_ended):
                break  # end_play / any_errors_fatal: no later batches

    def run_batch(self, play: Play, hosts: list[Host], prompted: dict[str, Any]) -> _PlayState:
        self.vm.play_hosts = [h.name for h in hosts]
        self.display.play_start(play, hosts)
        pstate = _PlayState(play, hosts)
        runtimes = [self.runtime(h) for h in hosts]
        for rt in runtimes:
            with self.lock:
                self.result.recap.setdefault(rt.host.name, HostStats())
            try:
                rt.vars.play_vars = {**self.play_vars(play, rt), **prompted}
            except (ConfigError, TemplateError) as exc:
                raise PlaybookError([str(exc)]) from None
            self.masker.add(collect_secrets([rt.vars.play_vars]))

        def work(rt: HostRuntime) -> None:
            try:
                _HostPlay(self, rt, pstate).run()
            except (KeyboardInterrupt, PlaybookError):
                raise
            except Exception as exc:  # a bug must cost this host, not the whole run
                rt.failed = True
                self.record(
                    TaskResult(
                        host=rt.host.name,
                        task="(internal error)",
                        play=play.name,
                        action="",
                        status="failed",
                        msg=f"{type(exc).__name__}: {exc}",
                        position=str(play.pos),
                    ),
                    {},
                )
            finally:
                self.display.host_done(rt.host.name)

        if len(runtimes) == 1:
            try:
                work(runtimes[0])
            except KeyboardInterrupt:
                self.interrupt()
            return pstate
        pool = ThreadPoolExecutor(
            max_workers=max(1, min(self.options.forks, len(runtimes))), thread_name_prefix="host"
        )
        futures: list[Future[None]] = [pool.submit(work, rt) for rt in runtimes]
        try:
            pending = set(futures)
            while pending:
                _, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
        except KeyboardInterrupt:
            # stop within ~2 s even with hung hosts: every running command ends its remote
            # process group and raises; hosts that don't answer in time are left behind
            from provision.connection.base import interrupt_all
            from provision.parallel import STOP_GRACE_S

            self.interrupt()
            interrupt_all()
            self.display.message("interrupted: stopping the running steps")
            try:
                wait(futures, timeout=STOP_GRACE_S)
            except KeyboardInterrupt:
                pass
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        for future in futures:
            exc = future.exception() if future.done() and not future.cancelled() else None
            if exc is not None and not isinstance(exc, (Stop, KeyboardInterrupt)):
                raise exc
        return pstate


def inventory_from_hosts(hosts: list[Host]) -> Inventory:
    inventory = Inventory()
    inventory.groups["all"] = []
    for host in hosts:
        inventory.hosts[host.name] = host
        inventory.groups["all"].append(host.name)
        for group in host.groups:
            if group != "all":
                inventory.groups.setdefault(group, [])
                if host.name not in inventory.groups[group]:
                    inventory.groups[group].append(host.name)
    return inventory


def run_playbook(
    path: str | Path | Playbook,
    inventory: Inventory | None = None,
    *,
    hosts: list[Host] | None = None,
    extra_vars: Mapping[str, Any] | None = None,
    options: ConnectOptions | None = None,
    check: bool = False,
    diff: bool = False,
    forks: int = 32,
    limit: str | None = None,
    tags: list[str] | frozenset[str] | None = None,
    skip_tags: list[str] | frozenset[str] | None = None,
    display: Any = None,
    connections: Mapping[str, Connection] | None = None,
) -> PlaybookResult:
    """Run a playbook: the Python API behind `provision run` (and `provision up`).

    `hosts` (a list of Host) or `inventory` says what the plays' `hosts:` patterns select from;
    with neither, the implicit `localhost` is available. `connections` lends already-open
    connections by host name (closed by their owner, not here). Raises PlaybookError (a
    ConfigError) for an invalid playbook before anything runs.
    """
    playbook = path if isinstance(path, Playbook) else load_playbook(path)
    if inventory is None:
        inventory = inventory_from_hosts(list(hosts or []))
    elif hosts is not None:
        names = [h.name for h in hosts]
        limit = ",".join(names) if limit is None else limit
    if limit:
        from provision.inventory.patterns import select_hosts

        if not select_hosts(inventory, "all", limit=limit):  # a typo is an error, not a no-op run
            raise ConfigError(f"--limit {limit!r} selects no hosts")
    run_options = RunOptions(
        forks=forks,
        check=check,
        diff=diff,
        tags=frozenset(tags or ()),
        skip_tags=frozenset(skip_tags or ()),
        limit=limit,
        connect=options or ConnectOptions(),
        extra_vars=dict(extra_vars or {}),
    )
    return PlaybookRunner(
        playbook, inventory, run_options, display=display, connections=connections
    ).run()
