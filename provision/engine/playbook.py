"""Load and validate a whole playbook before anything runs.

Everything static is resolved here: imports (`import_tasks`, `import_role`, `import_playbook`),
roles, keyword inheritance (a block's or import's `when`, `tags`, `become`, `vars` … pass to
its tasks), module names and arguments, Jinja syntax, handler names. All errors are collected
and reported together, each with file:line:col, so one run shows every mistake.
`include_tasks` with a templated file name is the only thing loaded later (per host).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from provision.config import load_config
from provision.engine.templating import check_syntax, is_template
from provision.engine.yamlpos import Pos, YList, YMap, display_path, load_yaml
from provision.errors import ConfigError
from provision.modules.base import (
    ArgError,
    Module,
    canonical_name,
    get_module,
    module_names,
    normalize_args,
    suggest,
)


class PlaybookError(ConfigError):
    """One or more problems in a playbook; the message lists each with its position."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        head = "playbook has errors:" if len(problems) > 1 else "playbook error:"
        body = "\n".join(f"  {p}" for p in problems[:50])
        more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        super().__init__(f"{head}\n{body}{more}" if len(problems) > 1 else problems[0])


PLAY_KEYWORDS = {
    "name",
    "hosts",
    "vars",
    "vars_files",
    "gather_facts",
    "gather_subset",
    "become",
    "become_user",
    "become_method",
    "environment",
    "tasks",
    "handlers",
    "pre_tasks",
    "post_tasks",
    "roles",
    "tags",
    "any_errors_fatal",
    "force_handlers",
    "ignore_errors",
    "ignore_unreachable",
    "no_log",
    "check_mode",
    "diff",
    "remote_user",
    "connection",
    "strategy",
    "timeout",
    "serial",
    "max_fail_percentage",
    "order",
    "module_defaults",
    "collections",
    "vars_prompt",
}
TASK_KEYWORDS = {
    "name",
    "when",
    "loop",
    "loop_control",
    "with_items",
    "with_list",
    "with_dict",
    "register",
    "notify",
    "changed_when",
    "failed_when",
    "ignore_errors",
    "ignore_unreachable",
    "tags",
    "become",
    "become_user",
    "become_method",
    "environment",
    "retries",
    "until",
    "delay",
    "run_once",
    "no_log",
    "vars",
    "args",
    "check_mode",
    "diff",
    "timeout",
    "delegate_to",
    "local_action",
    "async",
    "poll",
    "any_errors_fatal",
    "listen",
    "debugger",
    "collections",
    "throttle",
}
BLOCK_KEYWORDS = {
    "name",
    "block",
    "rescue",
    "always",
    "when",
    "tags",
    "become",
    "become_user",
    "become_method",
    "environment",
    "vars",
    "ignore_errors",
    "ignore_unreachable",
    "no_log",
    "any_errors_fatal",
    "check_mode",
    "diff",
    "run_once",
    "timeout",
    "delegate_to",
    "collections",
}
SPECIAL_ACTIONS = {
    "import_tasks",
    "include_tasks",
    "include",
    "import_role",
    "include_role",
    "meta",
}
META_ACTIONS = {
    "flush_handlers",
    "noop",
    "end_play",
    "end_batch",
    "end_host",
    "clear_host_errors",
}
DELEGATE_LOCAL = ("localhost", "127.0.0.1", "::1")
UNSUPPORTED = {
    "local_action": "local_action is not supported: use a play with `hosts: localhost`",
    "async": "async/poll are not supported: long steps stream their output; use a timeout instead",
    "poll": "async/poll are not supported",
    "max_fail_percentage": "max_fail_percentage is not supported (any_errors_fatal is)",
    "debugger": "debugger is not supported",
    "throttle": "throttle is not supported (use --forks)",
    "module_defaults": "module_defaults is not supported",
}
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ids = itertools.count(1)


@dataclass
class Role:
    name: str
    path: Path
    defaults: dict[str, Any] = field(default_factory=dict)
    vars: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    handlers: list[Task] = field(default_factory=list)


@dataclass
class Inherit:
    """Keywords a block/import/role passes to the tasks inside it."""

    when: tuple[Any, ...] = ()
    tags: frozenset[str] = frozenset()
    vars: tuple[Mapping[str, Any], ...] = ()
    become: bool | None = None
    become_user: str | None = None
    environment: tuple[Any, ...] = ()
    no_log: Any = None
    ignore_errors: Any = None
    ignore_unreachable: Any = None
    check_mode: Any = None
    diff: Any = None
    run_once: Any = None
    any_errors_fatal: Any = None
    timeout: Any = None
    delegate_to: Any = None
    role: Role | None = None


@dataclass
class Node:
    pos: Pos
    name: str | None = None
    id: int = field(default_factory=lambda: next(_ids))
    when: tuple[Any, ...] = ()
    tags: frozenset[str] = frozenset()
    vars: tuple[Mapping[str, Any], ...] = ()
    become: bool | None = None
    become_user: str | None = None
    environment: tuple[Any, ...] = ()
    no_log: Any = None
    ignore_errors: Any = None
    ignore_unreachable: Any = None
    check_mode: Any = None
    diff: Any = None
    run_once: Any = None
    any_errors_fatal: Any = None
    timeout: Any = None
    delegate_to: Any = None  # only the controller (localhost) is supported
    role: Role | None = None
    base_dir: Path = Path(".")


@dataclass
class Task(Node):
    action: str = ""
    module: Module | None = None
    args: dict[str, Any] = field(default_factory=dict)
    loop: Any = None
    loop_kind: str | None = None  # loop | with_items | with_list | with_dict
    loop_control: dict[str, Any] = field(default_factory=dict)
    register: str | None = None
    notify: list[str] = field(default_factory=list)
    changed_when: tuple[Any, ...] | None = None
    failed_when: tuple[Any, ...] | None = None
    retries: Any = None
    until: tuple[Any, ...] | None = None
    delay: Any = None
    listen: list[str] = field(default_factory=list)

    @property
    def display_name(self) -> str:
        name = self.name or self.action
        return f"{self.role.name} : {name}" if self.role else name


@dataclass
class Block(Node):
    block: list[Node] = field(default_factory=list)
    rescue: list[Node] = field(default_factory=list)
    always: list[Node] = field(default_factory=list)
    when_once: bool = False  # include_role: `when` decides once for the whole role


