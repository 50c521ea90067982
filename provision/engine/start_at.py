"""ansible-playbook's `--start-at-task NAME`, as its PlayIterator does it: walking each play's
tasks in order as they would run when nothing fails (pre_tasks, roles, tasks, post_tasks; a
block's rescue is never reached that way, its always is), every task before the first whose
name matches is passed over, unrun. A name matches as written or as `role : name` (Ansible's
get_name(); an unnamed task is its action), equal or as an fnmatch pattern. The plays before
the one holding it run nothing, not even fact gathering; from the match on everything runs,
its play's fact gathering included, and later plays are untouched. A dynamic include is one task
(what it would include is not known before it runs); an import's tasks are the play's own.
"""

from __future__ import annotations

import dataclasses
import fnmatch

from provision.engine.playbook_model import Block, Include, Node, Play, Task
from provision.engine.role_names import role_name


def _names(node: Node) -> list[str]:
    own = node.name or (node.action if isinstance(node, Task) else "")
    names = [node.name] if node.name else []
    if node.role is not None and own:
        names.append(f"{role_name(node.role)} : {own}")
    elif own:
        names.append(own)
    return names


def _matches(node: Node, pattern: str) -> bool:
    return any(n == pattern or fnmatch.fnmatch(n, pattern) for n in _names(node))


def _prune(nodes: list[Node], pattern: str) -> tuple[list[Node], bool]:
    """`nodes` from the first match on (and whether there was one)."""
    for i, node in enumerate(nodes):
        if isinstance(node, Block) and not node.when_once:
            block, found = _prune(node.block, pattern)
            rescue = node.rescue if found else []
            always = node.always
            if not found:
                always, found = _prune(node.always, pattern)
            if found:
                return [dataclasses.replace(node, block=block, rescue=rescue, always=always),
                        *nodes[i + 1:]], True  # fmt: skip
        elif isinstance(node, Include) and node.static_children is not None:
            children, found = _prune(node.static_children, pattern)
            if found:
                return [dataclasses.replace(node, static_children=children), *nodes[i + 1 :]], True
        elif _matches(node, pattern):
            return nodes[i:], True
    return [], False


def start_at_task(plays: list[Play], pattern: str) -> list[Play]:
    """The plays as they run under `--start-at-task pattern`."""
    out: list[Play] = []
    found = False
    for play in plays:
        if found:
            out.append(play)
            continue
        kept: dict[str, list[Node]] = {}
        for section in ("pre_tasks", "roles", "tasks", "post_tasks"):
            nodes = getattr(play, section)
            if found:
                kept[section] = nodes
            else:
                kept[section], found = _prune(nodes, pattern)
        if not found:
            kept["gather_facts"] = False  # type: ignore[assignment]
        out.append(dataclasses.replace(play, **kept))  # type: ignore[arg-type]
    return out
