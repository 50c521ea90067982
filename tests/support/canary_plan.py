"""A playbook that puts a canary secret into every module argument and task keyword that carries
a value, generated from the module registry (provision.modules.base.MODULES) and each module's
declared `args` — so a module added to the registry is covered without anyone editing this.

Every declared argument falls in exactly one class:

- fixed: bool / int / float / mode, or with `choices` — it can't hold free text;
- named: its value names something the host's own tools act on (a path, a package, a user, the
  program a task runs…): it is in those tools' argv by nature, as with Ansible. `NAMED` says
  why, per argument name (shared by every module that uses the name);
- canary: everything else. It gets a value holding a canary (a URL's password for URL-like
  arguments, a header / env value for mappings, a template variable for a module's shell
  arguments, plain text otherwise), which must never appear in any process's command line.
  Where the project's own rule calls the value secret (`secret_arg_values`: `no_log`,
  secret-like names, URL passwords), it must not appear in output, logs or files either.

A module that can't be run here is in `NOT_RUN` with why; an argument the generator can't give a
valid value is in `NO_VALUE` with why. `plan()` validates every generated task against the
module's schema (`normalize_args`), so an invalid value fails the plan, not silently the run.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from provision.modules.base import (
    Arg,
    ArgError,
    get_module,
    module_names,
    normalize_args,
    secret_arg_values,
)

FIXED_TYPES = frozenset({"bool", "int", "float", "mode"})
_PATH = "a path (host or controller): in the argv of the tools that act on it"
_NAME = "names a thing on the host (package, user, group, service, key…): the tool's own argv"
_CODE = "code the user wrote (a command, an expression): it is the process's argv by definition"
_SELECT = "selects or shapes text (pattern, regexp, marker, encoding…): no credential"

NAMED: dict[str, str] = {
    **dict.fromkeys(
        ("dest", "src", "path", "paths", "chdir", "creates", "removes", "cron_file", "file",
         "filename", "home", "dir", "workdir", "out", "virtualenv", "executable", "python",
         "keyring", "sysctl_file", "inrelease_path", "fstab", "data_dir", "mount_binary",
         "key_file", "virtualenv_command", "virtualenv_python", "requirements", "signed_by",
         "shell", "conda"), _PATH),  # fmt: skip
    **dict.fromkeys(
        ("name", "user", "group", "owner", "groups", "remote", "version", "state", "use",
         "runlevel", "packages", "torch", "variant", "codename", "components", "suites", "types",
         "architectures", "languages", "targets", "id", "enablerepo", "disablerepo", "exclude",
         "fstype", "fstypes", "devices", "sources", "opts", "dump", "passno", "iface", "master",
         "host", "labels", "run_id", "trusted_hosts", "gather_subset", "filter", "method",
         "var", "parents", "datasets", "sections", "with", "locked", "status_code", "umask",
         "nproc_per_node", "arguments", "include", "extra_opts", "refspec", "age", "size",
         "access_time", "modification_time", "seconds", "minutes", "comment"), _NAME),  # fmt: skip
    **dict.fromkeys(("argv", "command", "that", "pattern", "stop_when_idle"), _CODE),
    "checksum": "a digest of public content (sha256:HEX)",
    **dict.fromkeys(
        ("regexp", "patterns", "excludes", "contains", "search_string", "search_regex", "marker",
         "marker_begin", "marker_end", "encoding", "insertafter", "insertbefore", "after", "before",
         "replace"), _SELECT),  # fmt: skip
}

# one module's use of a name that is free text elsewhere
NAMED_IN: dict[tuple[str, str], str] = {
    ("command", "cmd"): _CODE + " (`command` execs its words: a template value is an argv word)",
    ("script", "cmd"): "the controller script's path and its arguments: the script's own argv",
    **{(m, "env"): "the managed Python environment's folder: its interpreter's path is the argv"
       for m in ("compat_check", "bench", "install_torch")},
    **{("getent", n): "a database, a key in it, an NSS service: what `getent` looks up, its own argv"
       " (Ansible's getent too)" for n in ("database", "key", "service")},
    ("user", "ssh_key_file"): _PATH,
    **{("user", n): "ssh-keygen's -t / -C words (Ansible's user too); the passphrase goes on stdin"
       for n in ("ssh_key_type", "ssh_key_comment")},
    ("pip", "extra_args"): "pip's own options, as words of pip's argv (Ansible's too); index credentials"
    " go in index_url / extra_index_url, which travel on stdin",
}

# modules this machine can't run for real: with why
NOT_RUN: dict[str, str] = {
    **dict.fromkeys(
        ("apt", "dnf", "yum", "package", "apt_key", "apt_repository", "deb822_repository"),
        "a package manager: the fleet hosts share this machine's /usr and /var, a run would change"
        " the machine itself (apt lists, dpkg's lock); their values are names in apt-get's argv,"
        " repository files go over stdin (tests/fleet/test_modules_builtin.py)"),  # fmt: skip
    "pause": "waits for the user at the terminal (prompt): nothing runs on a host",
    "bench": "minutes of benchmarks; its index_url is scanned by test_attacks_ssh (reports/history)",
    "install_torch": "installs torch (GBs); its index and proxy are scanned in test_attacks_ssh and test_install",
    "stage_dataset": "needs a dataset source; its stream is the agent's stdin (tests/fleet/test_stage.py)",
    "train": "starts a detached run; its env goes in a 0600 file (tests/unit/test_train_host.py)",
    "include_vars": "reads a vars file on the controller: values are the project's own data",
}

# (module, argument) the generator can't give a valid value: with why
NO_VALUE: dict[tuple[str, str], str] = {
    ("package_facts", "manager"): "names package managers from a fixed set (auto, apt, rpm, apk and"
    " their aliases), refused otherwise: no free text",
}

# values for named arguments (and a base for modules whose required args need a real thing)
WORK = "/tmp/pv-canary"
ANY_ARG = "pv_canary_var"


def named_value(module: str, name: str, arg: Arg, files: dict[str, str]) -> Any:
    if arg.choices:  # a required choice (pam_limits' limit_type): the first one Ansible allows
        return arg.choices[0]
    if (module, name) in (("fetch", "dest"), ("report", "out")):  # written on the controller
        return f"{files['controller']}/{module}-{name}"
    if name in ("dest", "path", "paths", "cron_file", "sysctl_file", "fstab", "out", "dir"):
        value = f"{WORK}/{module}-{name}"
        return [value] if arg.type == "list" else value
    if name == "src":
        if module == "copy":
            return files["file"]
        if module == "unarchive":
            return files.get("archive", files["file"])
        if module == "template":
            return files["template"]
        return f"{WORK}/{module}-src"
    if name == "name" and module in ("user", "group"):
        return "pvcanary"
    if name == "regexp":
        return "^pvcanary-never$"
    if name == "state" and module == "mount":
        return "unmounted"
    if name == "state" and module == "service":
        return "started"
    if name == "that":
        return ["1 == 1"]
    if name in ("cmd", "argv"):
        return "true" if arg.type != "list" else ["true"]
    if name == "name" and module == "sysctl":
        return "pvcanary.none"
    if arg.type == "path":
        return f"{WORK}/{module}-{name}"
    if arg.type == "list":
        return ["pvcanary"]
    if arg.type == "dict":
        return {}
    return "pvcanary"


@dataclass
class Task:
    module: str
    args: dict[str, Any]
    canaries: dict[str, str]  # canary -> "module.arg" (or the keyword)
    secret: set[str] = field(default_factory=set)  # the canaries the project calls secret
    vars: dict[str, str] = field(default_factory=dict)


@dataclass
class Plan:
    tasks: list[Task]
    classes: dict[tuple[str, str], str]  # (module, arg) -> fixed | named | canary | not-run
    problems: list[str]

    @property
    def canaries(self) -> dict[str, str]:
        return {c: where for t in self.tasks for c, where in t.canaries.items()}

    @property
    def secret(self) -> set[str]:
        return {c for t in self.tasks for c in t.secret}


def _canary(tag: str) -> str:
    return "cnry" + tag.replace("_", "") + secrets.token_hex(6)


def _url_like(name: str) -> bool:
    """A URL argument (its canary is the URL's password): `url`, `*_url(s)`, `uris`, `repo`…"""
    if name.endswith(("_username", "_password")):
        return False
    return name.endswith(("url", "urls", "uri", "uris")) or name in ("repo", "proxy", "mirror", "find_links", "keyserver")


def canary_value(
    module: str, name: str, arg: Arg, canary: str, shell: bool, server: str = "http://127.0.0.1:9"
) -> tuple[Any, dict[str, str]]:
    """A value for `name` holding `canary`, and the task vars it needs."""
    if shell:  # a module's shell argument: the value comes from a variable, as a secret would
        var = "pv_" + canary
        return f"true {{{{ {var} }}}}", {var: canary}
    if arg.no_log and name == "password" and module == "user":  # a crypt hash, as the module demands
        return "$6$pvsalt$" + canary + "x" * max(0, 86 - len(canary)), {}
    if _url_like(name):
        url = server.replace("://", f"://pvscan:{canary}@", 1) + "/simple"
        return ([url] if arg.type == "list" else url), {}
    if arg.type == "dict":
        return {"X-Pv-Token": canary}, {}
    if arg.type == "list":
        return [canary], {}
    return canary, {}


def classify(module: str, name: str, arg: Arg) -> str:
    if module in NOT_RUN:
        return "not-run"
    if arg.type in FIXED_TYPES or arg.choices:
        return "fixed"
    if name in NAMED or (module, name) in NAMED_IN:
        return "named"
    if (module, name) in NO_VALUE:
        return "no-value"
    return "canary"


def plan(files: dict[str, str]) -> Plan:
    tasks: list[Task] = []
    classes: dict[tuple[str, str], str] = {}
    problems: list[str] = []
    for module_name in module_names():
        cls = get_module(module_name)
        assert cls is not None
        module = cls()
        for name, arg in cls.args.items():
            classes[(module_name, name)] = classify(module_name, name, arg)
        if module_name in NOT_RUN:
            continue
        canaried = [n for n, a in cls.args.items() if classes[(module_name, n)] == "canary"]
        if cls.any_args:  # set_fact, add_host: any name is an argument (a variable)
            canaried.append(ANY_ARG)
        # as few tasks as the module's mutually exclusive groups allow
        groups: list[list[str]] = []
        for n in canaried:
            for g in groups:
                if not any(n in ex and other in ex for ex in cls.mutually_exclusive for other in g):
                    g.append(n)
                    break
            else:
                groups.append([n])
        for group in groups or [[]]:
            task = _task(module_name, cls, group, files)
            try:
                normalize_args(module, {k: v for k, v in task.args.items()}, static=True)
            except ArgError as exc:
                problems.append(f"{module_name} {sorted(task.args)}: {exc}")
                continue
            tasks.append(task)
    return Plan(tasks, classes, problems)


def _task(module_name: str, cls: Any, group: list[str], files: dict[str, str]) -> Task:
    args: dict[str, Any] = {}
    canaries: dict[str, str] = {}
    task_vars: dict[str, str] = {}
    plain: dict[str, Any] = {}
    for name in group:
        arg = cls.args.get(name, Arg("str"))
        canary = _canary(f"{module_name}{name}")
        value, more = canary_value(module_name, name, arg, canary, name in cls.shell_args,
                                   files.get("server", "http://127.0.0.1:9"))
        args[name] = value
        plain[name] = canary if name in cls.shell_args else value
        canaries[canary] = f"{module_name}.{name}"
        task_vars.update(more)
    excluded = {o for n in group for ex in cls.mutually_exclusive if n in ex for o in ex if o != n}
    if cls.name == "add_host":
        args["name"] = "pvcanary-host"
    for name, arg in cls.args.items():
        if name in args or name in excluded or not (arg.required or _needed(cls, name, args)):
            continue
        value = named_value(module_name, name, arg, files)
        if value is not None:
            args[name] = value
    module = cls()
    secret = {c for c in canaries if any(c in v for v in secret_arg_values(module, plain))}
    return Task(module_name, args, canaries, secret, task_vars)


def _needed(cls: Any, name: str, args: dict[str, Any]) -> bool:
    """One of a required_one_of group, when none is set yet; the module's base where it has one."""
    if cls.name == "add_host" and name == "name":
        return True
    for group in cls.required_one_of:
        if name == group[0] and not any(k in args for k in group):
            return True
    if cls.name.startswith("systemd") and name == "name":
        return True
    return (cls.name, name) in {("service", "state"), ("mount", "state"), ("replace", "regexp"),
                                ("git", "dest")}


# -- task keywords ------------------------------------------------------------------------------

# the task keywords that carry a value to the host: each gets a canary (`keyword_tasks`)
KEYWORD_CANARY = ("environment", "vars", "args", "loop", "with_items", "with_list", "with_dict")
_FLAG = "a flag or a number: no free text"
KEYWORD_NAMED: dict[str, str] = {
    "name": "the task's title: shown in the output by design",
    **dict.fromkeys(("when", "changed_when", "failed_when", "until"), "an expression the user wrote: code, evaluated on the controller"),
    **dict.fromkeys(("register", "notify", "listen", "tags", "collections", "loop_control"), "names of variables, handlers, tags"),
    **dict.fromkeys(("become_user", "become_method", "delegate_to"), "a user, a method, a host: named in the commands by nature"),
    "local_action": "a task of its own (its module's arguments are covered as that module's)",
    **dict.fromkeys(("become", "ignore_errors", "ignore_unreachable", "retries", "delay", "run_once",
                     "no_log", "check_mode", "diff", "timeout", "async", "poll", "any_errors_fatal",
                     "debugger", "throttle"), _FLAG),  # fmt: skip
}


def keyword_tasks() -> tuple[list[dict[str, Any]], dict[str, str], set[str]]:
    """Tasks (as YAML-ready dicts) that carry a canary through each value keyword; the canaries
    (-> where) and those the project calls secret (an environment value, a `*_token` var)."""
    c = {k: _canary(k) for k in KEYWORD_CANARY}
    probe = 'sleep 1; test -n "$PV_SCAN_TOKEN"'
    tasks = [
        {"name": "keyword environment", "shell": probe, "environment": {"PV_SCAN_TOKEN": c["environment"]}},
        {"name": "keyword vars", "shell": "true {{ pv_kw_var_token }}", "vars": {"pv_kw_var_token": c["vars"]}},
        {"name": "keyword args", "shell": {"cmd": "true {{ pv_kw_args_token }}"}, "vars": {"pv_kw_args_token": c["args"]}},
        {"name": "keyword loop", "shell": "true {{ item }}", "loop": [c["loop"]]},
        {"name": "keyword with_items", "shell": "true {{ item }}", "with_items": [c["with_items"]]},
        {"name": "keyword with_list", "shell": "true {{ item }}", "with_list": [c["with_list"]]},
        {"name": "keyword with_dict", "shell": "true {{ item.value }}", "with_dict": {"k": c["with_dict"]}},
    ]
    # a loop item is shown in the output by design (Ansible's `item=`): argv only for those
    secret = {c[k] for k in ("environment", "vars", "args")}
    return tasks, {v: f"keyword {k}" for k, v in c.items()}, secret