@dataclass
class Include(Node):
    """include_tasks: the file (maybe templated) is loaded when reached, per host."""

    file: str = ""
    loop: Any = None
    loop_kind: str | None = None
    loop_control: dict[str, Any] = field(default_factory=dict)
    static_children: list[Node] | None = None
    inherit: Inherit = field(default_factory=Inherit)

    @property
    def display_name(self) -> str:
        return self.name or f"include_tasks {self.file}"


@dataclass
class Meta(Node):
    action: str = "noop"

    @property
    def display_name(self) -> str:
        return self.name or f"meta: {self.action}"


@dataclass
class Play:
    pos: Pos
    name: str
    hosts: str | list[str]
    vars: dict[str, Any] = field(default_factory=dict)
    vars_files: list[tuple[str, Pos]] = field(default_factory=list)
    gather_facts: bool = True
    become: bool | None = None
    become_user: str | None = None
    environment: Any = None
    connection: str | None = None
    remote_user: str | None = None
    any_errors_fatal: bool = False
    force_handlers: bool = False
    pre_tasks: list[Node] = field(default_factory=list)
    roles: list[Node] = field(default_factory=list)
    tasks: list[Node] = field(default_factory=list)
    post_tasks: list[Node] = field(default_factory=list)
    handlers: list[Task] = field(default_factory=list)
    tags: frozenset[str] = frozenset()
    base_dir: Path = Path(".")
    check_mode: Any = None
    diff: Any = None
    serial: Any = None  # batches (int, "N%", or a list of those); None: all hosts at once
    vars_prompt: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Playbook:
    path: Path
    plays: list[Play]

    @property
    def base_dir(self) -> Path:
        return self.path.parent


# -- loading -----------------------------------------------------------------------------------


