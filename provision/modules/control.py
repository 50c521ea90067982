"""Controller-side modules: `debug`, `assert`, `fail`, `set_fact`, `include_vars`, and `facts`
(re-gather host facts through the agent — the one place host-side Python is needed)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provision.engine.templating import UndefinedVariableError
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register

# Root needs no sudo probe; for others `sudo -n true` is bounded: sudo resolves the host's own
# name first, and a container whose name doesn't resolve (no DNS in reach) waits ~20 s for it.
SUDO_PROBE_SECONDS = 3
# One shell round trip for what the agent's facts don't carry: who we are and what we may do.
_PROBE = r"""
echo "user=$(id -un 2>/dev/null)"
echo "uid=$(id -u)"
echo "gid=$(id -g)"
echo "home=$HOME"
echo "shell=${SHELL:-}"
for m in apt-get dnf yum apk zypper pacman; do if command -v $m >/dev/null 2>&1; then echo "pkg=$m"; break; fi; done
if [ "$(id -u)" = 0 ]; then :; elif command -v sudo >/dev/null 2>&1; then echo "sudo=1"
  if command -v timeout >/dev/null 2>&1; then timeout -k 1 SUDO_SECONDS sudo -n true >/dev/null 2>&1; rc=$?
  else sudo -n true >/dev/null 2>&1; rc=$?; fi
  if [ "$rc" = 0 ]; then echo "sudo_nopasswd=1"; elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "sudo_timeout=1"; fi
