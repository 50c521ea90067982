"""validate_argument_spec: a role's arguments against its spec (engine/role_argspec.py), as the
implicit first task of a role with meta/argument_specs.yml, or written as a task."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provision.engine.role_argspec import argument_errors
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register


@register
class ValidateArgumentSpec(Module):
    name = "validate_argument_spec"
    needs_connection = False
    args = {
        "argument_spec": Arg("raw", required=True),
        "provided_arguments": Arg("raw"),
        "validate_args_context": Arg("raw"),
    }
    # every argument is rendered, the spec too, as in Ansible (a `{{` in an option's description
    # fails the task there): the spec is the role's own file, never host data

    def run(self, ctx: TaskContext) -> ModuleResult:
        spec = ctx.args["argument_spec"]
        provided = ctx.args.get("provided_arguments") or {}
        if not isinstance(spec, Mapping):
            raise ModuleFailure(
                f"Incorrect type for argument_spec, expected dict and got {type(spec)}"
            )
        if not isinstance(provided, Mapping):
            raise ModuleFailure(
                f"Incorrect type for provided_arguments, expected dict and got {type(provided)}"
            )
        assert ctx.templar is not None
        # each option's variable, if defined, rendered; the role's parameters over them
        values: dict[str, Any] = {
            name: ctx.templar.render(ctx.vars[name], ctx.vars) for name in spec if name in ctx.vars
        }
        values.update(provided)
        context = ctx.args.get("validate_args_context") or {}
        errors = argument_errors(spec, values)
        if errors:
            raise ModuleFailure(
                "Validation of arguments failed:\n" + "\n".join(errors),
                argument_errors=errors,
                argument_spec_data=dict(spec),
                validate_args_context=context,
            )
        return ModuleResult(
            msg="The arg spec validation passed", data={"validate_args_context": context}
        )