class _Loader:
    def __init__(self, playbook_dir: Path) -> None:
        self.playbook_dir = playbook_dir
        self.problems: list[str] = []
        self.role_cache: dict[tuple[str, str], Role] = {}
        self.file_stack: list[Path] = []
        self.config = load_config()  # ansible.cfg: roles_path, become defaults
        self.play_roles: set[tuple[str, str]] = set()  # dependencies already in this play
        self.role_stack: list[Path] = []

    @staticmethod
    def _or(value: Any, default: Any) -> Any:
        return default if value is None else value

    def error(self, pos: Pos | None, message: str) -> None:
        self.problems.append(f"{pos}: {message}" if pos else message)

    # -- values --------------------------------------------------------------------------------
    def check_templates(self, value: Any, pos: Pos) -> None:
        """Jinja syntax errors in any string, reported at the YAML position of the value."""
        if isinstance(value, str):
            if is_template(value):
                problem = check_syntax(value)
                if problem:
                    self.error(pos, f"template error: {problem}")
        elif isinstance(value, YMap):
            for k, v in value.items():
                self.check_templates(v, value.where(k, value=True))
        elif isinstance(value, Mapping):
            for v in value.values():
                self.check_templates(v, pos)
        elif isinstance(value, YList):
            for i, v in enumerate(value):
                self.check_templates(v, value.where(i))
        elif isinstance(value, list):
            for v in value:
                self.check_templates(v, pos)

    def check_expression(self, value: Any, pos: Pos, what: str) -> None:
        """`when`/`until`/... hold bare expressions; check them as `{{ expr }}`."""
        for expr in value if isinstance(value, list) else [value]:
            if isinstance(expr, bool) or expr is None:
                continue
            if not isinstance(expr, (str, int, float)):
                self.error(pos, f"{what} must be an expression (string), got {type(expr).__name__}")
                continue
            text = str(expr).strip()
            if text.startswith("{{") and text.endswith("}}"):
                text = text[2:-2]
            problem = check_syntax("{{ " + text + " }}")
            if problem:
                self.error(pos, f"{what}: invalid expression {expr!r}: {problem}")

    @staticmethod
    def as_list(value: Any) -> list[Any]:
        if value is None:
            return []
        return list(value) if isinstance(value, list) else [value]

    def tags_of(self, data: YMap) -> frozenset[str]:
        raw = data.get("tags")
        if raw is None:
            return frozenset()
        if isinstance(raw, (str, int)):
            items = [t.strip() for t in str(raw).split(",")]
        elif isinstance(raw, list):
            items = [str(t).strip() for t in raw]
        else:
            self.error(data.where("tags", True), "tags must be a string or a list of strings")
            return frozenset()
        return frozenset(t for t in items if t)

    def vars_of(self, data: YMap, key: str = "vars") -> dict[str, Any]:
        raw = data.get(key)
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.error(data.where(key, True), f"{key} must be a mapping of name: value")
            return {}
        for name in raw:
            if not isinstance(name, str) or not _VAR_NAME.match(name):
                where = raw.where(name) if isinstance(raw, YMap) else data.where(key, True)
                self.error(
                    where,
                    f"invalid variable name {name!r} (letters, digits and _; not starting with a digit)",
                )
        self.check_templates(raw, data.where(key, True))
        return dict(raw)

    def bool_keyword(self, data: YMap, key: str) -> Any:
        value = data.get(key)
        if (
            value is None
            or isinstance(value, bool)
            or (isinstance(value, str) and is_template(value))
        ):
            return value
        text = str(value).strip().lower()
        if text in ("yes", "true", "on", "1"):
            return True
        if text in ("no", "false", "off", "0"):
            return False
        self.error(data.where(key, True), f"{key} must be true or false, got {value!r}")
        return None

    def extend(self, inherit: Inherit, data: YMap, *, role: Role | None = None) -> Inherit:
        """The inheritance a block/import passes on: its keywords over its parent's."""
        env = data.get("environment")
        if (
            env is not None
            and not isinstance(env, Mapping)
            and not (isinstance(env, str) and is_template(env))
        ):
            self.error(
                data.where("environment", True), "environment must be a mapping of NAME: value"
            )
            env = None
        when = self.as_list(data.get("when"))
        if when:
            self.check_expression(when, data.where("when", True), "when")
        new_vars = self.vars_of(data)
        return Inherit(
            when=inherit.when + tuple(when),
            tags=inherit.tags | self.tags_of(data),
            vars=inherit.vars + ((new_vars,) if new_vars else ()),
            become=self._pick(self.bool_keyword(data, "become"), inherit.become),
            become_user=self._pick(data.get("become_user"), inherit.become_user),
            environment=inherit.environment + ((env,) if env else ()),
            no_log=self._pick(self.bool_keyword(data, "no_log"), inherit.no_log),
            ignore_errors=self._pick(
                self.bool_keyword(data, "ignore_errors"), inherit.ignore_errors
            ),
            ignore_unreachable=self._pick(
                self.bool_keyword(data, "ignore_unreachable"), inherit.ignore_unreachable
            ),
            check_mode=self._pick(self.bool_keyword(data, "check_mode"), inherit.check_mode),
            diff=self._pick(self.bool_keyword(data, "diff"), inherit.diff),
            run_once=self._pick(self.bool_keyword(data, "run_once"), inherit.run_once),
            any_errors_fatal=self._pick(
                self.bool_keyword(data, "any_errors_fatal"), inherit.any_errors_fatal
            ),
            timeout=self._pick(data.get("timeout"), inherit.timeout),
            delegate_to=self._pick(self.delegate_of(data), inherit.delegate_to),
            role=role or inherit.role,
        )

    def delegate_of(self, data: YMap) -> Any:
        value = data.get("delegate_to")
        if value is None:
            return None
        if not isinstance(value, str) or not (
            is_template(value) or value in DELEGATE_LOCAL
        ):
            self.error(
                data.where("delegate_to", True),
                f"delegate_to: {value!r} is not supported: only the controller "
                "(delegate_to: localhost) is; run the step in a play for that host instead",
            )
            return None
        if is_template(value):
            self.check_templates(value, data.where("delegate_to", True))
        return value

    @staticmethod
    def _pick(own: Any, inherited: Any) -> Any:
        return inherited if own is None else own

    def node_fields(self, data: YMap, inherit: Inherit, base_dir: Path) -> dict[str, Any]:
        """The Node fields of a task/block: own keywords over inherited ones."""
        own = self.extend(inherit, data)
        name = data.get("name")
        if name is not None and not isinstance(name, (str, int, float)):
            self.error(data.where("name", True), "name must be a string")
            name = None
        if name is not None:
            self.check_templates(str(name), data.where("name", True))
        return dict(
            pos=data.pos,
            name=None if name is None else str(name),
            when=own.when,
            tags=own.tags,
            vars=own.vars,
            become=own.become,
            become_user=own.become_user,
            environment=own.environment,
            no_log=own.no_log,
            ignore_errors=own.ignore_errors,
            ignore_unreachable=own.ignore_unreachable,
            check_mode=own.check_mode,
            diff=own.diff,
            run_once=own.run_once,
            any_errors_fatal=own.any_errors_fatal,
            timeout=own.timeout,
            delegate_to=own.delegate_to,
            role=own.role,
            base_dir=base_dir,
        )

    # -- task lists ----------------------------------------------------------------------------
    def task_list(
        self,
        data: Any,
        pos: Pos,
        inherit: Inherit,
        base_dir: Path,
        what: str = "tasks",
        handlers: bool = False,
    ) -> list[Node]:
        if data is None:
            return []
        if not isinstance(data, list):
            self.error(
                pos, f"{what} must be a list of tasks (each starting with '- name:' or '- module:')"
            )
            return []
        nodes: list[Node] = []
        for i, item in enumerate(data):
            where = data.where(i) if isinstance(data, YList) else pos
            if not isinstance(item, YMap):
                self.error(
                    where,
                    f"each entry of {what} must be a mapping (a task), got {type(item).__name__}: {item!r}",
                )
                continue
            node = self.task(item, inherit, base_dir, handlers=handlers)
            if node is not None:
                nodes.append(node)
        return nodes

    def task(
        self, data: YMap, inherit: Inherit, base_dir: Path, handlers: bool = False
    ) -> Node | None:
        data = canonical_actions(data)
        if "block" in data:
            return self.block(data, inherit, base_dir)
        for key in data:
            if key in UNSUPPORTED:
                self.error(data.where(key), UNSUPPORTED[key])
        keywords = TASK_KEYWORDS
        actions = [k for k in data if k not in keywords]
        known = [k for k in actions if k in SPECIAL_ACTIONS or get_module(str(k)) is not None]
        unknown = [k for k in actions if k not in known]
        for key in unknown:
            if known:
                hint = suggest(str(key), sorted(TASK_KEYWORDS))
                self.error(data.where(key), f"unknown task keyword '{key}'{hint}")
            else:
                hint = suggest(str(key), module_names() + sorted(TASK_KEYWORDS | SPECIAL_ACTIONS))
                self.error(
                    data.where(key),
                    f"unknown module '{key}'{hint}; modules: {', '.join(module_names())}",
                )
        if not actions:
            self.error(
                data.pos,
                "task has no action: add a module, e.g. `command: ...` or `debug: msg=...`",
            )
            return None
        if len(known) > 1:
            self.error(
                data.where(known[1]), f"a task runs one module; found {', '.join(map(str, known))}"
            )
            return None
        if not known:
            return None
        action = str(known[0])
        if action == "listen" and not handlers:
            self.error(data.where("listen"), "listen is only valid in handlers")
        if action in ("import_tasks", "include_tasks", "include"):
            return self.include(data, action, inherit, base_dir)
        if action in ("import_role", "include_role"):
            return self.role_include(data, action, inherit, base_dir)
        if action == "meta":
            value = data.get("meta")
            if value not in META_ACTIONS:
                self.error(
                    data.where("meta", True),
                    f"meta: {value!r} is not supported (use one of {', '.join(sorted(META_ACTIONS))})",
                )
            return Meta(action=str(value), **self.node_fields(data, inherit, base_dir))
        return self.module_task(data, action, inherit, base_dir, handlers)

    def module_task(
        self, data: YMap, action: str, inherit: Inherit, base_dir: Path, handlers: bool
    ) -> Task | None:
        cls = get_module(action)
        assert cls is not None
        module = cls()
        fields = self.node_fields(data, inherit, base_dir)
        raw = data.get(action)
        where = data.where(action, True)
        problems_before = len(self.problems)
        args = self.module_args(module, raw, where)
        extra = data.get("args")
        if extra is not None:
            if isinstance(extra, Mapping):
                args = {**dict(extra), **args}
            else:
                self.error(data.where("args", True), "args must be a mapping")
        self.check_templates(args, where)
        try:
            if len(self.problems) == problems_before:  # unparsable args: one error is enough
                normalize_args(module, args, static=True)
        except ArgError as exc:
            arg_where = (
                raw.where(exc.key, not exc.at_key)
                if isinstance(raw, YMap) and exc.key in raw
                else where
            )
            self.error(arg_where, f"{action}: {exc}")
        task = Task(action=cls.name, module=module, args=args, **fields)
        if cls.name == "add_host" and task.run_once is None:
            task.run_once = True  # Ansible runs add_host once, bypassing the host loop
        self.loop_fields(task, data)
        register = data.get("register")
        if register is not None:
            if not isinstance(register, str) or not _VAR_NAME.match(register):
                self.error(
                    data.where("register", True),
                    f"register needs a variable name, got {register!r}",
                )
            else:
                task.register = register
        notify = data.get("notify")
        if notify is not None:
            if isinstance(notify, str):
                task.notify = [notify]
            elif isinstance(notify, list) and all(isinstance(n, str) for n in notify):
                task.notify = list(notify)
            else:
                self.error(
                    data.where("notify", True), "notify must be a handler name or a list of names"
                )
        for key in ("changed_when", "failed_when", "until"):
            if key in data:
                value = self.as_list(data[key])
                self.check_expression(value, data.where(key, True), key)
                setattr(task, key, tuple(value))
        for key in ("retries", "delay"):
            value = data.get(key)
            if value is not None:
                if isinstance(value, str) and is_template(value):
                    self.check_templates(value, data.where(key, True))
                elif not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    self.error(
                        data.where(key, True), f"{key} must be a whole number >= 0, got {value!r}"
                    )
                setattr(task, key, value)
        if handlers:
            listen = data.get("listen")
            task.listen = [listen] if isinstance(listen, str) else list(listen or [])
        elif "listen" in data:
            self.error(data.where("listen"), "listen is only valid in handlers")
        return task

    def loop_fields(self, node: Task | Include, data: YMap) -> None:
        kinds = [k for k in ("loop", "with_items", "with_list", "with_dict") if k in data]
        if len(kinds) > 1:
            self.error(data.where(kinds[1]), f"use one of loop / with_*: found {', '.join(kinds)}")
        if kinds:
            node.loop_kind = kinds[0]
            node.loop = data[kinds[0]]
            self.check_templates(node.loop, data.where(kinds[0], True))
            if not isinstance(node.loop, (list, str, Mapping)):
                self.error(
                    data.where(kinds[0], True),
                    f"{kinds[0]} must be a list or a template giving one",
                )
        control = data.get("loop_control")
        if control is not None:
            if not isinstance(control, Mapping):
                self.error(data.where("loop_control", True), "loop_control must be a mapping")
                return
            allowed = {"loop_var", "label", "index_var", "pause", "extended"}
            for key in control:
                if key not in allowed:
                    where = (
                        control.where(key)
                        if isinstance(control, YMap)
                        else data.where("loop_control", True)
                    )
                    self.error(
                        where, f"unknown loop_control key '{key}'{suggest(str(key), allowed)}"
                    )
            self.check_templates(control, data.where("loop_control", True))
            node.loop_control = dict(control)

    def module_args(self, module: Module, raw: Any, where: Pos) -> dict[str, Any]:
        if raw is None:
            return {}
        if isinstance(raw, Mapping):
            return dict(raw)
        if isinstance(raw, (str, int, float)) and not isinstance(raw, bool):
            try:
                return parse_kv(str(raw), module)
            except ValueError as exc:
                self.error(where, f"{module.name}: {exc}")
                return {}
        if isinstance(raw, list) and module.name == "command":
            return {"argv": list(raw)}
        self.error(
            where,
            f"{module.name}: arguments must be a mapping or key=value text, got {type(raw).__name__}",
        )
        return {}

    def block(self, data: YMap, inherit: Inherit, base_dir: Path) -> Block:
        for key in data:
            if key in UNSUPPORTED:
                self.error(data.where(key), UNSUPPORTED[key])
            elif key not in BLOCK_KEYWORDS:
                self.error(
                    data.where(key),
                    f"unknown block keyword '{key}'{suggest(str(key), BLOCK_KEYWORDS)}",
                )
        inner = self.extend(inherit, data)
        fields = self.node_fields(data, inherit, base_dir)
        return Block(
            block=self.task_list(
                data.get("block"), data.where("block", True), inner, base_dir, "block"
            ),
            rescue=self.task_list(
                data.get("rescue"), data.where("rescue", True), inner, base_dir, "rescue"
            ),
            always=self.task_list(
                data.get("always"), data.where("always", True), inner, base_dir, "always"
            ),
            **{**fields, "when": ()},  # the block's when already went to each task inside
        )

    def include(self, data: YMap, action: str, inherit: Inherit, base_dir: Path) -> Node | None:
        raw = data.get(action)
        where = data.where(action, True)
        if isinstance(raw, Mapping):
            extra = set(raw) - {"file", "apply"}
            if extra:
                self.error(
                    where, f"{action}: unknown argument(s) {', '.join(map(str, extra))} (use file:)"
                )
            file = raw.get("file")
        else:
            file = raw
        if not isinstance(file, str) or not file.strip():
            self.error(where, f"{action} needs a file name")
            return None
        self.check_templates(file, where)
        for key in data:
            if key not in (
                action,
                "name",
                "when",
                "tags",
                "vars",
                "loop",
                "loop_control",
                "with_items",
                "with_list",
                "with_dict",
                "become",
                "become_user",
                "environment",
                "no_log",
                "ignore_errors",
                "check_mode",
                "diff",
                "timeout",
                "run_once",
                "any_errors_fatal",
            ):
                self.error(data.where(key), f"'{key}' is not valid on {action}")
        if action == "import_tasks":
            if is_template(file):
                self.error(
                    where,
                    "import_tasks is static: its file name can't use variables (use include_tasks)",
                )
                return None
            if any(k in data for k in ("loop", "with_items", "with_list", "with_dict")):
                self.error(
                    data.where("loop") if "loop" in data else where,
                    "import_tasks can't loop (use include_tasks)",
                )
            inner = self.extend(inherit, data)
            path = self.find_tasks_file(file, base_dir, inherit.role, where)
            fields = self.node_fields(data, inherit, base_dir)
            children = self.load_tasks_file(path, inner, where) if path else []
            return Block(block=children, **{**fields, "when": ()})
        # include_tasks: `when` decides once, tags apply to the include only
        fields = self.node_fields(data, inherit, base_dir)
        child_inherit = replace(self.extend(inherit, data), when=inherit.when, tags=inherit.tags)
        if isinstance(raw, Mapping) and isinstance(raw.get("apply"), YMap):
            child_inherit = self.extend(child_inherit, raw["apply"])  # `apply:` keywords
        node = Include(file=file, inherit=child_inherit, **fields)
        self.loop_fields(node, data)  # type: ignore[arg-type]
        if not is_template(file):
            path = self.find_tasks_file(file, base_dir, inherit.role, where)
            node.static_children = self.load_tasks_file(path, child_inherit, where) if path else []
        return node

    def find_tasks_file(
        self, file: str, base_dir: Path, role: Role | None, where: Pos
    ) -> Path | None:
        candidates = []
        path = Path(file).expanduser()
        if path.is_absolute():
            candidates.append(path)
        else:
            candidates.append(base_dir / path)
            if role is not None:
                candidates.append(role.path / "tasks" / path)
            candidates.append(self.playbook_dir / path)
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        self.error(
            where,
            f"tasks file {file!r} not found (looked in: {', '.join(display_path(c) for c in candidates)})",
        )
        return None

    def load_tasks_file(self, path: Path, inherit: Inherit, where: Pos) -> list[Node]:
        resolved = path.resolve()
        if resolved in self.file_stack:
            chain = " -> ".join(display_path(p) for p in [*self.file_stack, resolved])
            self.error(where, f"import loop: {chain}")
            return []
        try:
            data = load_yaml(path)
        except ConfigError as exc:
            self.problems.append(str(exc))
            return []
        self.file_stack.append(resolved)
        try:
            start = Pos(display_path(path), 1, 1)
            return self.task_list(
                data,
                data.pos if isinstance(data, (YMap, YList)) else start,
                inherit,
                path.parent,
                display_path(path),
            )
        finally:
            self.file_stack.pop()

    # -- roles ---------------------------------------------------------------------------------
    def find_role(self, name: str, base_dir: Path, where: Pos) -> Path | None:
        candidates = [base_dir / "roles" / name, self.playbook_dir / "roles" / name]
        extra_paths = os.environ.get("PROVISION_ROLES_PATH", "").split(os.pathsep)
        for extra in [*extra_paths, *self.config.roles_path]:  # roles_path from ansible.cfg
            if extra:
                candidates.append(Path(extra).expanduser() / name)
        candidates.append(base_dir / name)
        for candidate in candidates:
            if (
                (candidate / "tasks").is_dir()
                or (candidate / "handlers").is_dir()
                or (candidate / "defaults").is_dir()
            ):
                return candidate
        self.error(
            where,
            f"role {name!r} not found (looked in: {', '.join(display_path(c) for c in candidates)})",
        )
        return None

    def load_role(
        self,
        name: str,
        params: dict[str, Any],
        data: YMap,
        inherit: Inherit,
        base_dir: Path,
        where: Pos,
        tasks_from: str = "main",
        when_once: bool = False,
    ) -> Block | None:
        path = self.find_role(name, base_dir, where)
        if path is None:
            return None

        def read_vars(kind: str) -> dict[str, Any]:
            for ext in ("yml", "yaml"):
                file = path / kind / f"main.{ext}"
                if file.is_file():
                    try:
                        loaded = load_yaml(file)
                    except ConfigError as exc:
                        self.problems.append(str(exc))
                        return {}
                    if loaded is None:
                        return {}
                    if not isinstance(loaded, Mapping):
                        self.error(
                            Pos(display_path(file), 1, 1),
                            f"role {kind} must be a mapping of name: value",
                        )
                        return {}
                    self.check_templates(loaded, Pos(display_path(file), 1, 1))
                    return dict(loaded)
            return {}

        role = Role(
            name=name,
            path=path,
            defaults=read_vars("defaults"),
            vars=read_vars("vars"),
            params=params,
        )
        role_inherit = self.extend(inherit, data, role=role)
        if when_once:
            role_inherit = replace(role_inherit, when=inherit.when)
        apply = data.get(next((k for k in data if k in ("include_role", "import_role")), ""))
        if isinstance(apply, Mapping) and isinstance(apply.get("apply"), YMap):
            role_inherit = self.extend(role_inherit, apply["apply"], role=role)  # `apply:` keywords
        depends = self.role_dependencies(path, replace(inherit, vars=()), where)
        tasks: list[Node] = []
        for ext in ("yml", "yaml"):
            file = path / "tasks" / f"{tasks_from}.{ext}"
            if file.is_file():
                tasks = self.load_tasks_file(file, role_inherit, where)
                break
        else:
            if tasks_from != "main":
                self.error(
                    where,
                    f"role {name}: tasks file {tasks_from}.yml not found in {display_path(path / 'tasks')}",
                )
        for ext in ("yml", "yaml"):
            file = path / "handlers" / f"main.{ext}"
            if file.is_file():
                data_h = self._load(file)
                handler_inherit = replace(role_inherit, when=(), tags=frozenset())
                role.handlers = [
                    n
                    for n in self.task_list(
                        data_h,
                        Pos(display_path(file), 1, 1),
                        handler_inherit,
                        file.parent,
                        "handlers",
                        handlers=True,
                    )
                    if isinstance(n, Task)
                ]
                break
        for dep in depends:  # meta/main.yml dependencies run first, their handlers join
            if isinstance(dep, Block) and dep.role is not None:
                role.handlers.extend(dep.role.handlers)
        tasks = [*depends, *tasks]
        fields = self.node_fields(data, inherit, base_dir)
        fields["name"] = fields["name"] or f"role {name}"
        if not when_once:
            fields["when"] = ()
        return Block(block=tasks, when_once=when_once, **{**fields, "role": role})

    def role_dependencies(self, path: Path, inherit: Inherit, where: Pos) -> list[Node]:
        """The roles `meta/main.yml` lists under `dependencies:` (searched beside this role too)."""
        for ext in ("yml", "yaml"):
            file = path / "meta" / f"main.{ext}"
            if file.is_file():
                meta = self._load(file)
                if not isinstance(meta, Mapping) or not meta.get("dependencies"):
                    return []
                deps = meta["dependencies"]
                at = meta.where("dependencies", True) if isinstance(meta, YMap) else where
                if path.resolve() in self.role_stack:
                    self.error(at, f"role dependency loop through {display_path(path)}")
                    return []
                self.role_stack.append(path.resolve())
                try:
                    return self.roles_section(deps, at, inherit, path.parent, dependency=True)
                finally:
                    self.role_stack.pop()
        return []

    def _load(self, file: Path) -> Any:
        try:
            return load_yaml(file)
        except ConfigError as exc:
            self.problems.append(str(exc))
            return None

    def role_include(
        self, data: YMap, action: str, inherit: Inherit, base_dir: Path
    ) -> Node | None:
        raw = data.get(action)
        where = data.where(action, True)
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            self.error(where, f"{action} needs `name: ROLE`")
            return None
        unknown = set(raw) - {
            "name",
            "tasks_from",
            "vars_from",
            "defaults_from",
            "handlers_from",
            "public",
            "apply",
        }
        for key in unknown:
            self.error(where, f"{action}: unknown argument '{key}'")
        if is_template(raw["name"]):
            self.error(where, f"{action}: the role name can't use variables")
            return None
        params = self.vars_of(data)
        return self.load_role(
            raw["name"],
            params,
            data,
            inherit,
            base_dir,
            where,
            tasks_from=str(raw.get("tasks_from") or "main"),
            when_once=action == "include_role",
        )

    def roles_section(
        self, data: Any, pos: Pos, inherit: Inherit, base_dir: Path, dependency: bool = False
    ) -> list[Node]:
        if data is None:
            return []
        if not isinstance(data, list):
            self.error(pos, "roles must be a list of role names or `- role: NAME` entries")
            return []
        blocks: list[Node] = []
        for i, entry in enumerate(data):
            where = data.where(i) if isinstance(data, YList) else pos
            if isinstance(entry, str):
                entry_map = YMap({"role": entry})
                entry_map.pos, entry_map.key_pos, entry_map.value_pos = where, {}, {}
            elif isinstance(entry, YMap) and isinstance(entry.get("role", entry.get("name")), str):
                entry_map = entry
            else:
                self.error(where, "a role entry is a name or a mapping with `role: NAME`")
                continue
            name = entry_map.get("role", entry_map.get("name"))
            keywords = {
                "role",
                "name",
                "when",
                "tags",
                "become",
                "become_user",
                "environment",
                "vars",
                "no_log",
                "ignore_errors",
                "check_mode",
                "diff",
                "any_errors_fatal",
                "timeout",
            }
            params = (
                dict(entry_map.get("vars") or {})
                if isinstance(entry_map.get("vars"), Mapping)
                else {}
            )
            for key, value in entry_map.items():
                if key not in keywords:
                    if isinstance(key, str) and _VAR_NAME.match(key):
                        params[key] = value  # role parameters, as in Ansible
                    else:
                        self.error(entry_map.where(key), f"invalid role parameter {key!r}")
            clean = YMap(
                {
                    k: v
                    for k, v in entry_map.items()
                    if k in keywords and k not in ("role", "name", "vars")
                }
            )
            clean.pos, clean.key_pos, clean.value_pos = (
                entry_map.pos,
                entry_map.key_pos,
                entry_map.value_pos,
            )
            if dependency:
                key = (str(name), repr(sorted(params.items(), key=lambda kv: str(kv[0]))))
                if key in self.play_roles:
                    continue  # Ansible runs a dependency once per play (same parameters)
                self.play_roles.add(key)
            block = self.load_role(str(name), params, clean, inherit, base_dir, where)
            if block is not None:
                blocks.append(block)
        return blocks

    # -- plays ---------------------------------------------------------------------------------
    def play(self, data: YMap, base_dir: Path) -> Play | None:
        for key in data:
            if key in UNSUPPORTED:
                self.error(data.where(key), UNSUPPORTED[key])
            elif key not in PLAY_KEYWORDS:
                self.error(
                    data.where(key),
                    f"unknown play keyword '{key}'{suggest(str(key), PLAY_KEYWORDS)}",
                )
        hosts = data.get("hosts")
        if hosts is None:
            self.error(data.pos, "play needs `hosts:` (a pattern like all, a group, or a:b)")
            return None
        if isinstance(hosts, list):
            hosts = [str(h) for h in hosts]
        elif not isinstance(hosts, str):
            hosts = str(hosts)
        play_vars = self.vars_of(data)
        env = data.get("environment")
        if env is not None and not isinstance(env, Mapping):
            self.error(
                data.where("environment", True), "environment must be a mapping of NAME: value"
            )
            env = None
        gather = self.bool_keyword(data, "gather_facts")
        connection = data.get("connection")
        if connection not in (None, "local", "ssh", "smart", "paramiko"):
            self.error(
                data.where("connection", True),
                f"connection {connection!r} is not supported (local or ssh)",
            )
        play_inherit = Inherit(
            tags=self.tags_of(data),
            become=self._or(self.bool_keyword(data, "become"), self.config.become),
            become_user=self._or(data.get("become_user"), self.config.become_user),
            environment=(env,) if env else (),
            no_log=self.bool_keyword(data, "no_log"),
            ignore_errors=self.bool_keyword(data, "ignore_errors"),
            ignore_unreachable=self.bool_keyword(data, "ignore_unreachable"),
            check_mode=self.bool_keyword(data, "check_mode"),
            diff=self.bool_keyword(data, "diff"),
            any_errors_fatal=self.bool_keyword(data, "any_errors_fatal"),
            timeout=data.get("timeout"),
        )
        vars_files: list[tuple[str, Pos]] = []
        raw_files = data.get("vars_files")
        if raw_files is not None:
            if not isinstance(raw_files, list):
                self.error(
                    data.where("vars_files", True), "vars_files must be a list of file names"
                )
            else:
                for i, f in enumerate(raw_files):
                    where = raw_files.where(i) if isinstance(raw_files, YList) else data.pos
                    if not isinstance(f, str):
                        self.error(where, "vars_files entries must be file names")
                        continue
                    vars_files.append((f, where))
                    if not is_template(f):
                        path = Path(f).expanduser()
                        path = path if path.is_absolute() else base_dir / path
                        if not path.is_file():
                            self.error(where, f"vars file {f!r} not found ({display_path(path)})")
                        else:
                            loaded = self._load(path)
                            if loaded is not None and not isinstance(loaded, Mapping):
                                self.error(
                                    where, f"vars file {f!r} must hold a mapping of name: value"
                                )
        self.play_roles = set()
        serial = self.serial_of(data)
        prompts = self.prompts_of(data)
        name = data.get("name")
        play = Play(
            pos=data.pos,
            name=str(name)
            if name is not None
            else (hosts if isinstance(hosts, str) else ",".join(hosts)),
            hosts=hosts,
            vars=play_vars,
            vars_files=vars_files,
            gather_facts=True if gather is None else bool(gather),
            become=play_inherit.become,
            become_user=play_inherit.become_user,
            environment=env,
            connection=connection,
            remote_user=data.get("remote_user"),
            any_errors_fatal=bool(play_inherit.any_errors_fatal),
            force_handlers=bool(self.bool_keyword(data, "force_handlers")),
            tags=play_inherit.tags,
            base_dir=base_dir,
            check_mode=play_inherit.check_mode,
            diff=play_inherit.diff,
            serial=serial,
            vars_prompt=prompts,
        )
        play.pre_tasks = self.task_list(
            data.get("pre_tasks"),
            data.where("pre_tasks", True),
            play_inherit,
            base_dir,
            "pre_tasks",
        )
        play.roles = self.roles_section(
            data.get("roles"), data.where("roles", True), play_inherit, base_dir
        )
        play.tasks = self.task_list(
            data.get("tasks"), data.where("tasks", True), play_inherit, base_dir, "tasks"
        )
        play.post_tasks = self.task_list(
            data.get("post_tasks"),
            data.where("post_tasks", True),
            play_inherit,
            base_dir,
            "post_tasks",
        )
        handler_inherit = replace(play_inherit, tags=frozenset())
        handlers = self.task_list(
            data.get("handlers"),
            data.where("handlers", True),
            handler_inherit,
            base_dir,
            "handlers",
            handlers=True,
        )
        for node in handlers:
            if not isinstance(node, Task):
                self.error(node.pos, "handlers must be plain tasks (no blocks or includes)")
        play.handlers = [n for n in handlers if isinstance(n, Task)]
        seen = {h.id for h in play.handlers}
        for role in roles_in(play.pre_tasks + play.roles + play.tasks + play.post_tasks):
            for handler in role.handlers:
                if handler.id not in seen:
                    seen.add(handler.id)
                    play.handlers.append(handler)
        self.check_notify(play)
        return play

    def serial_of(self, data: YMap) -> Any:
        value = data.get("serial")
        if value is None:
            return None
        where = data.where("serial", True)
        for entry in value if isinstance(value, list) else [value]:
            ok = (isinstance(entry, int) and not isinstance(entry, bool) and entry >= 0) or (
                isinstance(entry, str)
                and (is_template(entry) or re.fullmatch(r"\d+%|\d+", entry.strip()) is not None)
            )
            if not ok:
                self.error(
                    where, f"serial: {entry!r} is not a batch size (use 2, \"30%\" or a list)"
                )
        return value

    def prompts_of(self, data: YMap) -> list[dict[str, Any]]:
        value = data.get("vars_prompt")
        if value is None:
            return []
        where = data.where("vars_prompt", True)
        if not isinstance(value, list):
            self.error(where, "vars_prompt must be a list of `- name: VAR` entries")
            return []
        prompts: list[dict[str, Any]] = []
        allowed = {"name", "prompt", "default", "private", "confirm", "encrypt", "salt_size",
                   "salt", "unsafe"}  # fmt: skip
        for i, entry in enumerate(value):
            at = value.where(i) if isinstance(value, YList) else where
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                self.error(at, "each vars_prompt entry needs `name: VAR`")
                continue
            for key in entry:
                if key not in allowed:
                    self.error(at, f"vars_prompt: unknown key '{key}'{suggest(str(key), allowed)}")
            prompts.append({**dict(entry), "_pos": str(at)})
        return prompts

    def check_notify(self, play: Play) -> None:
        names: set[str] = set()
        for handler in play.handlers:
            if handler.name:
                names.add(handler.name)
                if handler.role:
                    names.add(f"{handler.role.name} : {handler.name}")
            names.update(handler.listen)
        for task in iter_tasks(play):
            for target in task.notify:
                if not is_template(target) and target not in names:
                    self.error(
                        task.pos,
                        f"notify: no handler named {target!r}{suggest(target, names)} in this play",
                    )

    def playbook(self, path: Path, data: Any, depth: int = 0) -> list[Play]:
        if depth > 20:
            self.error(None, f"{display_path(path)}: import_playbook nested too deeply")
            return []
        if data is None:
            self.error(Pos(display_path(path), 1, 1), "playbook is empty")
            return []
        if not isinstance(data, list):
            where = data.pos if isinstance(data, YMap) else Pos(display_path(path), 1, 1)
            self.error(where, "a playbook is a list of plays: start each with `- hosts: ...`")
            return []
        plays: list[Play] = []
        for i, item in enumerate(data):
            where = data.where(i) if isinstance(data, YList) else Pos(display_path(path), 1, 1)
            if not isinstance(item, YMap):
                self.error(
                    where, f"each play must be a mapping with `hosts:`, got {type(item).__name__}"
                )
                continue
            item = canonical_actions(item)
            if "import_playbook" in item:
                target = item["import_playbook"]
                extra = set(item) - {"import_playbook", "name", "vars", "tags", "when"}
                for key in extra:
                    self.error(item.where(key), f"'{key}' is not valid on import_playbook")
                if not isinstance(target, str) or is_template(target):
                    self.error(
                        item.where("import_playbook", True),
                        "import_playbook needs a plain file name",
                    )
                    continue
                sub = (path.parent / target) if not Path(target).is_absolute() else Path(target)
                if not sub.is_file():
                    self.error(
                        item.where("import_playbook", True),
                        f"playbook {target!r} not found ({display_path(sub)})",
                    )
                    continue
                sub_data = self._load(sub)
                if sub_data is not None:
                    imported = self.playbook(sub, sub_data, depth + 1)
                    extra_vars = self.vars_of(item)
                    for play in imported:
                        play.vars = {**extra_vars, **play.vars}
                    plays.extend(imported)
                continue
            play = self.play(item, path.parent)
            if play is not None:
                plays.append(play)
        return plays


