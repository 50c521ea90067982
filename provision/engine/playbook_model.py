"""What a loaded playbook is: plays, tasks, blocks, includes, roles, and the keywords each takes."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision.errors import ConfigError
from provision.modules.base import (
    Module,
    canonical_name,
)
from provision.yamlpos import Pos, YMap


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
    "notify",  # Ansible's Block is Notifiable: its tasks inherit it
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
    "end_role",
    "clear_host_errors",
    "clear_facts",
    "reset_connection",
    "refresh_inventory",
}
DELEGATE_LOCAL = ("localhost", "127.0.0.1", "::1")
# a module's arguments written as one template (`assert: "{{ item }}"`), a mapping once rendered
VARIABLE_PARAMS = "_variable_params"
# free-form words given to a module without free form (`file: "{{ file_args }}"`): Ansible
# renders them to a mapping when the task runs, or fails the task (engine/task_args.py)
RAW_PARAMS = "_raw_params"
UNSUPPORTED = {
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
    # its defaults and vars are seen by the whole play (Ansible: roles:/import_role, unless
    # private_role_vars; include_role only with `public: true`, once it ran)
    public: bool = True
    dependency: bool = False  # loaded as another role's meta/main.yml dependency
    dependencies: list[Role] = field(default_factory=list)  # its own, direct (engine/role_names.py)
    parent: Role | None = None  # the role whose dependency it is (engine/role_vars.py)

    @property
    def magic(self) -> dict[str, str]:
        """`role_path`, `role_name` (a collection role's short name, as Ansible gives it) and
        `ansible_role_name` (a collection role's FQCN, however the play named it)."""
        cached = self.__dict__.get("_magic")
        if cached is None:
            fqcn = self.name.count(".") >= 2 and "/" not in self.name  # not a path: ../../../
            short = self.name.rsplit(".", 1)[-1] if fqcn else self.name
            full = self.name
            parts = self.path.parts
            if len(parts) >= 5 and parts[-5] == "ansible_collections" and parts[-2] == "roles":
                full = f"{parts[-4]}.{parts[-3]}.{parts[-1]}"  # found through `collections:`
            cached = self.__dict__["_magic"] = {
                "role_path": str(self.path),
                "role_name": short,
                "ansible_role_name": full,
            }
        return cached


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
    notify: tuple[str, ...] | None = None  # a block's/import's notify: its tasks' own wins
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
    written_action: str = ""  # as the task spells it (ansible.builtin.command): ansible_failed_task
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
    async_val: Any = None  # `async:` seconds (engine/async_task.py)
    poll: Any = None  # `poll:` seconds; 0: a background job (engine/async_jobs.py)
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
    whole_role: bool = False  # a role's own block (meta end_role ends it)


@dataclass
class Include(Node):
    """include_tasks: the file (maybe templated) is loaded when reached, per host."""

    file: str = ""
    loop: Any = None
    loop_kind: str | None = None
    loop_control: dict[str, Any] = field(default_factory=dict)
    static_children: list[Node] | None = None
    inherit: Inherit = field(default_factory=Inherit)
    # include_role with a templated name or *_from: its task, loaded when it runs (per host)
    role_task: Any = None

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


def public_roles(play: Play) -> list[Role]:
    """The roles whose defaults and vars the whole play sees: loaded by `roles:` or
    `import_role` (with their dependencies), public; include_role's join when they run."""
    found: list[Role] = []

    def walk(items: list[Node]) -> None:
        for node in items:
            if isinstance(node, Block):
                if node.when_once:  # include_role: exposed when it runs, if public
                    continue
                if (
                    node.role is not None
                    and node.role.public
                    and all(r is not node.role for r in found)
                ):
                    found.append(node.role)
                walk(node.block + node.rescue + node.always)
            elif isinstance(node, Include) and node.static_children:
                walk(node.static_children)

    walk(play.pre_tasks + play.roles + play.tasks + play.post_tasks)
    return found


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


def handler_tasks(nodes: list[Node]) -> tuple[list[Task], list[Node]]:
    """A handlers section's tasks, `import_tasks` inside it flattened (its tasks are handlers,
    as in Ansible); and the nodes that are neither (rescue/always blocks, dynamic includes)."""
    tasks: list[Task] = []
    other: list[Node] = []
    for node in nodes:
        if isinstance(node, Task):
            tasks.append(node)
        elif isinstance(node, Block) and not node.rescue and not node.always:
            inner, rest = handler_tasks(node.block)  # import_tasks: its tasks, keywords applied
            tasks += inner
            other += rest
        else:
            other.append(node)
    return tasks, other


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
