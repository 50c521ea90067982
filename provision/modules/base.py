"""The one small module interface and the registry.

A module is a class with a `name`, an `args` schema (checked before anything runs) and
`run(ctx) -> ModuleResult`. It looks at the host first and changes only what differs
(check → change → result); in check mode it reports what it would change and runs nothing
that changes anything. Adding a module = one file in provision/modules/ with a `@register`ed
class; the registry imports every file of the package on first use.
"""

from __future__ import annotations

import difflib
import importlib
import logging
import pkgutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from provision.connection.base import CommandResult, Connection
from provision.engine.templating import contains_template
from provision.inventory.model import Host
from provision.modules.argspec import (  # noqa: F401  (re-exported: the fallback interface)
    NATIVE_ALIASES,
    ArgError,
    UnsupportedArgument,
    ansible_fallback,
    ansible_name,
    set_ansible_fallback,
    spec_for_module,
)
from provision.remote.agent import Agent
from provision.secrets import is_secret_name, url_passwords
from provision.shell import as_root as shell_as_root
from provision.shell import become_command, own_tools, path, quote, stdin_env

if TYPE_CHECKING:
    from provision.engine.templating import Templar

log = logging.getLogger("provision.modules")
ARG_TYPES = ("str", "bool", "int", "float", "list", "dict", "path", "raw", "mode")


@dataclass(frozen=True)
class Arg:
    """One module argument: its type, whether required, default, allowed values, aliases."""

    type: str = "str"
    required: bool = False
    default: Any = None
    choices: tuple[Any, ...] = ()
    aliases: tuple[str, ...] = ()
    elements: str | None = None  # element type of a list
    no_log: bool = False  # value never shown (passwords)


@dataclass
class ModuleResult:
    """What a module reports. `data` is registered with the result; `facts` become host vars."""

    changed: bool = False
    failed: bool = False
    skipped: bool = False
    msg: str = ""
    rc: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    diff: list[dict[str, str]] | None = (
        None  # [{"before", "after", "before_header", "after_header"}]
    )
    data: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The registered value, shaped like Ansible's (`result.rc`, `result.stdout_lines`, ...)."""
        out: dict[str, Any] = {"changed": self.changed, "failed": self.failed}
        if self.skipped:
            out["skipped"] = True
        if self.msg is not None and self.msg != "":  # `debug: msg: 0` shows 0 (Ansible)
            out["msg"] = self.msg
        if self.rc is not None:
            out["rc"] = self.rc
        if self.stdout is not None:
            out["stdout"] = self.stdout
            out["stdout_lines"] = self.stdout.splitlines()
        if self.stderr is not None:
            out["stderr"] = self.stderr
            out["stderr_lines"] = self.stderr.splitlines()
        if self.diff:
            out["diff"] = self.diff
        if self.facts:
            out["ansible_facts"] = self.facts
        out.update(self.data)
        return out


class ModuleFailure(Exception):
    """Raised inside a module for a clean failure: the task fails with this message."""

    def __init__(self, msg: str, **data: Any) -> None:
        super().__init__(msg)
        self.msg = msg
        self.data = data


