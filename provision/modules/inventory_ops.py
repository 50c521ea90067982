"""`add_host` and `group_by`: change the run's in-memory inventory (controller only).

The modules only say what to add; the runner applies it to the shared inventory under its lock
(provision/engine/dynamic_inventory.py) and reports `changed` as Ansible does: when a host,
group, membership or var was new. `add_host` runs once per play (Ansible bypasses the host loop).
"""

from __future__ import annotations

from typing import Any

from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register

_ADD_HOST_NAMES = ("name", "hostname", "host")
_ADD_HOST_GROUPS = ("groups", "groupname", "group")


@register
class AddHost(Module):
    name = "add_host"
    needs_connection = False
    any_args = True
    args: dict[str, Arg] = {}

    def check_args(self, args: dict[str, Any]) -> list[str]:
        if not any(k in args for k in _ADD_HOST_NAMES):
            return ["add_host needs name: HOST (or hostname / host)"]
        return []

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = dict(ctx.args)
        name = next(str(args[k]) for k in _ADD_HOST_NAMES if k in args)
        port = None
        if name.count(":") == 1 and name.rsplit(":", 1)[1].isdigit():  # host:port, not IPv6
            name, port_text = name.rsplit(":", 1)
            port = int(port_text)
        raw_groups: Any = next((args[k] for k in _ADD_HOST_GROUPS if k in args), "")
        if isinstance(raw_groups, str):
            groups = [g.strip() for g in raw_groups.split(",") if g.strip()]
        elif isinstance(raw_groups, list):
            groups = [str(g).strip() for g in raw_groups]
        else:
            raise ModuleFailure(
                f"add_host: groups must be a list or a comma list, got {raw_groups!r}"
            )
        host_vars = {
            k: v
            for k, v in args.items()
            if k not in ("name", "hostname", "groupname", "groups") and not k.startswith("_")
        }
        if port is not None:
            host_vars["ansible_ssh_port"] = port
        info = {"host_name": name, "groups": list(dict.fromkeys(groups)), "host_vars": host_vars}
        return ModuleResult(changed=False, data={"add_host": info})


@register
class GroupBy(Module):
    name = "group_by"
    needs_connection = False
    # `key` (Ansible's name) is an alias: a group name is no secret, whatever its arg's name
    # says to provision.secrets
    args = {
        "group": Arg("str", required=True, aliases=("key",)),
        "parents": Arg("list", default=["all"]),
    }

    def run(self, ctx: TaskContext) -> ModuleResult:
        group = str(ctx.args["group"]).replace(" ", "-")
        parents = ctx.args.get("parents") or ["all"]
        if isinstance(parents, str):
            parents = [parents]
        data = {"add_group": group, "parent_groups": [str(p).replace(" ", "-") for p in parents]}
        return ModuleResult(changed=False, data=data)
