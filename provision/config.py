"""ansible.cfg and the matching ANSIBLE_* environment variables, read as Ansible reads them.

One file is used, the first that exists of: $ANSIBLE_CONFIG (a file, or a directory holding
ansible.cfg), ./ansible.cfg (skipped when the working directory is world-writable, as Ansible
does), ~/.ansible.cfg, /etc/ansible/ansible.cfg. An ANSIBLE_* variable beats the file. Paths in
the file are relative to the file's directory; paths in variables to the working directory.

Only the settings provision acts on are read: inventory, remote_user, private_key_file,
roles_path, forks, host_key_checking, allow_broken_conditionals and become / become_user /
become_method. Command-line options beat all of these.
"""

from __future__ import annotations

import configparser
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from provision.errors import ConfigError

_TRUE = {"y", "yes", "on", "1", "true", "t", "1.0"}
_FALSE = {"n", "no", "off", "0", "false", "f", "0.0", ""}

# setting -> (ini section, ini key, env var, kind)
_SETTINGS: dict[str, tuple[str, str, str, str]] = {
    "inventory": ("defaults", "inventory", "ANSIBLE_INVENTORY", "pathlist"),
    "remote_user": ("defaults", "remote_user", "ANSIBLE_REMOTE_USER", "str"),
    "private_key_file": ("defaults", "private_key_file", "ANSIBLE_PRIVATE_KEY_FILE", "path"),
    "roles_path": ("defaults", "roles_path", "ANSIBLE_ROLES_PATH", "pathspec"),
    "forks": ("defaults", "forks", "ANSIBLE_FORKS", "int"),
    "collections_path": ("defaults", "collections_path", "ANSIBLE_COLLECTIONS_PATH", "pathspec"),
    "private_role_vars": ("defaults", "private_role_vars", "ANSIBLE_PRIVATE_ROLE_VARS", "bool"),
    "host_key_checking": ("defaults", "host_key_checking", "ANSIBLE_HOST_KEY_CHECKING", "bool"),
    "allow_broken_conditionals": (
        "defaults",
        "allow_broken_conditionals",
        "ANSIBLE_ALLOW_BROKEN_CONDITIONALS",
        "bool",
    ),
    # no environment variable: Ansible reads this one from ansible.cfg only
    "ansible_managed": ("defaults", "ansible_managed", "", "str"),
    "become": ("privilege_escalation", "become", "ANSIBLE_BECOME", "bool"),
    "become_user": ("privilege_escalation", "become_user", "ANSIBLE_BECOME_USER", "str"),
    "become_method": ("privilege_escalation", "become_method", "ANSIBLE_BECOME_METHOD", "str"),
}


@dataclass
class AnsibleConfig:
    """The settings found; None (or empty) where neither the file nor the environment says."""

    file: str | None = None
    inventory: list[str] = field(default_factory=list)
    remote_user: str | None = None
    private_key_file: str | None = None
    roles_path: list[str] = field(default_factory=list)
    collections_path: list[str] = field(default_factory=list)
    private_role_vars: bool | None = None
    forks: int | None = None
    host_key_checking: bool | None = None
    # ansible-core 2.19: non-boolean conditionals take their truth instead of failing the task
    allow_broken_conditionals: bool | None = None
    ansible_managed: str | None = None  # the template module's `ansible_managed` text
    become: bool | None = None
    become_user: str | None = None
    become_method: str | None = None


def find_config_file(env: dict[str, str] | None = None, cwd: str | None = None) -> str | None:
    """The one ansible.cfg Ansible would read, or None."""
    env = os.environ if env is None else env
    cwd = os.getcwd() if cwd is None else cwd
    candidates: list[str] = []
    named = env.get("ANSIBLE_CONFIG")
    if named:
        named = os.path.expanduser(named)
        candidates.append(os.path.join(named, "ansible.cfg") if os.path.isdir(named) else named)
    try:
        world_writable = bool(os.stat(cwd).st_mode & stat.S_IWOTH)
    except OSError:
        world_writable = True
    if not world_writable:
        candidates.append(os.path.join(cwd, "ansible.cfg"))
    candidates += [os.path.expanduser("~/.ansible.cfg"), "/etc/ansible/ansible.cfg"]
    for path in candidates:
        if os.path.isfile(path):
            return path
    return None


def _convert(name: str, kind: str, raw: str, base: str, where: str) -> object:
    value = raw.strip()
    if kind == "str":
        return value or None
    if kind == "int":
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{where}: {name} must be a whole number, got {raw!r}") from None
    if kind == "bool":
        lowered = value.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ConfigError(f"{where}: {name} must be true or false, got {raw!r}")
    separator = os.pathsep if kind == "pathspec" else ","
    parts = [p.strip() for p in value.split(separator)] if kind != "path" else [value]
    paths = [os.path.normpath(os.path.join(base, os.path.expanduser(p))) for p in parts if p]
    return paths[0] if kind == "path" else paths


def load_config(env: dict[str, str] | None = None, cwd: str | None = None) -> AnsibleConfig:
    """The settings from the config file Ansible would pick, overridden by ANSIBLE_* vars."""
    env = os.environ if env is None else env
    cwd = os.getcwd() if cwd is None else cwd
    config = AnsibleConfig(file=find_config_file(env, cwd))
    parser = configparser.ConfigParser(
        inline_comment_prefixes=(";",), interpolation=None, strict=False
    )
    if config.file is not None:
        try:
            parser.read(config.file, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"{config.file}: cannot read this ansible.cfg ({exc}); fix it or point "
                "ANSIBLE_CONFIG at another file"
            ) from None
    file_dir = str(Path(config.file).resolve().parent) if config.file else cwd
    for name, (section, key, var, kind) in _SETTINGS.items():
        if env.get(var) is not None:
            value = _convert(name, kind, env[var], cwd, f"environment variable {var}")
        elif name == "collections_path" and env.get("ANSIBLE_COLLECTIONS_PATHS") is not None:
            value = _convert(name, kind, env["ANSIBLE_COLLECTIONS_PATHS"], cwd, "environment")
        elif name == "collections_path" and not parser.has_option(section, key):
            if not parser.has_option(section, "collections_paths"):  # the older spelling
                continue
            where = f"{config.file}: [{section}]"
            value = _convert(name, kind, parser.get(section, "collections_paths"), file_dir, where)
        elif parser.has_option(section, key):
            where = f"{config.file}: [{section}]"
            value = _convert(name, kind, parser.get(section, key), file_dir, where)
        else:
            continue
        if value is not None:
            setattr(config, name, value)
    if config.forks is not None and config.forks < 1:
        raise ConfigError(f"forks must be >= 1 (ansible.cfg or ANSIBLE_FORKS), got {config.forks}")
    return config
