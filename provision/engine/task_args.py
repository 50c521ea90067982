"""A task's arguments as Ansible finalizes them when the task runs (ansible-core's
`Task._post_validate_args` and `TaskArgsFinalizer`): layers, lowest first, of `args:` written as
one template (`args: "{{ splat }}"`), free-form words a module without free form was given
(`file: "{{ file_args }}"`, `add_host: name...`) and the mapping/key=value arguments. The
template layers must render to mappings; words that are not one template fail the task there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from provision.engine.playbook_model import RAW_PARAMS, VARIABLE_PARAMS
from provision.engine.templating import OMIT
from provision.modules.argspec import ArgError


def possibly_all_template(text: Any) -> bool:
    """Ansible's `is_possibly_all_template`: starts and ends with Jinja delimiters."""
    return isinstance(text, str) and text.startswith(("{{", "{%")) and text.endswith(("}}", "%}"))


def fqcn(action: str) -> str:
    return action if "." in action else f"ansible.builtin.{action}"


def finalize_args(
    action: str, args: Mapping[str, Any], render: Callable[[Any], Any]
) -> Mapping[str, Any]:
    """The arguments a task runs with: `args` as loaded, its template layers rendered by
    `render` (a layer rendering to omit is empty, as Ansible's `value_for_omit={}`)."""
    if VARIABLE_PARAMS not in args and RAW_PARAMS not in args:
        return args
    raw = args.get(RAW_PARAMS)
    if raw is not None and not possibly_all_template(raw):
        raise ArgError(f"Action {fqcn(action)!r} does not support raw params.")
    merged: dict[str, Any] = {}
    for layer in (args.get(VARIABLE_PARAMS), raw):
        if layer is None:
            continue
        given = render(layer)
        if isinstance(given, str) and given == OMIT:
            given = {}
        if not isinstance(given, Mapping):
            raise ArgError(
                f"Finalization of task args for {fqcn(action)!r} failed: Task args must "
                f"resolve to a 'dict' not {type(given).__name__!r} (from {layer!r})."
            )
        merged.update(given)
    merged.update({k: v for k, v in args.items() if k not in (VARIABLE_PARAMS, RAW_PARAMS)})
    return merged
