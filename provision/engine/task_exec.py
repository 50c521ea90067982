"""Running one task on one host: conditions, loops, retries, module call, changed/failed_when, register."""

from __future__ import annotations

import time
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from provision.engine.async_jobs import JOBS
from provision.engine.async_task import job_result, refusal, time_limit
from provision.engine.loop_control import break_conditions
from provision.engine.loop_control import item_vars as loop_item_vars
from provision.engine.loop_items import LoopItems
from provision.engine.playbook import (
    DELEGATE_LOCAL,
    Node,
    Task,
)
from provision.engine.results import TaskResult, clean_result
from provision.engine.run_state import DEFAULT_RETRY_DELAY, UNREACHABLE_ERRORS, Stop, tags_selected
from provision.engine.task_args import finalize_args
from provision.engine.templating import (
    OMIT,
    TemplateError,
    UndefinedVariableError,
    is_template,
    to_bool,
)
from provision.errors import (
    ConfigError,
    HostError,
)
from provision.modules.base import (
    ArgError,
    ModuleFailure,
    ModuleResult,
    TaskContext,
    UnsupportedArgument,
    ansible_fallback,
    normalize_args,
    secret_arg_values,
)
from provision.paths import bundle_dir
from provision.remote.become import wanted_by_host
from provision.secrets import collect_secrets
from provision.taint import as_data, as_host_data

# modules whose "facts" are variables (set_fact precedence), not host facts
VAR_SETTERS = frozenset({"set_fact", "include_vars"})


