"""Loading roles: search path, defaults/vars, tasks_from, handlers, meta dependencies (once per play)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from provision.engine.collections import collection_roots, find_collection_role, is_fqcn
from provision.engine.playbook_model import (
    _VAR_NAME,
    Block,
    Include,
    Inherit,
    Node,
    Role,
    handler_tasks,
)
from provision.engine.role_argspec import entry_spec, validation_task_name
from provision.engine.role_names import role_name
from provision.engine.templating import Templar, TemplateError, is_template, to_bool
from provision.errors import ConfigError
from provision.yamlpos import Pos, YList, YMap, display_path, load_yaml

ROLE_FILE_EXTS = (".yml", ".yaml", ".json")
FROM_KEYS = ("tasks_from", "vars_from", "defaults_from", "handlers_from")


def role_file(folder: Path, name: str) -> Path | None:
    """A role's tasks/vars/defaults/handlers file by Ansible's rule: `name` as given when it has
    an extension (`tasks_from: variables.yml`), else (or if that is missing) with .yml, .yaml,
    .json appended."""
    candidates = [folder / name] if Path(name).suffix in ROLE_FILE_EXTS else []
    candidates += [folder / f"{name}{ext}" for ext in ROLE_FILE_EXTS]
    return next((c for c in candidates if c.is_file()), None)


PLUGIN_FOLDERS = ("library", "module_utils")


def ships_plugins(folder: Path) -> bool:
    """A role (or playbook folder) with modules of its own, which Ansible's loader would find."""
    return any((folder / sub).is_dir() for sub in PLUGIN_FOLDERS)


def parent_role_params(parent: Role) -> dict[str, list[str]]:
    """IncludeRole.get_include_params: `ansible_parent_role_names`/`_paths`, the role the
    include_role/import_role is written in first, then that role's own parents."""
    names = list(parent.params.get("ansible_parent_role_names") or [])
    paths = list(parent.params.get("ansible_parent_role_paths") or [])
    return {
        "ansible_parent_role_names": [role_name(parent), *names],
        "ansible_parent_role_paths": [str(parent.path), *paths],
    }


def role_load_vars(playbook_dir: Path, play_vars: Mapping[str, Any], inherit: Inherit) -> dict[str, Any]:
    """What a `roles:` entry's templated name sees when the play loads (Ansible templates it
    then): the play's vars (a dependency's: its parent's too) and playbook_dir."""
    scope: dict[str, Any] = dict(play_vars)
    for layer in inherit.vars:
        scope.update(layer)
    scope["playbook_dir"] = scope["ansible_playbook_dir"] = str(playbook_dir)
    return scope


