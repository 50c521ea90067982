"""Loading plays and playbooks: play keywords, serial, vars_prompt, handlers and notify, import_playbook."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from provision.engine.playbook_model import (
    PLAY_KEYWORDS,
    UNSUPPORTED,
    Inherit,
    Play,
    canonical_actions,
    handler_tasks,
    iter_tasks,
    roles_in,
)
from provision.engine.templating import is_template
from provision.modules.base import (
    suggest,
)
from provision.yamlpos import Pos, YList, YMap, display_path


class PlayLoading:
    """Mixin of the playbook loader: plays and whole playbooks."""

    def play(self, data: YMap, base_dir: Path) -> Play | None:
        for key in data:
            if key in UNSUPPORTED:
                self.error(data.where(key), UNSUPPORTED[key])
            elif key not in PLAY_KEYWORDS:
                self.error(
                    data.where(key),
                    f"unknown play keyword '{key}'{suggest(str(key), PLAY_KEYWORDS)}: "
                    f"'{key}' is not a valid attribute for a Play",  # Ansible's words
                )
        self.collections = self.collections_of(data)
        hosts = data.get("hosts")
        if hosts is None:
            self.error(data.pos, "play needs `hosts:` (a pattern like all, a group, or a:b)")
            return None
        if isinstance(hosts, list):
            hosts = [str(h) for h in hosts]
        elif not isinstance(hosts, str):
            hosts = str(hosts)
        play_vars = self.vars_of(data)
        env = self.environment_of(data)
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
            environment=env,
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
        self.dep_roles = {}
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
            environment=env or None,
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
        # what a templated role name in `roles:` sees: its vars and its playbook's folder (an
        # imported playbook's own, as Ansible's playbook_dir)
        self.play_vars, self.play_dir = play_vars, base_dir
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
        play.handlers, other = handler_tasks(handlers)
        for node in other:
            self.error(node.pos, "handlers must be tasks or import_tasks (no blocks or includes)")
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
                self.error(where, f'serial: {entry!r} is not a batch size (use 2, "30%" or a list)')
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
