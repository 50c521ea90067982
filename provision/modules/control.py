"""Controller-side modules: `debug`, `assert`, `fail`, `set_fact`, `include_vars`, and `facts`
(re-gather host facts through the agent — the one place host-side Python is needed)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provision.engine.task_args import possibly_all_template
from provision.engine.templating import TemplateError, UndefinedVariableError
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.modules.facts_ansible import PROBE, ansible_names, parse_probe
from provision.yamlpos import load_yaml


def probe_user(ctx_run: Any) -> dict[str, Any]:
    """user/uid/home/package manager/sudo of the login on the host, and the few files Ansible's
    setup reads that the agent doesn't (one shell round trip)."""
    return parse_probe(ctx_run(PROBE).stdout)


def data_dir_of(facts: Mapping[str, Any]) -> str | None:
    data_dir = facts.get("data_dir")
    if isinstance(data_dir, Mapping):
        data_dir = data_dir.get("path") or data_dir.get("dir")
    return str(data_dir) if data_dir else None


def gather_facts(ctx: TaskContext) -> dict[str, Any]:
    """Agent facts + the user probe, as the variables a play sees."""
    request: dict[str, Any] = {}
    if ctx.vars.get("data_dir") if hasattr(ctx.vars, "get") else None:
        request["data_dir"] = str(ctx.vars["data_dir"])
    facts = ctx.agent.call("facts", request)
    probe = probe_user(ctx.run)
    variables = ansible_names(facts, probe)
    variables["provision_facts"] = facts
    variables["provision_user"] = {
        "name": probe.get("user"),
        "uid": int(probe["uid"]) if probe.get("uid", "").isdigit() else None,
        "home": probe.get("home"),
        "is_root": probe.get("uid") == "0",
        "sudo": probe.get("sudo") == "1",
        "sudo_nopasswd": probe.get("sudo_nopasswd") == "1",
        # `sudo -n true` gave no answer within facts_ansible.PROBE_SECONDS (sudo waiting on DNS
        # for the host's own name, typically): taken as unusable without a password
        "sudo_probe_timed_out": probe.get("sudo_timeout") == "1",
        # apt/pip into system places works: root, or passwordless sudo
        "can_become": probe.get("uid") == "0" or probe.get("sudo_nopasswd") == "1",
    }
    data_dir = data_dir_of(facts)
    if data_dir:
        variables["provision_data_dir"] = data_dir
    return variables


@register
class Facts(Module):
    name = "facts"
    args = {}

    def run(self, ctx: TaskContext) -> ModuleResult:
        return ModuleResult(changed=False, facts=gather_facts(ctx))


# `setup` is what Ansible calls it
@register
class Setup(Facts):
    name = "setup"
    args = {"gather_subset": Arg("raw"), "filter": Arg("raw")}


@register
class Debug(Module):
    name = "debug"
    needs_connection = False
    args = {"msg": Arg("raw"), "var": Arg("str"), "verbosity": Arg("int", default=0)}
    # `var` is an expression of the playbook's, evaluated once: never a value rendered first
    # (a rendered value may hold host text, which must not be evaluated as code)
    raw_args = ("var",)
    mutually_exclusive = (("msg", "var"),)

    def run(self, ctx: TaskContext) -> ModuleResult:
        if ctx.args.get("var"):
            name = ctx.args["var"]
            assert ctx.templar is not None
            try:
                value = ctx.templar.evaluate(name, ctx.vars)
            except UndefinedVariableError:
                value = "VARIABLE IS NOT DEFINED!"  # what Ansible prints; not a failure
            return ModuleResult(data={name: value})
        msg = ctx.args.get("msg")
        return ModuleResult(msg=msg if msg is not None else "Hello world!")


@register
class Assert(Module):
    name = "assert"
    needs_connection = False
    args = {
        "that": Arg("raw", required=True),
        "fail_msg": Arg("raw", aliases=("msg",)),
        "success_msg": Arg("raw"),
        "quiet": Arg("bool", default=False),
    }
    # `that` holds bare expressions: the runner must not render them as templates first
    raw_args = ("that",)

    def run(self, ctx: TaskContext) -> ModuleResult:
        that = ctx.args["that"]
        assert ctx.templar is not None
        if possibly_all_template(that):  # `that: "{{ checks }}"`: the list it names (Ansible's)
            try:
                listed = ctx.templar.render(that, ctx.vars)
            except TemplateError:
                listed = None
            if isinstance(listed, list):
                that = listed
        conditions = that if isinstance(that, list) else [that]
        for condition in conditions:
            if not ctx.templar.condition([condition], ctx.vars):
                msg = ctx.args.get("fail_msg") or "Assertion failed"
                return ModuleResult(
                    failed=True, msg=str(msg), data={"assertion": condition, "evaluated_to": False}
                )
        return ModuleResult(msg=str(ctx.args.get("success_msg") or "All assertions passed"))


@register
class Fail(Module):
    name = "fail"
    needs_connection = False
    args = {"msg": Arg("raw", default="Failed as requested from task")}

    def run(self, ctx: TaskContext) -> ModuleResult:
        return ModuleResult(failed=True, msg=str(ctx.args.get("msg")))


@register
class SetFact(Module):
    name = "set_fact"
    needs_connection = False
    any_args = True
    args = {"cacheable": Arg("bool", default=False)}

    # a name may start with "_" (devsec.os_hardening's `_proc_mnt_options`); only the engine's
    # own free-form keys are not names
    _NOT_NAMES = ("cacheable", "_raw", "_raw_params")

    def check_args(self, args: dict[str, Any]) -> list[str]:
        names = [k for k in args if k not in self._NOT_NAMES]
        if not names:
            return ["set_fact needs at least one name: value"]
        bad = [k for k in names if not k.isidentifier()]
        return [f"'{k}' is not a valid variable name" for k in bad]

    def run(self, ctx: TaskContext) -> ModuleResult:
        facts = {k: v for k, v in ctx.args.items() if k not in self._NOT_NAMES}
        return ModuleResult(changed=False, facts=facts)


@register
class IncludeVars(Module):
    """Variables from a YAML/JSON file on the controller (vars/ beside the playbook or role)."""

    name = "include_vars"
    needs_connection = False
    free_form = "file"
    args = {"file": Arg("path", required=True), "name": Arg("str")}
    path_args = ("file",)
    facts_are_templates = True

    def run(self, ctx: TaskContext) -> ModuleResult:
        path = ctx.find_file(ctx.args["file"], "vars")

        data = load_yaml(path) if path.suffix != ".json" else json.loads(Path(path).read_text())
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ModuleFailure(
                f"{path}: expected a mapping of variables, got {type(data).__name__}"
            )
        facts = {ctx.args["name"]: dict(data)} if ctx.args.get("name") else dict(data)
        return ModuleResult(facts=facts, data={"ansible_included_var_files": [str(path)]})


@register
class Ping(Module):
    name = "ping"
    args = {"data": Arg("str", default="pong")}

    def run(self, ctx: TaskContext) -> ModuleResult:
        result = ctx.run("true")
        if not result.ok:
            raise ModuleFailure(result.stderr.strip() or "ping failed")
        return ModuleResult(data={"ping": ctx.args["data"]})
