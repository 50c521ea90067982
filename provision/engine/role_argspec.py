"""Role argument specs (meta/argument_specs.yml), checked as Ansible checks them.

Ansible prepends to a role's tasks, when the role has a spec for its entry point (`tasks_from`,
default `main`), a task named "Validating arguments against arg spec 'main'" (plus " - " and the
spec's short_description) running `ansible.builtin.validate_argument_spec` with the spec's
`options`, the role's own parameters, tag `always`. That task takes, for each option, the
variable of that name if defined (rendered), the role parameters over them, and checks them:

- `required: true` and not given: "missing required arguments: a, b";
- `type` (str, int, float, bool, list, dict, path, raw; default str), converting as Ansible's
  check_type_* do (an int is a fine str, "1" a fine int, "yes" a fine bool, "a,b" a list), else
  "argument 'x' is of type <class 'str'> and we were unable to convert to int: …";
- `elements` for a list's items; `choices` ("value of x must be one of: a, b, got: c"; for a list
  "must be one or more of"); `options`: the same rules inside a dict (or a list of dicts), with
  " found in parent" in the messages, as Ansible's context. Each pass (required, types,
  choices, sub-options) runs over all options before the next, so the messages come in Ansible's
  order.

The spec's `default` does not set a variable (Ansible's validator does not either: a role's
defaults/main.yml does that). Read from ansible-core 2.19 (module_utils/common/arg_spec.py,
parameters.py, validation.py) and checked against ansible-playbook in
tests/unit/test_role_argspec_vs_ansible.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["argument_errors", "entry_spec", "validation_task_name"]

_TRUE = {"y", "yes", "on", "1", "true", "t"}
_FALSE = {"n", "no", "off", "0", "false", "f"}
# Ansible prints its set of booleans (its order is the set's; this is the one 2.19 printed)
_VALID_BOOLEANS = "'yes', 1, 0, 'f', 'n', 't', 'y', 'true', '0', 'on', 'false', 'off', 'no', '1'"


def entry_spec(argument_specs: Any, entrypoint: str) -> Mapping[str, Any] | None:
    """The spec of one entry point from a role's `argument_specs` mapping, or None."""
    if not isinstance(argument_specs, Mapping):
        return None
    spec = argument_specs.get(entrypoint)
    return spec if isinstance(spec, Mapping) and spec else None


def validation_task_name(spec: Mapping[str, Any], entrypoint: str) -> str:
    name = f"Validating arguments against arg spec '{entrypoint}'"
    if "short_description" in spec:
        name += f" - {spec['short_description']}"
    return name


class _Unconvertible(TypeError):
    pass


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (str, int, float)):
        text = str(value).strip().lower() if isinstance(value, str) else value
        if text in _TRUE or (not isinstance(text, str) and text == 1):
            return True
        if text in _FALSE or (not isinstance(text, str) and text == 0):
            return False
    raise _Unconvertible(
        f"The value '{value}' is not a valid boolean. Valid booleans include: {_VALID_BOOLEANS}"
    )


