"""A role task's role variables as ansible-core's Role computes them from the role's dependency
chain (the roles whose meta/main.yml dependencies brought it in, outermost first) and its own
dependencies (playbook/role/__init__.py):

- params (`get_role_params`): each parent's parameters, then the role's own;
- vars (`get_vars`, without params): each parent's vars/, then every dependency's (recursively,
  public ones: `only_exports`), then the role's own vars/;
- defaults (`get_default_vars`): every dependency's defaults, then each parent's, then its own.

Computed once per loaded role, when its tasks first run (the whole tree is loaded by then).
"""

from __future__ import annotations

from typing import Any

from provision.engine.playbook_model import Role


def dep_chain(role: Role) -> list[Role]:
    """The roles above `role` through meta dependencies, outermost first."""
    chain: list[Role] = []
    parent = role.parent
    while parent is not None and all(p is not parent for p in chain):
        chain.insert(0, parent)
        parent = parent.parent
    return chain


def all_dependencies(role: Role, seen: set[int] | None = None) -> list[Role]:
    """Role.get_all_dependencies: each dependency after its own, depth first."""
    seen = set() if seen is None else seen
    out: list[Role] = []
    for dep in role.dependencies:
        if id(dep) in seen:
            continue
        seen.add(id(dep))
        out += all_dependencies(dep, seen) + [dep]
    return out


def _exported_vars(role: Role) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dep in all_dependencies(role):
        if dep.public:
            out.update(dep.vars)
    out.update(role.vars)
    return out


def role_layers(role: Role) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(params, vars, defaults) of a task in `role`, each already merged as Ansible merges it."""
    cached = role.__dict__.get("_layers")
    if cached is not None:
        return cached
    chain = dep_chain(role)
    params: dict[str, Any] = {}
    role_vars: dict[str, Any] = {}
    for parent in chain:
        params.update(parent.params)
        role_vars.update(parent.vars)
    params.update(role.params)
    role_vars.update(_exported_vars(role))
    defaults: dict[str, Any] = {}
    for dep in all_dependencies(role):  # each after its own: get_default_vars' order
        defaults.update(dep.defaults)
    for parent in chain:
        defaults.update(parent.defaults)
    defaults.update(role.defaults)
    cached = role.__dict__["_layers"] = (params, role_vars, defaults)
    return cached