class TaskExecution(LoopItems):
    """Mixin of the per-host play: one task, its loop and its result."""

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
        full = as_data(full)  # a loop's results, an error's message: data like the module's
        outcome = (result, full, facts, notify)
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
        if task.action in VAR_SETTERS:
            self.rt.vars.set_facts.update(facts)
        elif facts:
            self.rt.vars.add_facts(facts)
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
            self.last_failed_task = task
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
            if task.action in VAR_SETTERS:
                self.rt.vars.set_facts.update(facts)
            else:  # a module's facts are host facts, in `ansible_facts` too (Ansible's rule)
                self.rt.vars.add_facts(facts)
            if not (task.module is not None and task.module.facts_hold_no_secrets):
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
            self.last_failed_task = task
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
                if task.when and not self.templar.condition(
                    list(task.when), variables, str(task.pos)
                ):
                    full = skipped_result(task)
                    result.status = "skipped"
                    result.result = clean_result(full, self.runner.masker, no_log)
                    return result, full, {}, False
                full, facts = self.execute_one(task, variables)
            else:
                full, facts = self.execute_loop(task, variables, result)
        except UNREACHABLE_ERRORS as exc:
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
                if task.when and not self.templar.condition(
                    list(task.when), variables, str(task.pos)
                ):
                    return skipped_result(task), {}
            except UndefinedVariableError:
                pass
            raise
        control = task.loop_control
        loop_var = str(control.get("loop_var") or "item")
        pause = float(control.get("pause") or 0)
        results: list[dict[str, Any]] = []
        facts: dict[str, Any] = {}
        breaks = break_conditions(control)
        for index, item in enumerate(items):
            if self.stopped():
                raise Stop()
            loop_vars = loop_item_vars(
                control, item, index, items, lambda v: self._bool(v, task, variables)
            )
            item_vars = self.vars_for(task, loop_vars)
            label = item
            if control.get("label") is not None:
                label = self.templar.render(control["label"], item_vars)
            self.runner.display.task_start(
                self.rt.host.name, f"{task.display_name} ({_short(label)})"
            )
            try:  # a broken `when` fails this item only, as in Ansible
                if task.when and not self.templar.condition(
                    list(task.when), item_vars, str(task.pos)
                ):
                    one = skipped_result(task)
                else:
                    one, item_facts = self.execute_one(task, item_vars)
                    facts.update(item_facts)
                    if item_facts and task.action in VAR_SETTERS:
                        # set_fact in a loop: later items see earlier ones
                        self.rt.vars.set_facts.update(item_facts)
            except (TemplateError, ArgError) as exc:
                one = {
                    "failed": True,
                    "changed": False,
                    "msg": self.describe_error(task, task.display_name, exc),
                }
            one.update(loop_vars)
            if control.get("label") is not None:
                one["_ansible_item_label"] = label
            results.append(one)
            self.runner.display.item_result(
                self.rt.host.name, task.display_name, _short(label), one, action=task.action
            )
            if breaks and self.templar.condition(
                breaks,
                ChainMap({task.register: one}, item_vars) if task.register else item_vars,
                str(task.pos),
            ):
                break
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

    def given_args(self, task: Task, lazy: Any) -> Mapping[str, Any]:
        """The task's arguments with their template layers (`args: "{{ splat }}"`, free-form
        words) rendered to mappings (engine/task_args.py). Its values are rendered next as any
        argument (host data and template output are marked data: never rendered)."""
        return finalize_args(
            task.written_action or task.action,
            task.args,
            lambda layer: self.templar.render(layer, lazy),
        )

    def execute_one(self, task: Task, variables: ChainMap) -> tuple[dict[str, Any], dict[str, Any]]:
        """One module run (with retries/until, changed_when/failed_when): (registered value, facts)."""
        module = task.module
        assert module is not None
        lazy = self.templar.vars(variables)
        args: dict[str, Any] = {}
        for key, value in self.given_args(task, lazy).items():
            if is_template(key):  # Ansible renders names too: set_fact: {"{{ item.key }}": …}
                key = str(self.templar.render(key, lazy))
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
            elif key in module.path_args or (key == "_raw" and module.free_form in module.path_args):
                args[key] = self.templar.render_path(value, lazy, f"{module.name} {key.lstrip('_')}")
            else:
                args[key] = self.templar.render(value, lazy)
        args = {k: v for k, v in args.items() if not (isinstance(v, str) and v == OMIT)}
        run = module.run
        try:
            args = normalize_args(module, args)
        except UnsupportedArgument as exc:
            exc.at(str(task.pos))
            hook = ansible_fallback()
            if hook is None:
                raise

            def run(
                ctx: TaskContext, hook: Any = hook, exc: UnsupportedArgument = exc
            ) -> ModuleResult:
                return hook(ctx, exc)  # Ansible's own module, with the arguments as given

        self.runner.masker.add(secret_arg_values(module, args))  # Arg.no_log, secret names
        self.runner.masker.add(collect_secrets(task.vars))  # a task's / block's own `vars:`
        check = self.runner.options.check
        if task.check_mode is not None:
            check = self._bool(task.check_mode, task, lazy)
        diff = self.runner.options.diff
        if task.diff is not None:
            diff = self._bool(task.diff, task, lazy)
        if check and not module.supports_check_mode and run == module.run:
            return {
                "changed": False,
                "skipped": True,
                "msg": f"{module.name} does not support check mode",
            }, {}
        environment: dict[str, str] = {}
        for layer in task.environment:
            rendered = self.templar.render(layer, lazy)
            if isinstance(rendered, str) and rendered == OMIT:
                continue  # `- "{{ omit }}"` in a list: no layer (Ansible's omit)
            if not isinstance(rendered, Mapping):
                raise TemplateError(f"environment must be a mapping, got {type(rendered).__name__}")
            environment.update(
                {
                    str(k): "" if v is None else str(v)
                    for k, v in rendered.items()
                    if not (isinstance(v, str) and v == OMIT)
                }
            )
        self.runner.masker.add(collect_secrets([environment]))  # WANDB_API_KEY, HF_TOKEN…
        become = self._bool(
            task.become if task.become is not None else self.play.become, task, lazy
        )
        become_user = task.become_user if task.become_user is not None else self.play.become_user
        timeout = None if task.timeout is None else float(self.templar.render(task.timeout, lazy))
        limit = None if task.async_val is None else float(self.templar.render(task.async_val, lazy))
        if limit and refusal(task.action):
            return {"failed": True, "changed": False, "msg": refusal(task.action)}, {}
        if limit:
            timeout = time_limit(limit, timeout)
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
            timeout=timeout,
            task_name=task.display_name,
            search_paths=self.search_paths(task),
            templar=self.templar,
            agent_factory=lambda: self.rt.agent(conn, become),
            on_progress=lambda text: self.runner.display.task_start(
                self.rt.host.name, f"{task.display_name}: {text}"
            ),
        )
        if limit and task.poll is not None and int(self.templar.render(task.poll, lazy)) == 0:
            work = lambda: self._outcome(run, ctx, module)[1]  # noqa: E731
            return JOBS.start(self.rt.host.name, work, conn.interrupt), {}
        retries = task.retries
        until = task.until
        if retries is not None or until is not None:
            attempts = 1 + (int(self.templar.render(retries, lazy)) if retries is not None else 3)
        else:
            attempts = 1
        delay = (
            float(self.templar.render(task.delay, lazy))
            if task.delay is not None
            else DEFAULT_RETRY_DELAY
        )
        full: dict[str, Any] = {}
        mres = ModuleResult()
        for attempt in range(1, attempts + 1):
            conn.doing = f"task '{task.display_name}'"  # named when the link dies mid-task
            try:
                mres, full = self._outcome(run, ctx, module)
            finally:
                conn.doing = None
            if limit:
                job_result(full)
            if module.name in ("add_host", "group_by") and not mres.failed:
                full["changed"] = self.runner.change_inventory(self.rt.host, full)
            if attempts > 1:
                full["attempts"] = attempt
            post = ChainMap({task.register: full}, variables) if task.register else variables
            if not mres.skipped:
                self._changed_failed_when(task, full, post)
            if attempts > 1:
                done = (
                    (not full.get("failed"))
                    if until is None
                    else self.templar.condition(list(until), post, str(task.pos))
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
        if module.facts_are_templates:
            return full, dict(mres.facts)
        return full, (as_host_data if module.needs_connection else as_data)(mres.facts)

    @staticmethod
    def _outcome(run: Any, ctx: TaskContext, module: Any) -> tuple[ModuleResult, dict[str, Any]]:
        """One module run: its result, and as registered (what the module, the host, returned
        is data; a connected module's, the host's word)."""
        try:
            mres = run(ctx)
        except ModuleFailure as exc:
            mres = ModuleResult(failed=True, msg=exc.msg, data=dict(exc.data))
        return mres, (as_host_data if module.needs_connection else as_data)(mres.as_dict())

    def _changed_failed_when(
        self, task: Task, full: dict[str, Any], post: Mapping[str, Any]
    ) -> None:
        """changed_when, then failed_when, on the module's result. As in Ansible, an error in
        either (undefined, not a boolean) fails the task and keeps the module's result, the
        error's text in `changed_when_result` / `failed_when_result`."""
        which = "changed"
        try:
            if task.changed_when is not None:
                full["changed"] = self.templar.condition(
                    list(task.changed_when), post, str(task.pos)
                )
            which = "failed"
            if task.failed_when is not None:
                full["failed"] = full["failed_when_result"] = self.templar.condition(
                    list(task.failed_when), post, str(task.pos)
                )
        except TemplateError as exc:
            full["failed"] = True
            full[f"{which}_when_result"] = str(exc)

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


def failed_task_var(failure: TaskResult | None, task: Task | None = None) -> dict[str, Any]:
    """`ansible_failed_task` in a rescue, as Ansible fills it: the task's own name (no role
    prefix; "" when it has none), the action as written, its arguments and keywords."""
    if failure is None:
        return {}
    if task is None or failure.position != str(task.pos):
        return {"name": failure.task, "action": failure.action, "position": failure.position}
    args = {("_raw_params" if k == "_raw" else k): v for k, v in task.args.items()}
    return {
        "name": task.name or "",
        "action": task.written_action or task.action,
        "args": args,
        "when": list(task.when),
        "tags": sorted(task.tags),
        "register": task.register,
        "loop": task.loop,
        "notify": list(task.notify) or None,
        "ignore_errors": task.ignore_errors,
        "become": bool(task.become),
        "become_user": task.become_user,
        "delegate_to": task.delegate_to,
        "retries": task.retries,
        "position": failure.position,
    }


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
