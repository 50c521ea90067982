"""Ansible's argument specs, as data (ansible_specs.json, made by scripts/ansible_specs.py from
`ansible-doc -j`): which arguments Ansible's module of the same name accepts.

A task's arguments are checked when it runs (Ansible's rule): an argument neither provision's
module nor Ansible's knows fails with Ansible's own text ("Unsupported parameters for (file)
module: X. Supported parameters include: …"); one Ansible accepts but provision's module does
not implement is dropped when its value is Ansible's default (it changes nothing), else raises
`UnsupportedArgument` — the one hook where the engine may hand the task to Ansible's own module
(`set_ansible_fallback`), or fail it naming the module, the argument and what to do.

Everything here is computed once per module (a dict lookup per argument at run time).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provision.engine.core_filters import to_bool

if TYPE_CHECKING:
    from provision.modules.base import ModuleResult, TaskContext

_SPECS_FILE = Path(__file__).with_name("ansible_specs.json")
# provision's module name -> the Ansible module whose arguments it takes
ANSIBLE_NAMES = {
    "facts": "ansible.builtin.setup",
    "yum": "ansible.builtin.dnf",  # ansible-core 2.19 redirects yum to dnf
    "mount": "ansible.posix.mount",
    "sysctl": "ansible.posix.sysctl",
    "authorized_key": "ansible.posix.authorized_key",
}
# collection module -> provision's native module of the same meaning (resolved at load)
NATIVE_ALIASES = {
    "ansible.posix.mount": "mount",
    "ansible.posix.sysctl": "sysctl",
    "ansible.posix.authorized_key": "authorized_key",
    "community.general.pam_limits": "pam_limits",
    "community.general.pamd": "pamd",
    "community.general.seport": "seport",
    "community.crypto.openssh_keypair": "openssh_keypair",
    "ansible.builtin.systemd_service": "systemd_service",
    "ansible.builtin.yum": "yum",
}


@dataclass(frozen=True)
class AnsibleSpec:
    """One Ansible module's arguments: canonical names, aliases, defaults."""

    fqcn: str
    options: dict[str, dict[str, Any]]
    names: dict[str, str]  # argument name or alias -> canonical name

    @property
    def short(self) -> str:
        return self.fqcn.rsplit(".", 1)[-1]

    def supported_text(self) -> str:
        """Ansible's list: the names sorted, then the aliases in parentheses."""
        aliases = sorted(k for k, v in self.names.items() if k != v)
        text = ", ".join(sorted(self.options))
        return f"{text} ({', '.join(aliases)})" if aliases else text

    def unsupported_message(self, keys: list[str]) -> str:
        return (
            f"Unsupported parameters for ({self.short}) module: {', '.join(sorted(keys))}. "
            f"Supported parameters include: {self.supported_text()}."
        )

    def is_default(self, name: str, value: Any) -> bool:
        """The value changes nothing: absent, Ansible's default, or a false/empty default."""
        if value is None:
            return True
        option = self.options.get(name, {})
        default = option.get("default")
        if option.get("type") == "bool":
            try:
                return to_bool(value) == bool(default)
            except Exception:
                return False
        if default is None:
            return value in ("", [], {})
        return value == default or str(value) == str(default)


class ArgError(ValueError):
    def __init__(self, message: str, key: str | None = None, at_key: bool = False) -> None:
        super().__init__(message)
        self.key = key
        self.at_key = at_key  # the name is wrong (point at it), not the value


class UnsupportedArgument(ArgError):
    """Ansible's module accepts these arguments; provision's implementation does not.

    The interface with the Ansible fallback (provision/engine/task_exec.py): when a fallback is
    registered (`set_ansible_fallback`), the task runs through it with its templated arguments
    as given; else the task fails with this message. `module` is provision's module name,
    `ansible_name` Ansible's FQCN, `arguments` the unsupported argument names, `position` the task's
    file:line:col (set by the engine)."""

    def __init__(self, module: str, ansible_name: str, args: list[str]) -> None:
        self.module = module
        self.ansible_name = ansible_name
        self.arguments = tuple(args)
        self.position = ""
        super().__init__(self.describe(), self.arguments[0], at_key=True)

    def describe(self) -> str:
        names = ", ".join(f"'{a}'" for a in self.arguments)
        plural = "s" if len(self.arguments) > 1 else ""
        at = f" (task at {self.position})" if self.position else ""
        return (
            f"{self.module}: argument{plural} {names}{at}: Ansible's {self.ansible_name} accepts "
            f"{'them' if plural else 'it'}, provision's {self.module} module does not implement "
            f"{'them' if plural else 'it'}. Remove {'them' if plural else 'it'} from the task, or "
            "install ansible-core on the controller (pip install ansible-core) so provision runs "
            "this task through Ansible's own module"
        )

    def at(self, position: str) -> UnsupportedArgument:
        self.position = position
        ArgError.__init__(self, self.describe(), self.arguments[0], at_key=True)
        return self


# The fallback: (context with the task's templated arguments, the exception) -> the result.
AnsibleFallback = Callable[["TaskContext", UnsupportedArgument], "ModuleResult"]
_fallback: AnsibleFallback | None = None


def set_ansible_fallback(hook: AnsibleFallback | None) -> None:
    """Register the function that runs a task through Ansible's own module (branch anstail)."""
    global _fallback
    _fallback = hook


def ansible_fallback() -> AnsibleFallback | None:
    return _fallback


_specs: dict[str, AnsibleSpec | None] = {}
_raw: dict[str, Any] | None = None
_lock = threading.Lock()


def _load() -> dict[str, Any]:
    global _raw
    if _raw is None:
        try:
            _raw = json.loads(_SPECS_FILE.read_text(encoding="utf-8")).get("modules", {})
        except (OSError, ValueError):
            _raw = {}
    return _raw


def ansible_module_names() -> list[str]:
    """Every Ansible module whose spec provision knows (FQCN)."""
    return sorted(_load())


def spec_for(fqcn: str) -> AnsibleSpec | None:
    """The spec of an Ansible module by FQCN (ansible.builtin.file), cached."""
    with _lock:
        if fqcn in _specs:
            return _specs[fqcn]
        entry = _load().get(fqcn)
        spec = None
        if entry is not None:
            options = entry.get("options", {})
            names = {name: name for name in options}
            for name, option in options.items():
                for alias in option.get("aliases", ()):
                    names.setdefault(alias, name)
            spec = AnsibleSpec(fqcn, options, names)
        _specs[fqcn] = spec
        return spec


def ansible_name(module_name: str) -> str:
    return ANSIBLE_NAMES.get(module_name, f"ansible.builtin.{module_name}")


def spec_for_module(module_name: str) -> AnsibleSpec | None:
    """The Ansible spec matching provision's module `module_name`, if Ansible has one.
    `package` takes its backends' arguments too (Ansible hands them on to apt/dnf)."""
    if module_name != "package":
        return spec_for(ansible_name(module_name))
    with _lock:
        if "package+" in _specs:
            return _specs["package+"]
    parts = [spec_for(f"ansible.builtin.{m}") for m in ("package", "apt", "dnf")]
    options: dict[str, dict[str, Any]] = {}
    names: dict[str, str] = {}
    for part in reversed([p for p in parts if p is not None]):
        options.update(part.options)
        names.update(part.names)
    merged = AnsibleSpec("ansible.builtin.package", options, names) if options else None
    with _lock:
        _specs["package+"] = merged
    return merged