def roles_in(nodes: list[Node]) -> list[Role]:
    """Every role loaded statically under these nodes, outermost first, each once."""
    found: list[Role] = []

    def walk(items: list[Node]) -> None:
        for node in items:
            if isinstance(node, Block):
                if node.role is not None and all(r is not node.role for r in found):
                    found.append(node.role)
                walk(node.block + node.rescue + node.always)
            elif isinstance(node, Include) and node.static_children:
                walk(node.static_children)

    walk(nodes)
    return found


def canonical_actions(data: YMap) -> YMap:
    """The task with `ansible.builtin.include_tasks` (and every other FQCN form of a special
    action) renamed to its short name, positions kept; modules resolve their FQCN themselves."""
    renamed = {
        k: canonical_name(k)
        for k in data
        if isinstance(k, str)
        and k != canonical_name(k)
        and canonical_name(k) in SPECIAL_ACTIONS | {"import_playbook"}
    }
    if not renamed:
        return data
    out = YMap()
    out.pos, out.key_pos, out.value_pos = data.pos, {}, {}
    for key, value in data.items():
        new = renamed.get(key, key)
        out[new] = value
        out.key_pos[new] = data.where(key)
        out.value_pos[new] = data.where(key, True)
    return out


def iter_tasks(play: Play) -> list[Task]:
    """All module tasks of a play that are known before running (for checks and listings)."""
    out: list[Task] = []

    def walk(nodes: list[Node]) -> None:
        for node in nodes:
            if isinstance(node, Task):
                out.append(node)
            elif isinstance(node, Block):
                walk(node.block)
                walk(node.rescue)
                walk(node.always)
            elif isinstance(node, Include) and node.static_children:
                walk(node.static_children)

    walk(play.pre_tasks + play.roles + play.tasks + play.post_tasks + list(play.handlers))
    return out


