"""Packages: `apt` (system), `pip` and `venv` (Python).

apt: one shell script asks dpkg what is installed, updates the package lists only when needed
(asked for and older than `cache_valid_time`, or a wanted package has no candidate), installs
non-interactively and reports what changed — or, in check mode, what would.

pip: one round trip. The host's Python (pip needs one anyway) reads the request on stdin, checks
each requirement against the installed distributions (importlib.metadata + packaging, the copy
vendored in pip when needed) and runs pip only for what is missing. Index URLs, which may carry
credentials, travel on stdin, never in argv.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from provision.modules.base import (
    Arg,
    Module,
    ModuleFailure,
    ModuleResult,
    TaskContext,
    register,
)
from provision.modules.files import parse_report
from provision.shell import Raw, argv, path, sh

_APT_NAME = re.compile(r"^[a-z0-9][a-z0-9+.\-]*(:[a-z0-9]+)?([=][A-Za-z0-9.+~:\-]+)?$")

# dpkg asks, apt-get changes; every value below is one quoted word (provision.shell.sh)
_APT_SCRIPT = r"""
export DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a
if ! command -v apt-get >/dev/null 2>&1; then echo "@@error apt-get not found: this host does not use apt"; exit 1; fi
if [ "$(id -u)" != 0 ]; then echo "@@error apt needs root: connect as root or set become: yes (passwordless sudo)"; exit 1; fi
state={state}; check={check}
want_update={want_update}; valid={valid}
# the lists' age by Ansible's rule: the last successful update's stamp, else the lists folder
stamp=/var/lib/apt/periodic/update-success-stamp; lists=/var/lib/apt/lists; mt=0
if [ -e $stamp ]; then mt=$(stat -c %Y $stamp); elif [ -e $lists ]; then mt=$(stat -c %Y $lists); fi
age=$(( $(date +%s) - mt ))
pv_mtime() { if [ -e $stamp ]; then stat -c %Y $stamp; elif [ -e $lists ]; then stat -c %Y $lists; else echo 0; fi; }
# Ansible's `cache_updated`: the lists' time moved (an update that fetched nothing is no change)
pv_update() {
  [ $check = 1 ] && { echo "@@updated 1"; return 0; }
  o=$(mktemp) || exit 1
  apt-get update -q -o {lock_timeout} >"$o" 2>&1 || { echo "@@error apt-get update failed: $(tail -3 "$o" | tr '\n' ' ')"; rm -f "$o"; exit 1; }
  rm -f "$o"
  [ "$(pv_mtime)" != "$mt" ] && echo "@@updated 1"
  return 0
}
if [ $want_update = 1 ] && { [ $valid = 0 ] || [ $age -gt $valid ]; }; then pv_update; updated=1; else updated=0; fi
todo=""; marks=""
for spec in {names}; do
  name=${spec%%=*}; ver=""; [ "$name" != "$spec" ] && ver=${spec#*=}
  marks="$marks $name"
  cur=$(dpkg-query -W -f='${Status}|${Version}' "$name" 2>/dev/null)
  case "$cur" in *"install ok installed"*) have=${cur#*|} ;; *) have="" ;; esac
  case $state in
    present) if [ -z "$have" ] || { [ -n "$ver" ] && [ "$have" != "$ver" ]; }; then todo="$todo $spec"; fi ;;
    absent) if [ -n "$have" ] || dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q config-files; then todo="$todo $name"; fi ;;
    latest)
      if [ -z "$have" ]; then todo="$todo $name"; else
        cand=$(apt-cache policy "$name" 2>/dev/null | sed -n 's/^ *Candidate: //p')
        [ -n "$cand" ] && [ "$cand" != "(none)" ] && [ "$cand" != "$have" ] && todo="$todo $name"
      fi ;;
  esac
done
if [ -n "$todo" ] && [ $state != absent ] && [ $updated = 0 ]; then
  # install what is missing; refresh the lists first only if some package has no candidate
  for spec in $todo; do
    cand=$(apt-cache policy "${spec%%=*}" 2>/dev/null | sed -n 's/^ *Candidate: //p')
    if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then pv_update; updated=1; break; fi
  done
