"""The keywords every node of a playbook shares, for the loader (provision/engine/playbook.py):
Jinja syntax checks of values, tags, vars, the inherited keywords (when, become, no_log,
delegate_to, notify, ...) a block or import passes to its tasks, and loops (loop, with_*,
loop_control). A mixin, like playbook_roles.py and playbook_plays.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provision.engine.lookups import SUPPORTED as LOOKUPS
from provision.engine.lookups import canonical_lookup
from provision.engine.loop_control import LOOP_CONTROL_KEYS
from provision.engine.playbook_model import (
    _VAR_NAME,
    DELEGATE_LOCAL,
    Include,
    Inherit,
    Role,
    Task,
)
from provision.engine.templating import check_syntax, is_template
from provision.modules.base import suggest
from provision.yamlpos import Pos, YList, YMap

# Ansible finds a template's filters and tests when it renders: an unknown one fails the task
# that renders it (a task that is skipped or ignores errors runs on), not the load
_RUN_TIME_PROBLEMS = ("No filter named", "No test named")


def is_with_loop(key: Any) -> bool:
    """`with_items`, `with_subelements`, `with_community.general.flattened`: a lookup loop."""
    return isinstance(key, str) and key.startswith("with_") and len(key) > 5


class KeywordLoading:
    """Mixin of the playbook loader: values, keywords and their inheritance, loops."""

    @staticmethod
    def _or(value: Any, default: Any) -> Any:
        return default if value is None else value

    # -- values --------------------------------------------------------------------------------
    def check_templates(self, value: Any, pos: Pos) -> None:
        """Jinja syntax errors in any string, reported at the YAML position of the value."""
        if isinstance(value, str):
            if is_template(value):
                problem = check_syntax(value)
                if problem and not problem.startswith(_RUN_TIME_PROBLEMS):
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
            if not text:  # fails when run, as in Ansible (engine/conditionals.py)
                continue
            if text.startswith("{{") and text.endswith("}}"):
                text = text[2:-2]
            if "{{" in text or "{%" in text:
                continue  # an embedded template: Ansible judges it when the task runs
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
        env = self.environment_of(data)
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
            environment=inherit.environment + env,
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
            notify=self._pick(self.notify_of(data), inherit.notify),
            role=role or inherit.role,
        )

    def environment_of(self, data: YMap) -> tuple[Any, ...]:
        """`environment:` as layers, each a mapping or a template giving one (rendered when the
        task runs): a mapping, a template, or a list of those (Ansible's form; later wins)."""
        env = data.get("environment")
        if env is None:
            return ()
        layers = env if isinstance(env, list) else [env]
        if all(isinstance(x, Mapping) or (isinstance(x, str) and is_template(x)) for x in layers):
            self.check_templates(env, data.where("environment", True))
            return tuple(x for x in layers if x)
        self.error(
            data.where("environment", True),
            "environment must be a mapping of NAME: value, a template giving one, or a list of those",
        )
        return ()

    def notify_of(self, data: YMap) -> tuple[str, ...] | None:
        notify = data.get("notify")
        if notify is None:
            return None
        if isinstance(notify, str):
            return (notify,)
        if isinstance(notify, list) and all(isinstance(n, str) for n in notify):
            return tuple(notify)
        self.error(data.where("notify", True), "notify must be a handler name or a list of names")
        return None

    def delegate_of(self, data: YMap) -> Any:
        value = data.get("delegate_to")
        if value is None:
            return None
        if not isinstance(value, str) or not (is_template(value) or value in DELEGATE_LOCAL):
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

    def loop_fields(self, node: Task | Include, data: YMap) -> None:
        kinds = [k for k in data if k == "loop" or is_with_loop(k)]
        for kind in kinds:
            lookup = canonical_lookup(str(kind)[len("with_") :])
            if kind != "loop" and lookup not in LOOKUPS:
                self.error(
                    data.where(kind),
                    f"{kind}: lookup plugin {lookup!r} is not supported"
                    f"{suggest(lookup, LOOKUPS)} (supported: {', '.join(LOOKUPS)})",
                )
        if len(kinds) > 1:
            self.error(data.where(kinds[1]), f"use one of loop / with_*: found {', '.join(kinds)}")
        if kinds:
            node.loop_kind = kinds[0]
            node.loop = data[kinds[0]]
            self.check_templates(node.loop, data.where(kinds[0], True))
            if not isinstance(node.loop, (list, str, Mapping)) and kinds[0] in (
                "loop",
                "with_items",
                "with_list",
                "with_dict",
            ):
                self.error(
                    data.where(kinds[0], True),
                    f"{kinds[0]} must be a list or a template giving one",
                )
        control = data.get("loop_control")
        if control is not None:
            if not isinstance(control, Mapping):
                self.error(data.where("loop_control", True), "loop_control must be a mapping")
                return
            allowed = set(LOOP_CONTROL_KEYS)
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
            if "break_when" in control:
                self.check_expression(
                    self.as_list(control["break_when"]),
                    data.where("loop_control", True),
                    "break_when",
                )
            node.loop_control = dict(control)

    def async_fields(self, task: Task, data: YMap) -> None:
        """`async: N` (seconds) and `poll: M` (Ansible's default 15; 0: a background job read
        by async_status): engine/async_task.py, engine/async_jobs.py."""
        values: dict[str, Any] = {}
        for key in ("async", "poll"):
            value = data.get(key)
            if value is None or (isinstance(value, str) and is_template(value)):
                values[key] = value
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                self.error(
                    data.where(key, True), f"{key} must be a whole number >= 0, got {value!r}"
                )
                return
            values[key] = value
        task.async_val = values["async"] or None
        task.poll = values["poll"]