# -- key=value text ----------------------------------------------------------------------------

_KV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)


def split_words(text: str) -> list[tuple[int, int]]:
    """Spans of whitespace-separated words, keeping quotes and {{ }} / {% %} together."""
    spans: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        start = i
        quote: str | None = None
        depth = 0
        while i < n:
            c = text[i]
            if quote:
                if c == "\\" and quote == '"':
                    i += 2
                    continue
                if c == quote:
                    quote = None
            elif text.startswith(("{{", "{%", "{#"), i):
                depth += 1
                i += 2
                continue
            elif depth and text.startswith(("}}", "%}", "#}"), i):
                depth -= 1
                i += 2
                continue
            elif depth == 0 and c in "'\"":
                quote = c
            elif depth == 0 and c.isspace():
                break
            i += 1
        if quote:
            raise ValueError(f"unbalanced quote in {text!r}")
        spans.append((start, i))
    return spans


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def _unquote(value: str) -> str:
    """Strip one pair of quotes; in "double quotes" \\n, \\t, \\" … are escapes (as in Ansible)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        if value[0] == '"':
            return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), inner)
        return inner
    return value


def parse_kv(text: str, module: Module) -> dict[str, Any]:
    """`src=a dest="b c" mode=0644` -> dict. For free-form modules (command, shell) only the
    module's own keys are pulled out; the rest of the text, untouched, is the free form."""
    spans = split_words(text)
    args: dict[str, Any] = {}
    if module.free_form:
        keep: list[tuple[int, int]] = []
        for start, end in spans:
            match = _KV.match(text[start:end])
            if match and match.group(1) in module.free_form_keys:
                args[match.group(1)] = _unquote(match.group(2))
            else:
                keep.append((start, end))
        if keep:
            args[module.free_form] = text[keep[0][0] : keep[-1][1]]
            # words pulled out from the middle leave the rest joined as written around them
            removed = [
                (s, e) for s, e in spans if (s, e) not in keep and keep[0][0] < s < keep[-1][1]
            ]
            if removed:
                pieces, cursor = [], keep[0][0]
                for s, e in removed:
                    pieces.append(text[cursor:s].rstrip())
                    cursor = e
                pieces.append(text[cursor : keep[-1][1]].lstrip())
                args[module.free_form] = " ".join(p for p in pieces if p)
        return args
    for start, end in spans:
        word = text[start:end]
        match = _KV.match(word)
        if not match:
            raise ValueError(
                f"expected key=value, got {word!r} (this module takes no free-form text)"
            )
        args[match.group(1)] = _unquote(match.group(2))
    return args