fi
# as Ansible: every package asked for (installed now or before) is marked manually installed
pv_mark() {
  [ $check = 1 ] || [ $state = absent ] || [ -z "$marks" ] && return 0
  command -v apt-mark >/dev/null 2>&1 || return 0
  apt-mark manual $marks >/dev/null 2>&1 || { echo "@@error apt-mark manual$marks failed"; exit 1; }
}
[ -z "$todo" ] && { pv_mark; exit 0; }
echo "@@changed$todo"
[ $check = 1 ] && exit 0
if [ $state = absent ]; then apt-get {apt_opts} {remove} $todo; else apt-get {apt_opts} install $todo || exit $?; pv_mark; fi
"""


@register
class Apt(Module):
    name = "apt"
    args = {
        "name": Arg("list", aliases=("pkg", "package"), elements="str"),
        "state": Arg(
            "str",
            default="present",
            choices=("present", "absent", "latest", "installed", "removed"),
        ),
        "update_cache": Arg("bool", default=False, aliases=("update-cache",)),
        "cache_valid_time": Arg("int", default=0),
        "install_recommends": Arg("bool", aliases=("install-recommends",)),
        "purge": Arg("bool", default=False),
        "lock_timeout": Arg("int", default=120),
    }

    def check_args(self, args: dict[str, Any]) -> list[str]:
        # `name: []` (a role's empty package list) is nothing to do (ok), as in Ansible
        if args.get("name") is None and not args.get("update_cache") and not args.get("cache_valid_time"):
            return ["apt needs name (packages) or update_cache: yes"]
        bad = [n for n in args.get("name") or [] if not _APT_NAME.match(str(n))]
        return [f"{n!r} is not a Debian package name (name or name=version)" for n in bad]

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        state = {"installed": "present", "removed": "absent"}.get(args["state"], args["state"])
        names = [str(n) for n in args.get("name") or []]
        check = 1 if ctx.check_mode else 0
        apt_opts = ["-y", "-q", "-o", f"DPkg::Lock::Timeout={int(args['lock_timeout'])}",
                    "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]
        if args.get("install_recommends") is not None:
            flag = "true" if args["install_recommends"] else "false"
            apt_opts += ["-o", f"APT::Install-Recommends={flag}"]
        script = sh(
            _APT_SCRIPT,
            state=state,
            check=str(check),
            # Ansible: an explicit cache_valid_time implies update_cache
            want_update="1" if args["update_cache"] or args["cache_valid_time"] else "0",
            valid=str(int(args["cache_valid_time"])),
            lock_timeout=f"DPkg::Lock::Timeout={int(args['lock_timeout'])}",
            names=names,
            apt_opts=apt_opts,
            remove="purge" if args["purge"] else "remove",
        )
        result = ctx.run(script)
        report = parse_report(result.stdout)
        if report.errors:
            raise ModuleFailure("; ".join(report.errors))
        if not result.ok:
            tail = "\n".join((result.stderr.strip() or result.stdout.strip()).splitlines()[-8:])
            raise ModuleFailure(
                f"apt-get failed (exit {result.exit_code}): {tail}",
                stdout=result.stdout,
                stderr=result.stderr,
            )
        packages = report.changed[0].split() if report.changed else []
        data: dict[str, Any] = {"cache_updated": "updated" in report.values, "packages": packages}
        if packages:
            verb = {"absent": "removed", "latest": "upgraded"}.get(state, "installed")
            msg = f"{'would be ' if ctx.check_mode else ''}{verb}: {' '.join(packages)}"
        else:
            msg = (
                "cache updated"
                if "updated" in report.values
                else "all packages already in the wanted state"
            )
        # Ansible's rule: a task that only refreshes the lists is changed when it refreshed them
        # (in check mode: would); with packages, only the packages count
        changed = bool(packages) or (not names and data["cache_updated"])
        return ModuleResult(
            changed=changed, msg=msg, stdout=result.stdout if packages else None, data=data
        )


# Runs on the host's Python (3.8+); request on stdin. Prints one JSON line.
_PIP_SCRIPT = r"""
import json, os, subprocess, sys
req = json.loads(sys.stdin.readline())
try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:
    try:
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.utils import canonicalize_name
    except ImportError:
        print(json.dumps({"error": "pip is not installed for " + sys.executable + " (install python3-pip or use a venv)"}))
        sys.exit(0)
try:
    from importlib import metadata
except ImportError:
    import importlib_metadata as metadata
