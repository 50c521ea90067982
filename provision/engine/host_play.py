"""One host through one play: sections, blocks/rescue/always, includes, meta, handlers."""

from __future__ import annotations

import time
from collections import ChainMap
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from provision.connection.base import Connection
from provision.engine.loop_control import item_vars as loop_item_vars
from provision.engine.playbook import (
    Block,
    Include,
    Meta,
    Node,
    Task,
)
from provision.engine.playbook_roles import FROM_KEYS
from provision.engine.results import TaskResult
from provision.engine.role_names import included_roles
from provision.engine.run_state import (
    UNREACHABLE_ERRORS,
    EndRole,
    HostRuntime,
    Stop,
    _PlayState,
    tags_selected,
)
from provision.engine.task_exec import TaskExecution, failed_task_var
from provision.engine.templating import (
    Templar,
    TemplateError,
    UndefinedVariableError,
)
from provision.errors import (
    ConfigError,
    HostError,
)
from provision.modules.base import (
    ModuleFailure,
    TaskContext,
)
from provision.modules.control import gather_facts
from provision.secrets import collect_secrets
from provision.taint import as_data, as_host_data

if TYPE_CHECKING:
    from provision.engine.runner import PlaybookRunner


class _HostPlay(TaskExecution):
    """One host's walk through one play."""

    def __init__(self, runner: PlaybookRunner, rt: HostRuntime, pstate: _PlayState) -> None:
        self.runner = runner
        self.rt = rt
        self.pstate = pstate
        self.play = pstate.play
        self.failed = False
        self.last_failure: TaskResult | None = None
        self.last_failed_task: Task | None = None  # the task behind last_failure, when a task
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
        except UNREACHABLE_ERRORS as exc:
            self.unreachable(result, exc)
            return
        except (HostError, ModuleFailure, OSError) as exc:
            result.status = "failed"
            result.msg = f"gathering facts failed: {getattr(exc, 'detail', None) or exc}"
            result.seconds = time.monotonic() - start
            self.record(result)
            self.fail(result, fatal=self.play.any_errors_fatal)
            return
        self.rt.vars.add_facts(as_host_data(facts))  # the host's facts: data, and its word
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

    def included(self, node: Node, action: str, status: str = "ok", file: str = "") -> None:
        """Ansible counts each include (per loop item) in the recap: ok, or skipped."""
        if tags_selected(node.tags, self.runner.options.tags, self.runner.options.skip_tags):
            name = node.name or action
            if node.role is not None:  # Ansible's task name: "ROLE : include_tasks"
                name = f"{node.role.name} : {name}"
            self.record(
                TaskResult(
                    host=self.rt.host.name,
                    task=name,
                    play=self.play.name,
                    action=action,
                    status=status,
                    position=str(node.pos),
                    result={"include": file} if file else {},
                )
            )

    def run_block(self, block: Block) -> None:
        if block.when_once:  # include_role: decided once, counted like a task
            try:
                if block.when and not self.templar.condition(
                    list(block.when), self.vars_for(block), str(block.pos)
                ):
                    self.included(block, "include_role", "skipped")
                    return
            except TemplateError as exc:
                self.task_error(block, block.name or "block", "include_role", exc)
                return
            self.included(block, "include_role")
            self.runner.vm.add_play_roles(included_roles(block))  # join Ansible's play.roles
            if block.role is not None and block.role.public:
                self.rt.vars.expose_roles([block.role])
        if block.rescue:
            self.rescue_depth += 1
        try:
            self.run_nodes(block.block)
        except EndRole:
            if not block.whole_role:
                raise  # a block inside the role: the role's own block ends
        finally:
            if block.rescue:
                self.rescue_depth -= 1
        if self.failed and block.rescue and not self.stopped():
            if self.last_failure is not None:
                self.last_failure.rescued = True
            self.failed = False
            self.rt.vars.set_facts["ansible_failed_result"] = as_data(
                self.last_failure.result if self.last_failure else {}
            )
            # the task as written: its templates are text here, never rendered (Ansible's)
            self.rt.vars.set_facts["ansible_failed_task"] = as_data(
                failed_task_var(self.last_failure, self.last_failed_task)
            )
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
        if node.when and not self.templar.condition(
            list(node.when), self.vars_for(node), str(node.pos)
        ):
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
        elif node.action == "clear_facts":  # the fact cache: gathered, module and cacheable facts
            self.rt.vars.facts.clear()
            self.rt.facts_gathered = False
        elif node.action == "reset_connection":  # the next task logs in (and starts its agent) anew
            self.rt.reset_connection()
        elif node.action == "refresh_inventory":
            self.runner.refresh_inventory()
        elif node.action == "end_role":
            if node.role is None:
                self.task_error(node, node.display_name, "meta", ConfigError("end_role is only valid in a role"))
                return
            raise EndRole()

    def run_include(self, node: Include) -> None:
        if not tags_selected(node.tags, self.runner.options.tags, self.runner.options.skip_tags):
            return
        name = node.display_name
        variables = self.vars_for(node)
        try:
            if node.when and not self.templar.condition(list(node.when), variables, str(node.pos)):
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
        # As Ansible: every item's file is resolved, and counted ok, when the include task runs,
        # before any included task (a failure in item 9's tasks leaves items 10-12 counted).
        loaded: list[tuple[dict[str, Any], list[Node], str]] = []
        for index, item in enumerate(items):
            scope = {} if node.loop is None else loop_item_vars(
                node.loop_control, item, index, items, lambda v: self._bool(v, node, variables)
            )
            try:
                if node.role_task is not None:
                    children = [self.role_at_runtime(node, ChainMap(scope, variables))]
                elif node.static_children is not None:
                    children = node.static_children
                else:
                    file = self.templar.render_path(node.file, ChainMap(scope, variables), "include_tasks")
                    children = self.runner.include_cache(node, str(file))
            except (TemplateError, ConfigError) as exc:
                self.task_error(node, name, "include_tasks", exc)
                return
            path = "" if node.static_children is not None or node.role_task is not None else (
                self.runner.include_paths.get((node.id, str(file)), "")
            )
            loaded.append((scope, children, path))
        for _, _, path in loaded if node.role_task is None else ():  # a role's block counts itself
            self.included(node, "include_tasks", file=path)
        for scope, children, _ in loaded:
            self.loop_scope.append(scope)
            try:
                self.run_nodes(children)
            finally:
                self.loop_scope.pop()
            if self.failed:
                return

    def role_at_runtime(self, node: Include, variables: Mapping[str, Any]) -> Node:
        """include_role's templated name and *_from, rendered for this host, and the role."""
        action, task = node.role_task
        raw = task[action]
        rendered = {
            k: str(self.templar.render(raw[k], variables))
            for k in ("name", *FROM_KEYS)
            if raw.get(k) is not None
        }
        return self.runner.role_include_cache(node, rendered, self.play)

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
        try:  # an include's ignore_errors covers its own failure (a broken `when`), as in Ansible
            result.ignored = self._bool(node.ignore_errors, node, self.vars_for(node))
        except TemplateError:
            result.ignored = False
        self.record(result)
        if not result.ignored:
            self.fail(result, fatal=bool(node.any_errors_fatal or self.play.any_errors_fatal))

    def describe_error(self, node: Node, name: str, exc: Exception) -> str:
        where = f"task '{name}' ({node.pos}) on host {self.rt.host.name}"
        if isinstance(exc, UndefinedVariableError) and not exc.attribute and exc.variable:
            inside = f" in template {exc.source}" if exc.source else ""
            return (
                # "'x' is undefined": Ansible's words, which playbooks' asserts look for
                f"{where}: undefined variable: '{exc.variable}' is undefined{inside}. Define it (vars, inventory, "
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
