"""Load and validate a whole playbook before anything runs.

Everything static is resolved here: imports (`import_tasks`, `import_role`, `import_playbook`),
roles, keyword inheritance (a block's or import's `when`, `tags`, `become`, `vars` … pass to
its tasks), module names and arguments, Jinja syntax, handler names. All errors are collected
and reported together, each with file:line:col, so one run shows every mistake.
`include_tasks` with a templated file name is the only thing loaded later (per host).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from provision.config import load_config

# The playbook's model and key=value parsing live beside this loader; imported from here too.
from provision.engine.action_forms import module_form
from provision.engine.kv_text import parse_kv, split_words
from provision.engine.playbook_keywords import KeywordLoading, is_with_loop
from provision.engine.playbook_model import (
    _VAR_NAME,
    BLOCK_KEYWORDS,
    DELEGATE_LOCAL,
    META_ACTIONS,
    SPECIAL_ACTIONS,
    TASK_KEYWORDS,
    UNSUPPORTED,
    VARIABLE_PARAMS,
    Block,
    Include,
    Inherit,
    Meta,
    Node,
    Play,
    Playbook,
    PlaybookError,
    Role,
    Task,
    canonical_actions,
    iter_tasks,
    roles_in,
)
from provision.engine.playbook_plays import PlayLoading
from provision.engine.playbook_roles import RoleLoading, ships_plugins
from provision.engine.task_args import possibly_all_template
from provision.engine.templating import is_template
from provision.errors import ConfigError
from provision.modules.ansible_fallback import (
    ACTION_PLUGIN,
    ansible_actions,
    ansible_module,
    unavailable_module,
)
from provision.modules.base import (
    Module,
    get_module,
    module_names,
    suggest,
)
from provision.yamlpos import Pos, YList, YMap, display_path, load_yaml

__all__ = [
    "DELEGATE_LOCAL",
    "Block",
    "Include",
    "Inherit",
    "Meta",
    "Node",
    "Play",
    "Playbook",
    "PlaybookError",
    "Role",
    "Task",
    "find_runtime_tasks_file",
    "iter_tasks",
    "load_playbook",
    "load_role_at_runtime",
    "load_tasks_at_runtime",
    "parse_kv",
    "roles_in",
    "split_words",
]


# -- loading -----------------------------------------------------------------------------------


class _Loader(KeywordLoading, RoleLoading, PlayLoading):
    """The whole loader: the basics and tasks here; keywords, roles and plays in their mixins."""

    def __init__(self, playbook_dir: Path) -> None:
        self.playbook_dir = playbook_dir
        self.problems: list[str] = []
        self.role_cache: dict[tuple[str, str], Role] = {}
        self.file_stack: list[Path] = []
        self.dynamic = 0  # > 0 while loading a file only include_tasks/include_role reaches
        self.config = load_config()  # ansible.cfg: roles_path, become defaults
        self.play_roles: set[tuple[str, str]] = set()  # dependencies already in this play
        self.dep_roles: dict[tuple[str, str], Role] = {}  # and the role each loaded
        self.role_stack: list[Path] = []
        self.collections: list[str] = []  # the play's (and role's) `collections:` keyword
        self.play_vars: dict[str, Any] = {}  # the play being loaded's `vars:` and folder
        self.play_dir = playbook_dir
        self.role_dirs: list[str] = []  # roles loaded so far that ship plugins (library/, ...)

    def plugin_dirs(self, inherit: Inherit) -> tuple[str, ...]:
        """Ansible's plugin folders for a task's module (a role's own library/ and module_utils/,
        the play's other roles', the playbook's): those that ship any, the task's role first."""
        own = [str(inherit.role.path)] if inherit.role is not None else []
        every = [*own, *self.role_dirs, str(self.playbook_dir)]
        return tuple(d for d in dict.fromkeys(every) if ships_plugins(Path(d)))

    def error(self, pos: Pos | None, message: str) -> None:
        self.problems.append(f"{pos}: {message}" if pos else message)

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
            shown = repr(data) if len(repr(data)) <= 120 else repr(data)[:117] + "..."
            self.error(  # what the file holds, as Ansible shows the offending line
                pos,
                f"{what} must be a list of tasks (each starting with '- name:' or '- module:'),"
                f" got {type(data).__name__}: {shown}",
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
        data = canonical_actions(
            module_form(
                data,
                lambda name, where: self.static_name(name, inherit, where, "a module name"),
                self.error,
            )
        )
        if "block" in data:
            return self.block(data, inherit, base_dir)
        for key in data:
            if key in UNSUPPORTED:
                self.error(data.where(key), UNSUPPORTED[key])
        keywords = TASK_KEYWORDS
        actions = [k for k in data if k not in keywords and not is_with_loop(k)]
        data = self.qualify_actions(data, actions)
        actions = [k for k in data if k not in keywords and not is_with_loop(k)]
        known = [k for k in actions if k in SPECIAL_ACTIONS or get_module(str(k)) is not None]
        why_not: dict[str, str] = {}
        if not known:  # not provision's: Ansible's own module, run through the bridge
            known, why_not = ansible_actions(actions, self.playbook_dir, self.plugin_dirs(inherit))
        if not known and len(actions) == 1 and isinstance(actions[0], str):
            why = why_not.get(actions[0], "")
            # Ansible resolves a task's module when the task runs: an action-plugin module
            # (reboot) or any module in a dynamically included file fails only if it runs
            if ACTION_PLUGIN in why or (self.dynamic and why):
                stand_in = unavailable_module(actions[0], why)
                return self.module_task(data, actions[0], inherit, base_dir, handlers, stand_in)
        unknown = [k for k in actions if k not in known]
        for key in unknown:
            if known:
                hint = suggest(str(key), sorted(TASK_KEYWORDS))
                self.error(data.where(key), f"unknown task keyword '{key}'{hint}")
            else:
                hint = suggest(str(key), module_names() + sorted(TASK_KEYWORDS | SPECIAL_ACTIONS))
                self.error(
                    data.where(key),
                    f"unknown module '{key}'{hint}: {why_not[key]}"
                    if why_not.get(str(key))
                    else f"unknown module '{key}'{hint}; modules: {', '.join(module_names())}",
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

    def qualify_actions(self, data: YMap, actions: list[Any]) -> YMap:
        """A short module name the play's `collections:` resolve (`pam_limits` with
        community.general listed) becomes its FQCN, so it maps to provision's native module."""
        renamed: dict[Any, str] = {}
        for key in actions:
            if not isinstance(key, str) or key in SPECIAL_ACTIONS or get_module(key) is not None:
                continue
            for collection in self.collections:
                if get_module(f"{collection}.{key}") is not None:
                    renamed[key] = f"{collection}.{key}"
                    break
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

    def collections_of(self, data: YMap) -> list[str]:
        raw = data.get("collections")
        if raw is None:
            return []
        if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
            self.error(data.where("collections", True), "collections must be a list of names")
            return []
        return [str(c) for c in raw]

    def module_task(
        self,
        data: YMap,
        action: str,
        inherit: Inherit,
        base_dir: Path,
        handlers: bool,
        stand_in: type[Module] | None = None,
    ) -> Task | None:
        cls = (
            stand_in
            or get_module(action)
            or ansible_module(action, self.playbook_dir, self.plugin_dirs(inherit))[0]
        )
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
            elif possibly_all_template(extra):  # a mapping once rendered (engine/task_args.py)
                args = {VARIABLE_PARAMS: extra, **args}
            else:
                self.error(
                    data.where("args", True),
                    "args must be a mapping or a template giving one",
                )
        if len(self.problems) == problems_before:  # unparsable args: one error is enough
            self.check_templates(args, where)
        # the arguments themselves are checked when the task runs (Ansible's rule): a task this
        # host skips never fails the load (provision/modules/argspec.py)
        task = Task(action=cls.name, written_action=action, module=module, args=args, **fields)
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
        notify = self._pick(self.notify_of(data), inherit.notify)  # or its block's / import's
        if notify is not None:
            task.notify = list(notify)
        for key in ("changed_when", "failed_when", "until"):
            if key in data:
                value = self.as_list(data[key])
                self.check_expression(value, data.where(key, True), key)
                setattr(task, key, tuple(value))
        self.async_fields(task, data)
        for key in ("retries", "delay"):
            value = data.get(key)
            if value is not None:
                if isinstance(value, str) and is_template(value):
                    self.check_templates(value, data.where(key, True))
                elif isinstance(value, bool) or not isinstance(
                    value, int if key == "retries" else (int, float)  # delay: seconds, 0.01 too
                ) or value < 0:
                    what = "a whole number" if key == "retries" else "a number of seconds"
                    self.error(data.where(key, True), f"{key} must be {what} >= 0, got {value!r}")
                setattr(task, key, value)
        if handlers:
            listen = data.get("listen")
            task.listen = [listen] if isinstance(listen, str) else list(listen or [])
        elif "listen" in data:
            self.error(data.where("listen"), "listen is only valid in handlers")
        return task

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
        extra = data.get("args")
        if extra is not None:  # `args: {apply: ...}` (and file:) as Ansible takes them
            if not isinstance(extra, Mapping):
                self.error(data.where("args", True), "args must be a mapping")
            else:
                merged = YMap(raw if isinstance(raw, Mapping) else {"file": raw})
                merged.update(extra)
                merged.pos = getattr(raw, "pos", where)
                merged.key_pos = {**getattr(raw, "key_pos", {}), **getattr(extra, "key_pos", {})}
                merged.value_pos = {
                    **getattr(raw, "value_pos", {}),
                    **getattr(extra, "value_pos", {}),
                }
                raw = merged
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
            if is_with_loop(key):
                continue
            if key not in (
                action,
                "args",
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
            ) and not (action == "import_tasks" and key in ("delegate_to", "notify")):
                # import_tasks is static: Ansible applies these to each imported task
                self.error(data.where(key), f"'{key}' is not valid on {action}")
        if action == "import_tasks":
            if isinstance(raw, Mapping) and "apply" in raw:
                self.error(where, "import_tasks takes no apply: (Ansible's rule; use include_tasks)")
            if is_template(file):
                file = self.static_name(file, inherit, where, "import_tasks' file name")
                if file is None:
                    return None
            if any(k == "loop" or is_with_loop(k) for k in data):
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
            self.dynamic += 1  # Ansible loads it when the include runs: see task()
            before = len(self.problems)
            try:
                node.static_children = (
                    self.load_tasks_file(path, child_inherit, where) if path else []
                )
            finally:
                self.dynamic -= 1
            if path is not None and len(self.problems) > before:
                del self.problems[before:]  # a broken file fails its include when that runs
                node.static_children = None
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


def load_role_at_runtime(
    node: Include, rendered: Mapping[str, str], playbook_dir: Path
) -> Block:
    """include_role with a templated name or *_from (playbook_roles.role_include_at_runtime):
    the role loaded with those names as this host rendered them."""
    action, task = node.role_task
    raw = YMap({**task[action], **rendered})
    raw.pos, raw.key_pos, raw.value_pos = task.where(action, True), {}, {}
    data = YMap({**task, action: raw})
    data.pos, data.key_pos, data.value_pos = task.pos, task.key_pos, task.value_pos
    loader = _Loader(playbook_dir)
    block = loader.role_include(data, action, node.inherit, node.base_dir)
    if not isinstance(block, Block) and not loader.problems:
        loader.error(node.pos, f"include_role: {dict(rendered)} still names a template")
    if loader.problems:
        raise PlaybookError(loader.problems)
    assert isinstance(block, Block)
    return block


def find_runtime_tasks_file(file: str, node: Include, playbook_dir: Path) -> Path:
    loader = _Loader(playbook_dir)
    path = loader.find_tasks_file(file, node.base_dir, node.inherit.role, node.pos)
    if path is None:
        raise ConfigError(loader.problems[0])
    return path
