"""`getent` (ansible.builtin.getent): a name-service database (passwd, group, hosts, services…)
read with the host's own `getent`, as facts `getent_<database>`: key -> the other fields (a list of
those lists when a key repeats). The same answers, messages and exit-code meanings as Ansible's."""

from __future__ import annotations

from typing import Any

from provision.modules.base import Arg, Module, ModuleResult, TaskContext, q, register

_COLON = ("passwd", "shadow", "group", "gshadow")
_WHY = {
    1: "Missing arguments, or database unknown.",
    2: "One or more supplied key could not be found in the database.",
    3: "Enumeration not supported on this database.",
}


def parse_getent(out: str, split: str | None) -> dict[str, Any]:
    """Ansible's layout: the first field is the key; a repeated key collects its records."""
    tree: dict[str, Any] = {}
    seen: dict[str, int] = {}
    for line in out.splitlines():
        record = line.split(split)
        key = record[0]
        if key in seen:
            if seen[key] == 1:
                tree[key] = [tree[key]]
            tree[key].append(record[1:])
            seen[key] += 1
        else:
            tree[key] = record[1:]
            seen[key] = 1
    return tree


@register
class Getent(Module):
    name = "getent"
    args = {
        "database": Arg("str", required=True),
        "key": Arg("str"),
        "service": Arg("str"),
        "split": Arg("str"),
        "fail_key": Arg("bool", default=True),
    }

    def run(self, ctx: TaskContext) -> ModuleResult:
        a = ctx.args
        database = a["database"]
        command = "getent " + q(database)
        if a["key"] is not None:
            command += " " + q(a["key"])
        if a["service"] is not None:
            command += " -s " + q(a["service"])
        split = a["split"] if a["split"] is not None else (":" if database in _COLON else None)
        done = ctx.run(command)
        tree_name = f"getent_{database}"
        if done.exit_code == 0:
            return ModuleResult(facts={tree_name: parse_getent(done.stdout, split)})
        if done.exit_code == 127:
            return ModuleResult(
                failed=True, msg="Failed to find required executable \"getent\" in paths"
            )
        msg = _WHY.get(done.exit_code, "Unexpected failure!")
        if done.exit_code == 2 and not a["fail_key"]:
            return ModuleResult(msg=msg, facts={tree_name: {a["key"]: None}})
        return ModuleResult(failed=True, msg=msg)