def load_playbook(path: str | os.PathLike[str]) -> Playbook:
    """Load and validate a playbook; raises PlaybookError listing every problem found."""
    playbook_path = Path(path).expanduser()
    if not playbook_path.is_file():
        raise ConfigError(f"playbook {display_path(playbook_path)} not found")
    loader = _Loader(playbook_path.resolve().parent)
    data = load_yaml(playbook_path)  # YAML syntax errors: raised at once, with the position
    plays = loader.playbook(playbook_path, data)
    if loader.problems:
        raise PlaybookError(loader.problems)
    return Playbook(path=playbook_path.resolve(), plays=plays)


def load_tasks_at_runtime(path: Path, inherit: Inherit, playbook_dir: Path) -> list[Node]:
    """include_tasks with a templated name: load and validate when the file name is known."""
    loader = _Loader(playbook_dir)
    nodes = loader.load_tasks_file(path, inherit, Pos(display_path(path), 1, 1))
    if loader.problems:
        raise PlaybookError(loader.problems)
    return nodes


def find_runtime_tasks_file(file: str, node: Include, playbook_dir: Path) -> Path:
    loader = _Loader(playbook_dir)
    path = loader.find_tasks_file(file, node.base_dir, node.inherit.role, node.pos)
    if path is None:
        raise ConfigError(loader.problems[0])
    return path