@dataclass
class TaskContext:
    """Everything a module may use. Modules never know whether the connection is SSH or local."""

    host: Host
    connection: Connection
    args: dict[str, Any]
    check_mode: bool = False
    diff: bool = False
    vars: Mapping[str, Any] = field(default_factory=dict)  # the task's variables (lazy templates)
    facts: Mapping[str, Any] = field(
        default_factory=dict
    )  # agent facts (docs/facts.md); {} if not gathered
    become: bool = False
    become_user: str | None = None
    environment: dict[str, str] | None = None
    timeout: float | None = None
    task_name: str = ""
    search_paths: list[Path] = field(
        default_factory=list
    )  # role dir, playbook dir (templates/, files/)
    templar: Templar | None = None
    agent_factory: Callable[[], Agent] | None = None
    on_progress: Callable[[str], None] | None = (
        None  # one short line: shown on the host's status line
    )

    @property
    def agent(self) -> Agent:
        """The host's agent, created on first use and shared by the host's tasks."""
        if self.agent_factory is None:
            return Agent(self.connection)
        return self.agent_factory()

    def run(
        self,
        command: str,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run a shell command with the task's become and environment applied."""
        merged = dict(self.environment or {})
        if env:
            merged.update(env)
        timeout = timeout if timeout is not None else self.timeout
        if "PATH" in merged:  # the task's PATH is its commands', never provision's helpers'
            command = own_tools(command)
        # under become the values are read by the become'd shell, from stdin as the connection
        # sends them otherwise (connection.base.env_on_stdin): never in sudo's argv
        prefix, values = stdin_env(merged)
        if self.become and self.become_user and self.become_user != "root":
            wrapped = become_command(prefix + command, user=self.become_user)
            return self.connection.run(wrapped, stdin=(values + (stdin or b"")) or None, timeout=timeout)
        if self.become:
            # as root: the host's sudo probed once (provision/remote/become.py); a sudo password
            # goes first on stdin, never into the command line
            how = self.agent.becoming()
            as_root = getattr(self.connection, "as_root", None)  # --executor: its root executor
            root = as_root(how) if as_root is not None and how is not None else None
            if root is not None:
                return root.run(prefix + command, stdin=values + (stdin or b""), timeout=timeout)
            if how is not None and how.mode != "root":
                wrapped = how.wrap(prefix + command)
                data = how.stdin_prefix() + values + (stdin or b"")
                return self.connection.run(wrapped, stdin=data, timeout=timeout)
        return self.connection.run(
            command, env=merged or None, stdin=stdin, timeout=timeout, sudo=self.become
        )

    def find_file(self, name: str, kind: str) -> Path:
        """A controller file for `src`: absolute, else `<dir>/<kind>/name` then `<dir>/name` for
        each search dir (role first, then the playbook's)."""
        path = Path(name).expanduser()
        if path.is_absolute():
            if path.exists():
                return path
            raise ModuleFailure(f"{kind[:-1]} source {name} not found on the controller")
        tried = []
        for base in self.search_paths:
            for candidate in (base / kind / name, base / name):
                tried.append(str(candidate))
                if candidate.exists():
                    return candidate
        raise ModuleFailure(
            f"could not find {name!r} on the controller; looked in: {', '.join(tried) or '(nowhere)'}"
        )


class Module:
    """Subclass, set `name` and `args`, implement `run`, decorate with `@register`."""

    name: ClassVar[str] = ""
    args: ClassVar[dict[str, Arg]] = {}
    free_form: ClassVar[str | None] = None  # arg that receives `module: free form text`
    free_form_keys: ClassVar[tuple[str, ...]] = ()  # k=v words pulled out of free-form text
    supports_check_mode: ClassVar[bool] = True
    needs_connection: ClassVar[bool] = True  # False: runs on the controller only (debug, set_fact)
    any_args: ClassVar[bool] = False  # set_fact: any variable name is an argument
    # arguments it doesn't know go, in args["_forward"], to the module it hands the task to
    # (package -> apt/dnf, as Ansible's package does); that module checks them
    forwards_args: ClassVar[bool] = False
    shell_args: ClassVar[tuple[str, ...]] = ()  # rendered with Templar.render_shell (values = data)
    # controller paths: a host's value in them is one plain segment (engine/host_paths.py)
    path_args: ClassVar[tuple[str, ...]] = ()
    raw_args: ClassVar[tuple[str, ...]] = ()  # left unrendered: the module evaluates them (assert)
    # include_vars: the facts are the project's own vars file, templates as in Ansible; every
    # other module's facts and results are data (provision/taint.py)
    facts_are_templates: ClassVar[bool] = False
    # facts that name no secrets (package_facts: a package called libsecret-1-0 is not one)
    facts_hold_no_secrets: ClassVar[bool] = False
    mutually_exclusive: ClassVar[tuple[tuple[str, ...], ...]] = ()
    required_one_of: ClassVar[tuple[tuple[str, ...], ...]] = ()
    required_if: ClassVar[tuple[tuple[str, Any, tuple[str, ...]], ...]] = ()

    def check_args(self, args: dict[str, Any]) -> list[str]:
        """Extra checks beyond the schema (both before running and after templating)."""
        return []

    def run(self, ctx: TaskContext) -> ModuleResult:  # pragma: no cover - interface
        raise NotImplementedError


# -- registry ----------------------------------------------------------------------------------

MODULES: dict[str, type[Module]] = {}
LOAD_ERRORS: dict[str, str] = {}  # module file -> import error
_loaded = False
_load_lock = threading.Lock()
_PREFIXES = ("ansible.builtin.", "ansible.legacy.", "provision.")


def register(cls: type[Module]) -> type[Module]:
    if not cls.name:
        raise TypeError(f"{cls.__name__} has no name")
    for name, arg in cls.args.items():
        if arg.type not in ARG_TYPES:
            raise TypeError(f"{cls.__name__}.{name}: unknown arg type {arg.type!r}")
    MODULES[cls.name] = cls
    return cls


def _load_all() -> None:
    global _loaded
    with _load_lock:
        if _loaded:
            return
        import provision.modules as package  # the package itself, to list its module files once (registry loading)

        for info in pkgutil.iter_modules(package.__path__):
            if info.name != "base" and not info.name.startswith("_"):
                try:
                    importlib.import_module(f"provision.modules.{info.name}")
                except Exception as exc:  # one broken module file must not take the others down
                    LOAD_ERRORS[info.name] = f"{type(exc).__name__}: {exc}"
                    log.warning(
                        "module file provision/modules/%s.py failed to import: %s", info.name, exc
                    )
        _loaded = True


def canonical_name(name: str) -> str:
    """`ansible.builtin.copy` -> `copy`; `ansible.posix.mount` -> provision's native `mount`."""
    native = NATIVE_ALIASES.get(name)
    if native is not None:
        return native
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def get_module(name: str) -> type[Module] | None:
    _load_all()
    return MODULES.get(canonical_name(name))


def module_names() -> list[str]:
    _load_all()
    return sorted(MODULES)


def suggest(word: str, options: list[str] | tuple[str, ...] | set[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.7)
    return f" (did you mean '{close[0]}'?)" if close else ""


# -- argument checking -------------------------------------------------------------------------


def _has_template(value: Any) -> bool:
    return contains_template(value)


def _coerce(value: Any, arg: Arg, key: str) -> Any:
    kind = arg.type
    if value is None or kind == "raw":
        return value
    if kind in ("str", "path"):
        if isinstance(value, (dict, list)):
            kind_name = "dict" if isinstance(value, dict) else "list"
            raise ArgError(  # Ansible's words (module_utils check_type_str)
                f"argument '{key}' must be a string: a {kind_name} is not a string and "
                "conversion is not allowed",
                key,
            )
        if isinstance(value, bool):
            return "True" if value else "False"
        return value if isinstance(value, str) else str(value)  # keeps the data mark
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("yes", "true", "on", "1", "y", "t"):
            return True
        if text in ("no", "false", "off", "0", "n", "f", ""):
            return False
        raise ArgError(
            f"argument '{key}' must be a boolean (yes/no/true/false), got {value!r}", key
        )
    if kind in ("int", "float"):
        try:
            return int(value) if kind == "int" else float(value)
        except (TypeError, ValueError):
            raise ArgError(f"argument '{key}' must be a number, got {value!r}", key) from None
    if kind == "list":
        if isinstance(value, (list, tuple)):
            items = list(value)
        elif isinstance(value, str):
            items = [v.strip() for v in value.split(",") if v.strip()]
        else:
            items = [value]
        if arg.elements:
            items = [_coerce(v, Arg(type=arg.elements), key) for v in items]
        return items
    if kind == "dict":
        if isinstance(value, Mapping):
            return dict(value)
        raise ArgError(f"argument '{key}' must be a mapping, got {type(value).__name__}", key)
    if kind == "mode":
        if isinstance(value, bool):
            raise ArgError(f"argument '{key}' must be a file mode like '0644' or 'u+rwx'", key)
        if isinstance(value, int):  # YAML 0644 is already the right number (octal literal)
            return format(value, "o")
        text = str(value).strip()
        if text.isdigit():
            if any(c in "89" for c in text) or int(text, 8) > 0o7777:
                raise ArgError(f"argument '{key}': {text!r} is not an octal file mode", key)
            return format(int(text, 8), "o")
        if not all(c in "ugoarwxXst+-=,0123456789" for c in text):
            raise ArgError(
                f"argument '{key}': {text!r} is not a file mode (use '0644' or 'u+rwx,g-w')", key
            )
        return text
    raise ArgError(f"argument '{key}': unknown type {kind}", key)  # pragma: no cover


def _aliases(module: Module) -> dict[str, str]:
    """Argument name or alias -> name, computed once per module class."""
    cls = type(module)
    table = _ALIASES.get(cls)
    if table is None:
        table = {name: name for name in module.args}
        for name, arg in module.args.items():
            for alias in arg.aliases:
                table.setdefault(alias, name)
        _ALIASES[cls] = table
    return table


_ALIASES: dict[type, dict[str, str]] = {}


def normalize_args(
    module: Module, args: Mapping[str, Any], *, static: bool = False
) -> dict[str, Any]:
    """Check and coerce `args` against the module's schema. `static=True` (before templating)
    skips checks on values that are still templates. Raises ArgError naming the argument, with
    Ansible's text for an argument Ansible's module doesn't take either, and
    UnsupportedArgument for one Ansible's module takes but provision's doesn't implement."""
    spec = module.args
    names = _aliases(module)
    out: dict[str, Any] = {}
    unknown: list[str] = []
    ansible_only: list[str] = []
    for key, value in args.items():
        if not isinstance(key, str):
            raise ArgError(f"argument names must be strings, got {key!r}")
        if key.startswith("_"):  # internal (e.g. _raw free form)
            out[key] = value
            continue
        name = names.get(key)
        if name is None:
            if module.any_args:
                out[key] = value
                continue
            if module.forwards_args:
                out.setdefault("_forward", {})[key] = value
                continue
            aspec = spec_for_module(module.name)
            if aspec is None:
                known = sorted(names)
                raise ArgError(
                    f"module '{module.name}' has no argument '{key}'{suggest(key, known)}; "
                    f"its arguments: {', '.join(sorted(spec)) or '(none)'}",
                    key,
                    at_key=True,
                )
            aname = aspec.names.get(key)
            if aname is None:
                unknown.append(key)
            elif static and _has_template(value):
                continue
            elif not aspec.is_default(aname, value):
                ansible_only.append(key)
            continue
        if name in out:
            raise ArgError(f"argument '{name}' given twice (as '{key}' and an alias)", key)
        arg = spec[name]
        if static and _has_template(value):
            out[name] = value
            continue
        value = _coerce(value, arg, key)
        if arg.choices and value is not None and value not in arg.choices:
            raise ArgError(
                f"argument '{key}' must be one of {', '.join(map(str, arg.choices))}, got {value!r}",
                key,
            )
        out[name] = value
    if unknown:
        aspec = spec_for_module(module.name)
        assert aspec is not None
        raise ArgError(aspec.unsupported_message(unknown), unknown[0], at_key=True)
    if ansible_only:
        raise UnsupportedArgument(module.name, ansible_name(module.name), ansible_only)
    for group in module.mutually_exclusive:
        # a template may render to `omit`: only the rendered values can conflict
        given = [
            k for k in group if out.get(k) is not None and not (static and _has_template(out[k]))
        ]
        if len(given) > 1:
            raise ArgError(f"arguments {' and '.join(given)} are mutually exclusive", given[1])
    for name, arg in spec.items():
        if name not in out:
            if arg.required:
                raise ArgError(f"module '{module.name}' requires argument '{name}'")
            out[name] = arg.default
    for group in module.required_one_of:
        if not any(out.get(k) is not None for k in group):
            raise ArgError(  # Ansible's words (module_utils check_required_one_of)
                f"module '{module.name}': one of the following is required: {', '.join(group)}"
            )
    for key, value, needed in module.required_if:
        if out.get(key) == value and not (static and _has_template(out.get(key))):
            missing = [n for n in needed if out.get(n) is None]
            if missing:
                raise ArgError(f"{key}={value} requires argument(s): {', '.join(missing)}", key)
    if not static or not any(_has_template(v) for v in out.values()):
        for message in module.check_args(out):
            raise ArgError(message)
    return out


def secret_arg_values(module: Module, args: Mapping[str, Any]) -> list[str]:
    """Values of arguments declared `no_log` or named like a secret (provision.secrets), and
    URL passwords in any argument: the runner masks them in results, display and JSON."""
    found: list[str] = []

    def walk(value: Any, secret: bool) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, secret or (isinstance(key, str) and is_secret_name(key)))
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item, secret)
        elif value is not None and not isinstance(value, bool):
            text = str(value)
            if secret:
                found.append(text)
            found.extend(url_passwords(text))

    for name, value in args.items():
        arg = module.args.get(name)
        walk(value, bool(arg and arg.no_log) or is_secret_name(name))
    return found


# -- shell helpers modules share ---------------------------------------------------------------


def q(value: Any) -> str:
    """Quote any value for the shell: data, never code (provision.shell.quote)."""
    return quote(str(value) if not isinstance(value, (str, bytes)) else value)


def qpath(value: str) -> str:
    """Quote a host path; a leading `~` stays the remote user's home."""
    return str(path(str(value)))


def as_root(command: str) -> str:
    return str(shell_as_root(command))


def unified_diff(before: str, after: str, path: str) -> list[dict[str, str]]:
    return [{"before": before, "after": after, "before_header": path, "after_header": path}]