def _to_list(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        return value.split(",")
    if isinstance(value, (int, float)):
        return [str(value)]
    raise _Unconvertible(f"{type(value)} cannot be converted to a list")


def _to_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        if value.startswith("{"):
            try:
                loaded = json.loads(value)
            except ValueError:
                raise _Unconvertible("unable to evaluate string as dictionary") from None
            if isinstance(loaded, dict):
                return loaded
        elif "=" in value:
            pairs = [p.split("=", 1) for p in value.replace(",", " ").split()]
            if all(len(p) == 2 for p in pairs):
                return {k.strip(): v.strip() for k, v in pairs}
        raise _Unconvertible("dictionary requested, could not parse JSON or key=value")
    raise _Unconvertible(f"{type(value)} cannot be converted to a dict")


def _to_int(value: Any) -> int:
    if isinstance(value, int):
        return value
    try:
        number = float(value) if not isinstance(value, str) else float(value.strip())
        if number.is_integer():
            return int(number)
    except (TypeError, ValueError):
        pass
    raise _Unconvertible(f'"{value!r}" cannot be converted to an int')


def _to_float(value: Any) -> float:
    if isinstance(value, float):
        return value
    if isinstance(value, (str, int)):
        try:
            return float(value)
        except ValueError:
            pass
    raise _Unconvertible(f"{type(value)} cannot be converted to a float")


def _to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""  # check_type_str: None is '' (Ansible's pre-2.19 templating equivalence)
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return str(value)
    # Ansible converts any value (str()); a dict or list becomes its Python text
    return str(value)


def _convert(kind: str, value: Any) -> Any:
    if kind == "raw":
        return value
    if kind == "path":
        return os.path.expanduser(os.path.expandvars(_to_str(value)))
    table = {
        "str": _to_str,
        "bool": _to_bool,
        "list": _to_list,
        "dict": _to_dict,
        "int": _to_int,
        "float": _to_float,
    }
    convert = table.get(kind)
    if convert is None:  # jsonarg, bytes, bits…: taken as they are
        return value
    return convert(value)


def _check(
    options: Mapping[str, Any],
    params: dict[str, Any],
    errors: list[str],
    context: list[str],
    unsupported: dict[str, list[str]] | None = None,
) -> None:
    """Ansible's passes, in its order: required, types (and elements), choices, sub-options;
    a sub-option's unknown keys land in `unsupported` (dotted name: that level's options)."""
    found_in = f" found in {' -> '.join(context)}" if context else ""
    specs = {name: opt for name, opt in options.items() if isinstance(opt, Mapping)}
    if context and unsupported is not None:  # (the top level: the role's whole scope, unchecked)
        aliases = {str(a) for o in specs.values() for a in (o.get("aliases") or [])}
        for key in params:
            if key not in specs and key not in aliases:
                unsupported[".".join([*context, str(key)])] = sorted(specs) + (
                    [f"({', '.join(sorted(aliases))})"] if aliases else []
                )
    missing = sorted(n for n, opt in specs.items() if opt.get("required") and n not in params)
    if missing:
        errors.append(f"missing required arguments: {', '.join(missing)}{found_in}")
    for name, opt in specs.items():
        if name not in params:
            continue
        if params[name] is None and not opt.get("required") and opt.get("default") is None:
            continue  # _validate_argument_types: a required None is converted (and may fail)
        kind = str(opt.get("type") or "str")
        value = params[name]
        try:
            params[name] = _convert(kind, value)
        except _Unconvertible as exc:
            where = f" found in '{' -> '.join(context)}'." if context else ""
            errors.append(
                f"argument '{name}' is of type {_type_name(value)}{where} and we were unable to "
                f"convert to {kind}: {exc}"
            )
            continue
        elements = opt.get("elements")
        if kind == "list" and elements and isinstance(params[name], list):
            items = params[name]
            for i, item in enumerate(items):
                if str(elements) == "dict" and opt.get("options"):
                    continue  # checked below as sub-options
                try:
                    items[i] = _convert(str(elements), item)
                except _Unconvertible as exc:
                    where = f" found in '{' -> '.join(context)}'" if context else ""
                    errors.append(
                        f"Elements value for option '{name}'{where} is of type "
                        f"{_type_name(item)} and we were unable to convert to {elements}: {exc}"
                    )
    for name, opt in specs.items():
        if opt.get("choices") and params.get(name) is not None:
            _check_choices(name, params[name], list(opt["choices"]), errors, found_in)
    for name, opt in specs.items():
        sub, value = opt.get("options"), params.get(name)
        if not isinstance(sub, Mapping) or value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, Mapping):
                _check(sub, dict(item), errors, [*context, name], unsupported)


def _type_name(value: Any) -> str:
    return "NoneType" if value is None else type(value).__name__


def _check_choices(
    name: str, value: Any, choices: list[Any], errors: list[str], found_in: str
) -> None:
    shown = ", ".join(str(c) for c in choices)
    if isinstance(value, list):
        bad = [v for v in value if v not in choices]
        if bad:
            errors.append(
                f"value of {name} must be one or more of: {shown}. Got no match for: "
                f"{', '.join(str(b) for b in bad)}{found_in}"
            )
    elif value not in choices:
        # Ansible also accepts a "yes"/"no" string for a bool choice and the reverse
        if not (isinstance(value, str) and _bool_matches(value, choices)):
            errors.append(f"value of {name} must be one of: {shown}, got: {value}{found_in}")


def _bool_matches(value: str, choices: list[Any]) -> bool:
    try:
        return _to_bool(value) in [c for c in choices if isinstance(c, bool)]
    except _Unconvertible:
        return False


def argument_errors(options: Mapping[str, Any], values: Mapping[str, Any]) -> list[str]:
    """Ansible's error messages for `values` (the variables named by the spec, rendered, with
    the role's parameters over them) against a spec's `options`; [] when they pass."""
    errors: list[str] = []
    unsupported: dict[str, list[str]] = {}
    _check(options, dict(values), errors, [], unsupported)
    if unsupported:  # ArgumentSpecValidator.validate: one error, last; the supported names are
        # those of the level it looked at last (Ansible's own quirk)
        names = sorted(unsupported)
        supported = list(unsupported.values())[-1]
        shown = ", ".join(n for n in supported if not n.startswith("("))
        shown += "".join(f" {n}" for n in supported if n.startswith("("))
        errors.append(f"{', '.join(names)}. Supported parameters include: {shown}.")
    return errors
