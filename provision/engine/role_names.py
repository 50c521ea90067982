"""The play's role-name variables, as ansible-core's VariableManager defines them from the play's
roles (`play.roles`: those of `roles:` and every `import_role`, when the play loads; each
`include_role` joins when it runs):

- `ansible_play_role_names` (and the older `role_names`): those roles' names, in order;
- `ansible_dependent_role_names`: the names of all their meta/main.yml dependencies, recursively
  (a role both named and a dependency is in both);
- `ansible_role_names`: the two together, each name once.

A role's name is Ansible's `Role.get_name()`: a collection role's FQCN, a role given by path its
folder's name.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from provision.engine.playbook_model import Block, Include, Node, Play, Role
from provision.engine.role_vars import all_dependencies


def role_name(role: Role) -> str:
    if "/" in role.name:
        return PurePath(role.name).name
    return role.magic["ansible_role_name"]


def static_roles(nodes: list[Node]) -> list[Role]:
    """The roles loaded statically under `nodes` that Ansible appends to `play.roles` as it loads
    them: each `roles:` entry and `import_role`, a role's own imports before the role (Role.load
    loads its tasks first), dependencies not (they are its dependencies), include_role not (it
    joins when it runs)."""
    found: list[Role] = []

    def walk(items: list[Node]) -> None:
        for node in items:
            if isinstance(node, Block):
                if node.when_once:
                    continue
                walk(node.block + node.rescue + node.always)
                role = node.role
                if node.whole_role and role is not None and not role.dependency:
                    found.append(role)
            elif isinstance(node, Include) and node.static_children:
                walk(node.static_children)

    walk(nodes)
    return found


def play_roles(play: Play) -> list[Role]:
    """Ansible's `play.roles` when the play starts."""
    return static_roles(play.roles + play.pre_tasks + play.tasks + play.post_tasks)


def included_roles(block: Block) -> list[Role]:
    """What an include_role that runs adds to `play.roles`: the role's own imports, then it."""
    inner = static_roles(block.block + block.rescue + block.always)
    return inner + ([block.role] if block.role is not None else [])


def role_name_vars(roles: list[Role]) -> dict[str, Any]:
    """The four variables for a play whose `play.roles` is `roles`."""
    named = [role_name(r) for r in roles]
    seen: set[int] = set()
    dependent = list(dict.fromkeys(role_name(d) for r in roles for d in all_dependencies(r, seen)))
    return {
        "ansible_play_role_names": named,
        "role_names": named,
        "ansible_dependent_role_names": dependent,
        "ansible_role_names": list(dict.fromkeys(named + dependent)),
    }