fi
""".replace("SUDO_SECONDS", str(SUDO_PROBE_SECONDS))
_PKG = {
    "apt-get": "apt",
    "dnf": "dnf",
    "yum": "yum",
    "apk": "apk",
    "zypper": "zypper",
    "pacman": "pacman",
}
_DISTRIBUTIONS = {
    "debian": "Debian",
    "ubuntu": "Ubuntu",
    "centos": "CentOS",
    "rhel": "RedHat",
    "fedora": "Fedora",
    "rocky": "Rocky",
    "almalinux": "AlmaLinux",
    "alpine": "Alpine",
    "arch": "Archlinux",
    "opensuse-leap": "openSUSE Leap",
    "amzn": "Amazon",
}
_FAMILIES = {
    "debian": "Debian",
    "ubuntu": "Debian",
    "rhel": "RedHat",
    "centos": "RedHat",
    "fedora": "RedHat",
    "rocky": "RedHat",
    "almalinux": "RedHat",
    "amzn": "RedHat",
    "alpine": "Alpine",
    "arch": "Archlinux",
}


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def probe_user(ctx_run: Any) -> dict[str, Any]:
    """user/uid/home/package manager/sudo of the login on the host (one shell round trip)."""
    result = ctx_run(_PROBE)
    info: dict[str, Any] = {}
    for line in result.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            info[key.strip()] = value.strip()
    return info


def ansible_names(facts: Mapping[str, Any], probe: Mapping[str, Any]) -> dict[str, Any]:
    """`ansible_*` variables where the agent's facts map onto Ansible's names."""
    out: dict[str, Any] = {}
    hostname = facts.get("hostname")
    if isinstance(hostname, Mapping):
        fqdn = hostname.get("fqdn")
        hostname = hostname.get("short") or hostname.get("name") or hostname.get("hostname")
    else:
        fqdn = None
    if hostname:
        out["ansible_hostname"] = str(hostname).split(".")[0]
        out["ansible_nodename"] = str(hostname)
        out["ansible_fqdn"] = fqdn or str(hostname)
    os_info = facts.get("os") or {}
    dist_id = str(_get(os_info, "id") or "").lower()
    if dist_id:
        out["ansible_distribution"] = _DISTRIBUTIONS.get(dist_id, dist_id.capitalize())
        like = str(_get(os_info, "id_like") or "").lower().split()
        family = _FAMILIES.get(dist_id) or next(
            (_FAMILIES[x] for x in like if x in _FAMILIES), None
        )
        out["ansible_os_family"] = family or out["ansible_distribution"]
    version = _get(os_info, "version_id")
    if version:
        out["ansible_distribution_version"] = str(version)
        out["ansible_distribution_major_version"] = str(version).split(".")[0]
    for src, dst in (
        ("kernel", "ansible_kernel"),
        ("arch", "ansible_architecture"),
        ("codename", "ansible_distribution_release"),
    ):
        if _get(os_info, src):
            out[dst] = _get(os_info, src)
    out["ansible_system"] = "Linux"
    container = _get(os_info, "container", "type")
    vm = _get(os_info, "virtualization", "hypervisor")
    if container or vm:
        out["ansible_virtualization_type"] = container or vm
        out["ansible_virtualization_role"] = "guest"
    cpu = facts.get("cpu") or {}
    if _get(cpu, "logical_cpus") is not None:
        out["ansible_processor_vcpus"] = _get(cpu, "logical_cpus")
    if _get(cpu, "physical_cores") is not None:
        out["ansible_processor_cores"] = _get(cpu, "physical_cores")
    if _get(cpu, "sockets") is not None:
        out["ansible_processor_count"] = _get(cpu, "sockets")
    if _get(cpu, "model"):
        out["ansible_processor"] = [_get(cpu, "model")]
    if _get(cpu, "usable_cpus") is not None:
        out["ansible_processor_nproc"] = _get(cpu, "usable_cpus")
    memory = facts.get("memory") or {}
    total = _get(memory, "total_bytes")
    if isinstance(total, (int, float)):
        out["ansible_memtotal_mb"] = int(total // (1 << 20))
    available = _get(memory, "available_bytes")
    if isinstance(available, (int, float)):
        out["ansible_memfree_mb"] = int(available // (1 << 20))
    python = facts.get("python")
    py_version = None
    if isinstance(python, Mapping):
        py_version = (
            python.get("version")
            or _get(python, "agent", "version")
            or _get(python, "system", "version")
        )
        executable = (
            python.get("executable")
            or _get(python, "agent", "executable")
            or _get(python, "system", "executable")
        )
        if executable:
            out["ansible_python_interpreter_path"] = executable
    elif isinstance(python, str):
        py_version = python
    if py_version:
        out["ansible_python_version"] = str(py_version)
        parts = (str(py_version).split(".") + ["0", "0"])[:3]
        out["ansible_python"] = {
            "version": {
                "major": int(parts[0]),
                "minor": int(parts[1]) if parts[1].isdigit() else 0,
            },
            "executable": out.get("ansible_python_interpreter_path"),
        }
    mounts = _get(facts, "disks", "mounts")
    if isinstance(mounts, list):
        out["ansible_mounts"] = [
            {
                "mount": m.get("mountpoint"),
                "fstype": m.get("fs_type"),
                "size_total": m.get("total_bytes"),
                "size_available": m.get("free_bytes"),
                "device": m.get("source"),
            }
            for m in mounts
            if isinstance(m, Mapping)
        ]
    if probe.get("user"):
        out["ansible_user_id"] = probe["user"]
    if probe.get("uid", "").isdigit():
        out["ansible_user_uid"] = int(probe["uid"])
    if probe.get("gid", "").isdigit():
        out["ansible_user_gid"] = int(probe["gid"])
    if probe.get("home"):
        out["ansible_user_dir"] = probe["home"]
    if probe.get("shell"):
        out["ansible_user_shell"] = probe["shell"]
    out["ansible_pkg_mgr"] = _PKG.get(probe.get("pkg", ""), "unknown")
    return out


def data_dir_of(facts: Mapping[str, Any]) -> str | None:
    data_dir = facts.get("data_dir")
    if isinstance(data_dir, Mapping):
        data_dir = data_dir.get("path") or data_dir.get("dir")
    return str(data_dir) if data_dir else None


def gather_facts(ctx: TaskContext) -> dict[str, Any]:
    """Agent facts + the user probe, as the variables a play sees."""
    request: dict[str, Any] = {}
    if ctx.vars.get("data_dir") if hasattr(ctx.vars, "get") else None:
        request["data_dir"] = str(ctx.vars["data_dir"])
    facts = ctx.agent.call("facts", request)
    probe = probe_user(ctx.run)
    variables = ansible_names(facts, probe)
    variables["provision_facts"] = facts
    variables["provision_user"] = {
        "name": probe.get("user"),
        "uid": int(probe["uid"]) if probe.get("uid", "").isdigit() else None,
        "home": probe.get("home"),
        "is_root": probe.get("uid") == "0",
        "sudo": probe.get("sudo") == "1",
        "sudo_nopasswd": probe.get("sudo_nopasswd") == "1",
        # `sudo -n true` did not answer within SUDO_PROBE_SECONDS (sudo waiting on DNS for the
        # host's own name, typically): sudo is taken as unusable without a password
        "sudo_probe_timed_out": probe.get("sudo_timeout") == "1",
        # apt/pip into system places works: root, or passwordless sudo
        "can_become": probe.get("uid") == "0" or probe.get("sudo_nopasswd") == "1",
    }
    data_dir = data_dir_of(facts)
    if data_dir:
        variables["provision_data_dir"] = data_dir
    return variables


@register
class Facts(Module):
    name = "facts"
    args = {}

    def run(self, ctx: TaskContext) -> ModuleResult:
        return ModuleResult(changed=False, facts=gather_facts(ctx))


# `setup` is what Ansible calls it
@register
class Setup(Facts):
    name = "setup"
    args = {"gather_subset": Arg("raw"), "filter": Arg("raw")}


@register
class Debug(Module):
    name = "debug"
    needs_connection = False
    args = {"msg": Arg("raw"), "var": Arg("str"), "verbosity": Arg("int", default=0)}
    # `var` is an expression of the playbook's, evaluated once: never a value rendered first
    # (a rendered value may hold host text, which must not be evaluated as code)
    raw_args = ("var",)
    mutually_exclusive = (("msg", "var"),)

    def run(self, ctx: TaskContext) -> ModuleResult:
        if ctx.args.get("var"):
            name = ctx.args["var"]
            assert ctx.templar is not None
            try:
                value = ctx.templar.evaluate(name, ctx.vars)
            except UndefinedVariableError:
                value = "VARIABLE IS NOT DEFINED!"  # what Ansible prints; not a failure
            return ModuleResult(data={name: value})
        msg = ctx.args.get("msg")
        return ModuleResult(msg=msg if msg is not None else "Hello world!")


@register
class Assert(Module):
    name = "assert"
    needs_connection = False
    args = {
        "that": Arg("raw", required=True),
        "fail_msg": Arg("raw", aliases=("msg",)),
        "success_msg": Arg("raw"),
        "quiet": Arg("bool", default=False),
    }
    # `that` holds bare expressions: the runner must not render them as templates first
    raw_args = ("that",)

    def run(self, ctx: TaskContext) -> ModuleResult:
        that = ctx.args["that"]
        conditions = that if isinstance(that, list) else [that]
        assert ctx.templar is not None
        for condition in conditions:
            if not ctx.templar.condition([condition], ctx.vars):
                msg = ctx.args.get("fail_msg") or "Assertion failed"
                return ModuleResult(
                    failed=True, msg=str(msg), data={"assertion": condition, "evaluated_to": False}
                )
        return ModuleResult(msg=str(ctx.args.get("success_msg") or "All assertions passed"))


@register
class Fail(Module):
    name = "fail"
    needs_connection = False
    args = {"msg": Arg("raw", default="Failed as requested from task")}

    def run(self, ctx: TaskContext) -> ModuleResult:
        return ModuleResult(failed=True, msg=str(ctx.args.get("msg")))


@register
class SetFact(Module):
    name = "set_fact"
    needs_connection = False
    any_args = True
    args = {"cacheable": Arg("bool", default=False)}

    def check_args(self, args: dict[str, Any]) -> list[str]:
        names = [k for k in args if k != "cacheable" and not k.startswith("_")]
        if not names:
            return ["set_fact needs at least one name: value"]
        bad = [k for k in names if not k.isidentifier()]
        return [f"'{k}' is not a valid variable name" for k in bad]

    def run(self, ctx: TaskContext) -> ModuleResult:
        facts = {k: v for k, v in ctx.args.items() if k != "cacheable" and not k.startswith("_")}
        return ModuleResult(changed=False, facts=facts)


@register
class IncludeVars(Module):
    """Variables from a YAML/JSON file on the controller (vars/ beside the playbook or role)."""

    name = "include_vars"
    needs_connection = False
    free_form = "file"
    args = {"file": Arg("path", required=True), "name": Arg("str")}
    facts_are_templates = True

    def run(self, ctx: TaskContext) -> ModuleResult:
        path = ctx.find_file(ctx.args["file"], "vars")
        from provision.engine.yamlpos import load_yaml

        data = load_yaml(path) if path.suffix != ".json" else json.loads(Path(path).read_text())
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ModuleFailure(
                f"{path}: expected a mapping of variables, got {type(data).__name__}"
            )
        facts = {ctx.args["name"]: dict(data)} if ctx.args.get("name") else dict(data)
        return ModuleResult(facts=facts, data={"ansible_included_var_files": [str(path)]})


@register
class Ping(Module):
    name = "ping"
    args = {"data": Arg("str", default="pong")}

    def run(self, ctx: TaskContext) -> ModuleResult:
        result = ctx.run("true")
        if not result.ok:
            raise ModuleFailure(result.stderr.strip() or "ping failed")
        return ModuleResult(data={"ping": ctx.args["data"]})