class RoleLoading:
    """Mixin of the playbook loader: everything about roles."""

    def find_role(self, name: str, base_dir: Path, where: Pos) -> Path | None:
        roots = collection_roots(self.playbook_dir, self.config)
        # a collection-qualified name, or a short one in the play's `collections:` (first, as
        # Ansible searches them before the roles paths)
        qualified = [name] if is_fqcn(name) else [f"{c}.{name}" for c in self.collections]
        looked: list[Path] = []
        for fqcn in qualified:
            if fqcn.startswith("ansible.legacy.") or fqcn.startswith("ansible.builtin."):
                continue
            found, tried = find_collection_role(fqcn, roots)
            looked += tried
            if found is not None:
                return found
        if is_fqcn(name):
            self.error(
                where,
                f"role {name!r} not found in the collections paths (looked in: "
                f"{', '.join(display_path(c) for c in looked)}); install the collection "
                f"(ansible-galaxy collection install {'.'.join(name.split('.')[:2])}) or set "
                "ANSIBLE_COLLECTIONS_PATH / ansible.cfg collections_path",
            )
            return None
        candidates = [base_dir / "roles" / name, self.playbook_dir / "roles" / name]
        extra_paths = os.environ.get("PROVISION_ROLES_PATH", "").split(os.pathsep)
        for extra in [*extra_paths, *self.config.roles_path]:  # roles_path from ansible.cfg
            if extra:
                candidates.append(Path(extra).expanduser() / name)
        candidates.append(base_dir / name)
        # a relative path (`role: ../../../` from a molecule converge.yml) is joined to each
        # search path and normalised lexically, as Ansible does, so `roles/..` need not exist
        candidates = list(dict.fromkeys(Path(os.path.normpath(c)) for c in candidates))
        for candidate in candidates:  # any folder is a role, as in Ansible (meta/ or vars/ only)
            if candidate.is_dir():
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
        froms: Mapping[str, str] | None = None,
        validate: bool = True,  # include_role/import_role `rolespec_validate: false`: no check
    ) -> Block | None:
        path = self.find_role(name, base_dir, where)
        if path is None:
            return None
        if ships_plugins(path) and str(path) not in self.role_dirs:
            self.role_dirs.append(str(path))  # its modules: Ansible's from here on (the bridge)
        froms = dict(froms or {})

        def read_vars(kind: str) -> dict[str, Any]:
            wanted = froms.get(f"{kind}_from") or "main"
            file = role_file(path / kind, wanted)
            if file is None:
                if wanted != "main":
                    self.error(where, f"role {name}: {kind} file {wanted} not found in "
                                      f"{display_path(path / kind)}")  # fmt: skip
                return {}
            try:
                loaded = load_yaml(file)
            except ConfigError as exc:
                self.problems.append(str(exc))
                return {}
            if loaded is None:
                return {}
            if not isinstance(loaded, Mapping):
                self.error(Pos(display_path(file), 1, 1), f"role {kind} must be a mapping of name: value")
                return {}
            self.check_templates(loaded, Pos(display_path(file), 1, 1))
            return dict(loaded)

        role = Role(
            name=name,
            path=path,
            defaults=read_vars("defaults"),
            vars=read_vars("vars"),
            params=params,
            public=self.role_public(data, when_once),
        )
        role_inherit = self.extend(inherit, data, role=role)
        if when_once:
            role_inherit = replace(role_inherit, when=inherit.when)
        apply = data.get(next((k for k in data if k in ("include_role", "import_role")), ""))
        if isinstance(apply, Mapping) and isinstance(apply.get("apply"), YMap):
            role_inherit = self.extend(role_inherit, apply["apply"], role=role)  # `apply:` keywords
        tasks: list[Node] = []
        outer = self.collections
        self.collections = self.role_collections(path) + outer  # the role's meta collections
        try:
            known: list[Role] = []
            depends = self.role_dependencies(path, replace(inherit, vars=()), where, known)
            file = role_file(path / "tasks", tasks_from)
            if file is not None:
                tasks = self.load_tasks_file(file, role_inherit, where)
            elif tasks_from != "main":
                self.error(
                    where,
                    f"role {name}: tasks file {tasks_from} not found in "
                    f"{display_path(path / 'tasks')}",
                )
        finally:
            self.collections = outer
        handlers_from = froms.get("handlers_from") or "main"
        file = role_file(path / "handlers", handlers_from)
        if file is None and handlers_from != "main":
            self.error(where, f"role {name}: handlers file {handlers_from} not found in "
                              f"{display_path(path / 'handlers')}")  # fmt: skip
        if file is not None:
            data_h = self._load(file)
            handler_inherit = replace(role_inherit, when=(), tags=frozenset())
            nodes = self.task_list(
                data_h, Pos(display_path(file), 1, 1), handler_inherit, file.parent, "handlers",
                handlers=True,
            )  # fmt: skip
            role.handlers = handler_tasks(nodes)[0]
        for dep in depends:  # meta/main.yml dependencies run first, their handlers join
            if isinstance(dep, Block) and dep.role is not None:
                role.handlers.extend(dep.role.handlers)
                dep.role.dependency = True
                dep.role.parent = dep.role.parent or role
                role.dependencies.append(dep.role)
        role.dependencies += [r for r in known if all(r is not d for d in role.dependencies)]
        check = self.validation_task(path, name, params, tasks_from, role_inherit) if validate else []
        tasks = [*depends, *check, *tasks]
        fields = self.node_fields(data, inherit, base_dir)
        fields["name"] = fields["name"] or f"role {name}"
        if not when_once:
            fields["when"] = ()
        return Block(block=tasks, when_once=when_once, whole_role=True, **{**fields, "role": role})

    def role_public(self, data: YMap, include: bool) -> bool:
        """Ansible's rule: imports are public, includes private, unless `public:` says, or
        ansible.cfg private_role_vars is set."""
        raw = data.get("include_role")
        if include and isinstance(raw, Mapping) and raw.get("public") is not None:
            return to_bool(raw["public"])
        if self.config.private_role_vars is not None:
            return not self.config.private_role_vars
        return not include

    def role_collections(self, path: Path) -> list[str]:
        """`collections:` in the role's meta/main.yml (a collection's roles list their own)."""
        in_collection = path.parent.name == "roles" and path.parent.parent.parent.parent.name == (
            "ansible_collections"
        )
        own = (
            [f"{path.parent.parent.parent.name}.{path.parent.parent.name}"] if in_collection else []
        )
        for ext in ("yml", "yaml"):
            file = path / "meta" / f"main.{ext}"
            if file.is_file():
                meta = self._load(file)
                if isinstance(meta, YMap) and "collections" in meta:
                    return own + self.collections_of(meta)
        return own

    def role_dependencies(
        self, path: Path, inherit: Inherit, where: Pos, known: list[Role] | None = None
    ) -> list[Node]:
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
                    return self.roles_section(
                        deps, at, inherit, path.parent, dependency=True, known=known
                    )
                finally:
                    self.role_stack.pop()
        return []

    def allows_duplicates(self, name: str, base_dir: Path, where: Pos) -> bool:
        """meta/main.yml `allow_duplicates: true`: the role runs again with the same parameters."""
        path = self.find_role(name, base_dir, where)
        for ext in ("yml", "yaml"):
            file = path / "meta" / f"main.{ext}" if path is not None else None
            if file is not None and file.is_file():
                meta = self._load(file)
                return isinstance(meta, Mapping) and to_bool(meta.get("allow_duplicates", False))
        return False

    def role_argument_specs(self, path: Path) -> Any:
        """`argument_specs` of meta/argument_specs.yml, else of meta/main.yml (Ansible: the
        first file wins, never merged)."""
        for ext in ("yml", "yaml"):
            file = path / "meta" / f"argument_specs.{ext}"
            if file.is_file():
                data = self._load(file)
                return (data.get("argument_specs") if isinstance(data, Mapping) else None) or {}
        for ext in ("yml", "yaml"):
            file = path / "meta" / f"main.{ext}"
            if file.is_file():
                data = self._load(file)
                return data.get("argument_specs") if isinstance(data, Mapping) else None
        return None

    def validation_task(
        self, path: Path, name: str, params: dict[str, Any], entrypoint: str, inherit: Inherit
    ) -> list[Node]:
        """Ansible's implicit first task of a role with a spec for its entry point
        (engine/role_argspec.py): [] when it has none."""
        spec = entry_spec(self.role_argument_specs(path), entrypoint)
        if spec is None:
            return []
        action = {
            "argument_spec": spec.get("options") or {},
            # the role's own parameters, not the include's ansible_parent_role_* (Ansible's)
            "provided_arguments": {
                k: v for k, v in params.items() if not str(k).startswith("ansible_parent_role_")
            },
            "validate_args_context": {
                "type": "role",
                # Ansible's _role_name: a collection role's short name, a path's folder name
                "name": os.path.basename(name) if "/" in name
                else name.rsplit(".", 1)[-1] if is_fqcn(name) else name,
                "argument_spec_name": entrypoint,
                "path": os.path.abspath(path),  # Ansible's role path: absolute
            },
        }
        data = YMap(
            name=validation_task_name(spec, entrypoint),
            tags=["always"],
            **{"ansible.builtin.validate_argument_spec": action},
        )
        data.pos = Pos(display_path(path / "meta" / "argument_specs.yml"), 1, 1)
        data.key_pos, data.value_pos = {}, {}
        node = self.task(data, inherit, path / "tasks")
        return [node] if node is not None else []

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
            "allow_duplicates",  # include_role/import_role run their role each time anyway
            "rolespec_validate",
        }
        for key in unknown:
            self.error(where, f"{action}: unknown argument '{key}'")
        templated = [k for k in ("name", *FROM_KEYS) if is_template(raw.get(k))]
        if templated and action == "import_role":
            self.error(where, f"import_role is static: its {templated[0]} can't use variables "
                              "(use include_role)")  # fmt: skip
            return None
        params = self.vars_of(data)
        if inherit.role is not None:  # written in a role: Ansible's include params name it
            params = {**params, **parent_role_params(inherit.role)}
        if templated:  # Ansible renders them when the task runs, per host: loaded then
            return self.role_include_at_runtime(data, action, inherit, base_dir)
        dynamic = action == "include_role"  # loaded when it runs, in Ansible (playbook.task)
        self.dynamic += dynamic
        try:
            return self.load_role(
                raw["name"],
                params,
                data,
                inherit,
                base_dir,
                where,
                tasks_from=str(raw.get("tasks_from") or "main"),
                when_once=dynamic,
                froms={k: str(raw[k]) for k in FROM_KEYS if raw.get(k)},
                validate=raw.get("rolespec_validate") is None
                or is_template(raw["rolespec_validate"])
                or to_bool(raw["rolespec_validate"]),
            )
        finally:
            self.dynamic -= dynamic

    def role_include_at_runtime(
        self, data: YMap, action: str, inherit: Inherit, base_dir: Path
    ) -> Node:
        """An include_role whose name or *_from is a template: an Include node that loads the
        role when it runs (host_play.run_role_include), with the names rendered for that host."""
        fields = self.node_fields(data, inherit, base_dir)
        raw = data[action]
        fields["name"] = fields["name"] or f"include_role {raw['name']}"
        node = Include(file="", inherit=inherit, role_task=(action, data), **fields)
        self.loop_fields(node, data)  # type: ignore[attr-defined]
        return node

    def role_name_at_load(self, name: str, inherit: Inherit, where: Pos) -> str | None:
        scope = role_load_vars(self.play_dir, self.play_vars, inherit)
        try:
            return str(Templar().render(name, scope))
        except TemplateError as exc:
            self.error(where, f"role name {name!r}: {exc} (a role name in `roles:` is rendered "
                              "when the play loads: play vars and playbook_dir only)")  # fmt: skip
            return None

    def static_name(self, name: str, inherit: Inherit, where: Pos, what: str) -> str | None:
        """A static import's templated file name, rendered when the play loads as Ansible
        does: with the play's and role's vars, role_path and playbook_dir (no host's vars)."""
        scope = role_load_vars(self.play_dir, self.play_vars, inherit)
        role = inherit.role
        if role is not None:
            scope = {**role.defaults, **scope, **role.vars, **role.magic}
        try:
            return str(Templar().render(name, scope))
        except TemplateError as exc:
            self.error(where, f"{what} {name!r} is rendered when the play loads (play and role vars, role_path, playbook_dir): {exc}")
            return None

    def roles_section(
        self,
        data: Any,
        pos: Pos,
        inherit: Inherit,
        base_dir: Path,
        dependency: bool = False,
        known: list[Role] | None = None,  # dependencies loaded before: not run again, listed here
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
            if is_template(name):
                name = self.role_name_at_load(str(name), inherit, where)
                if name is None:
                    continue
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
                if key in self.play_roles and not self.allows_duplicates(str(name), base_dir, where):
                    if key in self.dep_roles and known is not None:
                        known.append(self.dep_roles[key])  # still its dependency (vars, names)
                    continue  # Ansible runs a dependency once per play (same parameters)
                self.play_roles.add(key)
            block = self.load_role(str(name), params, clean, inherit, base_dir, where)
            if block is not None:
                blocks.append(block)
                if dependency and block.role is not None:
                    self.dep_roles[key] = block.role
        return blocks