def installed(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
state = req["state"]
todo, have = [], {}
for spec in req["names"]:
    try:
        r = Requirement(spec)
    except Exception:
        todo.append(spec)  # URL, path, VCS: pip decides
        continue
    v = installed(r.name)
    have[canonicalize_name(r.name)] = v
    if state == "absent":
        if v is not None:
            todo.append(r.name)
    elif state in ("latest", "forcereinstall") or r.url:
        todo.append(spec)
    elif v is None or (r.specifier and not r.specifier.contains(v, prereleases=True)):
        todo.append(spec)
out = {"todo": todo, "have": have, "python": sys.executable}
cmd = None
pip_env = {}
if state == "absent" and todo:
    cmd = [sys.executable, "-m", "pip", "uninstall", "-y"] + todo
elif req["requirements"] or todo:
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    if state == "latest": cmd.append("-U")
    if state == "forcereinstall": cmd.append("--force-reinstall")
    # index URLs may carry credentials: pip reads them from its environment, not argv (ps)
    if req["index_url"]: pip_env["PIP_INDEX_URL"] = req["index_url"]
    if req["extra_index_url"]: pip_env["PIP_EXTRA_INDEX_URL"] = " ".join(req["extra_index_url"])
    if req["find_links"]: pip_env["PIP_FIND_LINKS"] = " ".join(req["find_links"])
    if req["break_system_packages"]: cmd.append("--break-system-packages")
    cmd += req["extra_args"]
    if req["requirements"]: cmd += ["-r", req["requirements"]]
    if req["editable"]: cmd = cmd + ["-e"] + todo
    else: cmd = cmd + todo
if cmd is None:
    print(json.dumps(out)); sys.exit(0)
if req["check"]:
    if state == "absent" or (state != "latest" and not req["requirements"]):
        out["would_run"] = bool(todo)
        print(json.dumps(out)); sys.exit(0)
    cmd.insert(cmd.index("install") + 1, "--dry-run")  # latest / requirements: ask pip
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=req["chdir"] or None, env=dict(os.environ, **pip_env))
err = p.stderr.decode("utf-8", "replace")
if req["check"] and p.returncode != 0 and "no such option" in err:
    out["would_run"] = True  # pip older than 22.2 has no --dry-run: assume it would change
    print(json.dumps(out)); sys.exit(0)
