"""`loop_control:` as Ansible's LoopControl (playbook/loop_control.py) takes it: the names a
loop's item is seen under, the extended `ansible_loop` facts, and `break_when`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

LOOP_CONTROL_KEYS = (
    "loop_var",
    "index_var",
    "label",
    "pause",
    "extended",
    "extended_allitems",
    "break_when",
)


def item_vars(
    control: Mapping[str, Any],
    item: Any,
    index: int,
    items: list[Any],
    truth: Callable[[Any], bool],
) -> dict[str, Any]:
    """The variables one item runs with; also what its result carries (Ansible puts the loop
    var, `ansible_loop_var`, the index var and `ansible_loop` in each item's result)."""
    loop_var = str(control.get("loop_var") or "item")
    out: dict[str, Any] = {loop_var: item, "ansible_loop_var": loop_var}
    index_var = control.get("index_var")
    if index_var:
        out[str(index_var)] = index
        out["ansible_index_var"] = str(index_var)
    if control.get("extended") is not None and truth(control["extended"]):
        info: dict[str, Any] = {
            "index": index + 1,
            "index0": index,
            "first": index == 0,
            "last": index == len(items) - 1,
            "length": len(items),
            "revindex": len(items) - index,
            "revindex0": len(items) - index - 1,
            "previtem": items[index - 1] if index else None,
            "nextitem": items[index + 1] if index + 1 < len(items) else None,
        }
        allitems = control.get("extended_allitems")
        if allitems is None or truth(allitems):  # Ansible's default: true
            info["allitems"] = items
        out["ansible_loop"] = info
    return out


def break_conditions(control: Mapping[str, Any]) -> list[Any]:
    """`break_when:` as a list of conditions (one or a list, as Ansible's `isa='list'`)."""
    value = control.get("break_when")
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]
