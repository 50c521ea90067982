"""ansible-core 2.19's rule for conditionals: `when`, `changed_when`, `failed_when`, `until` and
assert's `that` must give a boolean.

The one place that decides what a conditional's value means. Read from ansible-core 2.19's
templating engine (`evaluate_conditional`) and checked against ansible-playbook
(tests/unit/test_conditionals_vs_ansible.py):

- a YAML boolean is itself; an empty (or all-blank) expression, or a `None`, is an error
  ("Empty conditional expressions are not allowed.");
- a literal that is not a string (`when: 1`) is an error ("Conditional expressions must be
  strings.");
- an expression's result must be a `bool` (`is defined`, comparisons, `| bool`): an int
  (`item | length`), a string (even "true" or "yes"), a list, None fail the task with
  "Conditional result (True) was derived from value of type 'int' at '…'. Conditionals must have
  a boolean result.";
- ALLOW_BROKEN_CONDITIONALS (ansible.cfg `[defaults] allow_broken_conditionals`, or
  ANSIBLE_ALLOW_BROKEN_CONDITIONALS) relaxes all three: empty is true, anything else is Python's
  truth of the value (so the string "false" is true, as there).

Ansible names the place the offending *value* came from (a variable's definition); provision
does not track values' origins and names the conditional's own task position instead.
"""

from __future__ import annotations

from typing import Any

from provision.errors import TemplateError

__all__ = ["BrokenConditionalError", "conditional_truth", "empty_conditional", "type_name"]


class BrokenConditionalError(TemplateError):
    """A conditional that is not a boolean (ansible-core 2.19's AnsibleBrokenConditionalError)."""


def type_name(value: Any) -> str:
    """The value's type as Ansible's messages name it (Python's names; our marked host strings,
    lists and dicts are `str`, `list`, `dict` there)."""
    for base in (bool, str, int, float, list, dict, tuple):
        if isinstance(value, base):
            return base.__name__
    return "NoneType" if value is None else type(value).__name__


def empty_conditional(allow_broken: bool) -> bool:
    """An empty expression (or one whose template gave None/''): true when broken ones are
    allowed, else the error Ansible raises."""
    if allow_broken:
        return True
    raise BrokenConditionalError("Empty conditional expressions are not allowed.")


def conditional_truth(value: Any, allow_broken: bool, where: str | None) -> bool:
    """The boolean a conditional's result stands for, or BrokenConditionalError."""
    if isinstance(value, bool):
        return value
    truth = bool(value)
    if allow_broken:
        return truth
    raise BrokenConditionalError(
        f"Conditional result ({truth}) was derived from value of type {type_name(value)!r} "
        f"at {where or '<unknown>'!r}. Conditionals must have a boolean result."
    )