out.update(rc=p.returncode, stdout=p.stdout.decode("utf-8", "replace")[-20000:], stderr=err[-20000:])
print(json.dumps(out))
"""


@register
class Pip(Module):
    name = "pip"
    args = {
        "name": Arg("list", elements="str"),
        "version": Arg("str"),
        "requirements": Arg("path"),
        "state": Arg(
            "str", default="present", choices=("present", "absent", "latest", "forcereinstall")
        ),
        "virtualenv": Arg("path"),
        "virtualenv_command": Arg("str"),
        "virtualenv_python": Arg("str"),
        "virtualenv_site_packages": Arg("bool", default=False),
        "executable": Arg("path"),
        "python": Arg("str", aliases=("interpreter",)),
        "extra_args": Arg("str"),
        "index_url": Arg("str"),
        "extra_index_url": Arg("list", elements="str"),
        "find_links": Arg("list", elements="str"),
        "editable": Arg("bool", default=False),
        "chdir": Arg("path"),
        "break_system_packages": Arg("bool", default=False),
    }
    required_one_of = (("name", "requirements"),)
    mutually_exclusive = (("virtualenv", "executable", "python"),)

    def check_args(self, args: dict[str, Any]) -> list[str]:
        if args.get("version") and len(args.get("name") or []) != 1:
            return ["version needs exactly one name"]
        return []

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        names = [str(n) for n in args.get("name") or []]
        if args.get("version"):
            names = [f"{names[0]}=={args['version']}"]
        request = {
            "state": args["state"],
            "names": names,
            "requirements": args.get("requirements"),
            "index_url": args.get("index_url"),
            "extra_index_url": args.get("extra_index_url") or [],
            "find_links": args.get("find_links") or [],
            "extra_args": shlex.split(args.get("extra_args") or ""),
            "editable": args["editable"],
            "break_system_packages": args["break_system_packages"],
            "chdir": args.get("chdir"),
            "check": ctx.check_mode,
        }
        venv = args.get("virtualenv")
        # the interpreter is a value: it lives in "$py" and is only ever expanded
        if venv:
            if args.get("virtualenv_command"):  # a command line, split into words (no shell)
                make = argv(shlex.split(args["virtualenv_command"]))
            else:
                make = sh("{py} -m venv", py=args.get("virtualenv_python") or "python3")
                if args["virtualenv_site_packages"]:
                    make = Raw(make + " --system-site-packages")
            create = (
                Raw('echo "@@new 1"; exit 0; ')
                if ctx.check_mode
                else sh(
                    'o=$(mktemp) || exit 1; {make} "$v" >/dev/null 2>"$o" || { echo "@@error creating venv $v failed: '
                    "$(tail -2 \"$o\" | tr '\\n' ' ') (on Debian/Ubuntu: apt-get install python3-venv)\"; "
                    "rm -f \"$o\"; exit 1; }; rm -f \"$o\"; ",
                    make=make,
                )
            )
            prefix = sh(
                'v={venv}\nif [ ! -x "$v/bin/python" ]; then echo "@@changed venv"; {create}fi\n'
                'py="$v"/bin/python\n',
                venv=path(venv),
                create=create,
            )
        elif args.get("executable"):
            prefix = sh(
                'py="$(head -1 {exe} | sed "s/^#! *//")"\n', exe=path(args["executable"])
            )
        else:
            prefix = sh("py={py}\n", py=args.get("python") or ctx.host.python or "python3")
        script = prefix + sh(
            'command -v "$py" >/dev/null 2>&1 || [ -x "$py" ] || '
            '{ echo "@@error no Python interpreter $py on the host"; exit 1; }\n'
            'exec "$py" -c {code}\n',
            code=_PIP_SCRIPT,
        )
        result = ctx.run(script, stdin=(json.dumps(request) + "\n").encode())
        report = parse_report(result.stdout)
        if report.errors:
            raise ModuleFailure("; ".join(report.errors))
        if "new" in report.values:  # check mode, venv missing: everything would be installed
            return ModuleResult(
                changed=True,
                msg=f"would create {venv} and install {' '.join(names) or args.get('requirements')}",
            )
        line = next((ln for ln in reversed(result.stdout.splitlines()) if ln.startswith("{")), None)
        if line is None:
            raise ModuleFailure(
                result.stderr.strip() or f"pip step gave no result (exit {result.exit_code})"
            )
        out = json.loads(line)
        if out.get("error"):
            raise ModuleFailure(out["error"])
        data = {
            "packages": out.get("todo", []),
            "python": out.get("python"),
            "installed": out.get("have", {}),
        }
        venv_changed = "venv" in report.changed
        if out.get("rc") not in (None, 0):
            detail = "\n".join(
                (out.get("stderr") or out.get("stdout") or "").strip().splitlines()[-12:]
            )
            return ModuleResult(
                failed=True,
                rc=out["rc"],
                msg=f"pip failed: {detail}",
                stdout=out.get("stdout"),
                stderr=out.get("stderr"),
                data=data,
            )
        stdout = out.get("stdout") or ""
        if "rc" not in out:
            changed = bool(out.get("would_run")) or venv_changed
        elif args["state"] == "absent":
            changed = bool(out.get("todo"))
        elif ctx.check_mode:
            changed = "Would install" in stdout or venv_changed
        else:
            changed = "Successfully installed" in stdout or venv_changed
        return ModuleResult(
            changed=changed,
            rc=out.get("rc"),
            stdout=stdout or None,
            stderr=out.get("stderr") or None,
            data=data,
        )


@register
class Venv(Module):
    name = "venv"
    args = {
        "path": Arg("path", required=True, aliases=("dest", "name")),
        "python": Arg("str", default="python3"),
        "system_site_packages": Arg("bool", default=False),
        "state": Arg("str", default="present", choices=("present", "absent")),
    }

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        check = ctx.check_mode
        if args["state"] == "absent":
            script = sh(
                'v={venv}\n'
                'if [ -e "$v" ]; then if [ ! -f "$v/pyvenv.cfg" ]; then echo "@@error $v is not a venv (no pyvenv.cfg); not removing it"; exit 1; fi; '
                'echo "@@changed removed"; {remove}; fi\n',
                venv=path(args["path"]),
                remove=Raw(":" if check else 'rm -rf -- "$v"'),
            )
        else:
            site = ["--system-site-packages"] if args["system_site_packages"] else []
            script = sh(
                "v={venv}; py={py}\n"
                'command -v "$py" >/dev/null 2>&1 || { echo "@@error no interpreter $py on the host"; exit 1; }\n'
                'if [ -x "$v/bin/python" ] && "$v/bin/python" -c "" 2>/dev/null; then exit 0; fi\n'
                'if [ -e "$v" ] && [ ! -f "$v/pyvenv.cfg" ] && [ -n "$(ls -A "$v" 2>/dev/null)" ]; then echo "@@error $v exists and is not a venv"; exit 1; fi\n'
                'echo "@@changed created"\n{create}',
                venv=path(args["path"]),
                py=args["python"],
                create=Raw("exit 0\n")
                if check
                else sh(
                    'o=$(mktemp) || exit 1; "$py" -m venv {site} "$v" >/dev/null 2>"$o" || { echo "@@error $py -m venv failed: '
                    "$(tail -2 \"$o\" | tr '\\n' ' ') (on Debian/Ubuntu: apt-get install python3-venv)\"; "
                    "rm -f \"$o\"; exit 1; }\nrm -f \"$o\"\n",
                    site=site,
                ),
            )
        result = ctx.run(script)
        report = parse_report(result.stdout)
        if report.errors or not result.ok:
            raise ModuleFailure(
                "; ".join(report.errors) or result.stderr.strip() or f"exit code {result.exit_code}"
            )
        return ModuleResult(
            changed=bool(report.changed),
            data={"path": args["path"], "python": f"{args['path']}/bin/python"},
        )
