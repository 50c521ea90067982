"""OS packages beyond apt: `dnf` / `yum` (RHEL-family images) and `package` (whichever the host has).

dnf: one shell script asks rpm what is installed, asks dnf (or yum on old images) only for what is
missing or outdated, installs non-interactively and reports what changed — or, in check mode, what
would. `yum` is `dnf` under its old name (as in ansible-core 2.19, where yum redirects to dnf).
package: one probe for the host's package manager, then the apt or dnf module with the same
arguments (Ansible's `use: auto`).
"""

from __future__ import annotations

import re
from typing import Any

from provision.modules.base import (
    Arg,
    Module,
    ModuleFailure,
    ModuleResult,
    TaskContext,
    get_module,
    normalize_args,
    register,
)
from provision.modules.files import parse_report
from provision.shell import Raw, sh

_RPM_NAME = re.compile(r"^[A-Za-z0-9_@][A-Za-z0-9+._\-:*]*$")

_DNF_BODY = r"""
set -f  # $opts and $todo are split into words, never globbed
if command -v dnf >/dev/null 2>&1; then mgr=dnf; elif command -v yum >/dev/null 2>&1; then mgr=yum
else echo "@@error neither dnf nor yum is on this host: it is not a RHEL-family image (use apt on Debian/Ubuntu)"; exit 1; fi
command -v rpm >/dev/null 2>&1 || { echo "@@error rpm not found on the host"; exit 1; }
if [ "$(id -u)" != 0 ]; then echo "@@error $mgr needs root: connect as root or set become: yes (passwordless sudo)"; exit 1; fi
echo "@@mgr $mgr"
if [ "$update" = 1 ]; then echo "@@updated 1"; [ "$check" = 1 ] || "$mgr" -q -y $opts makecache >/dev/null || { echo "@@error $mgr makecache failed"; exit 1; }; fi
todo=""
for spec in "$@"; do
  case $state in
    present) rpm -q --whatprovides "$spec" >/dev/null 2>&1 || todo="$todo $spec" ;;
    absent) rpm -q "$spec" >/dev/null 2>&1 && todo="$todo $spec" ;;
    latest)
      if ! rpm -q --whatprovides "$spec" >/dev/null 2>&1; then todo="$todo $spec"
      elif [ -n "$("$mgr" -q $opts list --upgrades "$spec" 2>/dev/null | grep -v '^Available Upgrades' | grep .)" ]; then todo="$todo $spec"; fi ;;
  esac
done
[ -z "$todo" ] && exit 0
echo "@@changed$todo"
[ "$check" = 1 ] && exit 0
case $state in
  present) "$mgr" -y $opts install $todo ;;
  latest) "$mgr" -y $opts install $todo && "$mgr" -y $opts upgrade $todo ;;
  absent) "$mgr" -y $opts remove $todo ;;
esac
"""


@register
class Dnf(Module):
    name = "dnf"
    args = {
        "name": Arg("list", aliases=("pkg",), elements="str", default=[]),
        "state": Arg("str", choices=("absent", "present", "installed", "removed", "latest")),
        "update_cache": Arg("bool", default=False, aliases=("expire-cache",)),
        "enablerepo": Arg("list", elements="str", default=[]),
        "disablerepo": Arg("list", elements="str", default=[]),
        "disable_gpg_check": Arg("bool", default=False),
        "install_weak_deps": Arg("bool", default=True),
        "exclude": Arg("list", elements="str", default=[]),
        "autoremove": Arg("bool", default=False),
        "lock_timeout": Arg("int", default=30),
    }

    def check_args(self, args: dict[str, Any]) -> list[str]:
        if not args.get("name") and not args.get("update_cache"):
            return [f"{self.name} needs name (packages) or update_cache: yes"]
        bad = [n for n in args.get("name") or [] if not _RPM_NAME.match(str(n))]
        errors = [f"{n!r} is not an RPM package name (name, name-version or a glob)" for n in bad]
        # these become `--opt=VALUE` words that the host's shell splits on spaces: one word each
        for key in ("enablerepo", "disablerepo", "exclude"):
            errors += [f"{key} {v!r} is not a repository id or package glob (no spaces)"
                       for v in args.get(key) or [] if not str(v) or any(c.isspace() for c in str(v))]
        return errors

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        state = {"installed": "present", "removed": "absent", None: "present"}.get(args["state"], args["state"])
        opts = [f"--enablerepo={r}" for r in args["enablerepo"]]
        opts += [f"--disablerepo={r}" for r in args["disablerepo"]]
        opts += [f"--exclude={e}" for e in args["exclude"]]
        if args["disable_gpg_check"]:
            opts.append("--nogpgcheck")
        if not args["install_weak_deps"]:
            opts.append("--setopt=install_weak_deps=False")
        names = [str(n) for n in args["name"]]
        script = sh(
            "set -- {names}\nstate={state}; check={check}; update={update}; opts={opts}\n{body}",
            names=names,
            state=state,
            check="1" if ctx.check_mode else "0",
            update="1" if args["update_cache"] else "0",
            # one word per option, re-split by the shell: every option is built here, no spaces
            opts=" ".join(opts),
            body=Raw(_DNF_BODY),
        )
        result = ctx.run(script)
        report = parse_report(result.stdout)
        if report.errors:
            raise ModuleFailure("; ".join(report.errors))
        todo = report.changed[0].split() if report.changed else []
        verb = {"present": "Installed", "latest": "Installed", "absent": "Removed"}[state]
        data: dict[str, Any] = {"results": [f"{verb}: {n}" for n in todo], "rc": result.exit_code}
        if not result.ok:
            tail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-5:]
            return ModuleResult(
                failed=True, msg=f"{report.values.get('mgr', 'dnf')} failed: " + " | ".join(tail), data=data
            )
        changed = bool(todo)
        return ModuleResult(changed=changed, msg="" if todo else "Nothing to do", data=data)


@register
class Yum(Dnf):
    """ansible-core 2.19 redirects `yum` to `dnf`; so does provision (dnf, else yum, on the host)."""

    name = "yum"


@register
class Package(Module):
    name = "package"
    args = {
        # Ansible's package action hands every argument to apt/dnf unchecked: `update_cache`
        # alone (no name, no state) is a valid task there
        "name": Arg("list", elements="str"),
        "state": Arg("str", default="present"),
        "use": Arg("str", default="auto"),
    }
    forwards_args = True  # update_cache, enablerepo, … go to apt/dnf (Ansible's package)

    def run(self, ctx: TaskContext) -> ModuleResult:
        use = ctx.args["use"]
        if use == "auto":
            probe = ctx.run(
                Raw(
                    "for m in apt-get dnf yum apk zypper pacman; do "
                    'if command -v "$m" >/dev/null 2>&1; then echo "@@mgr $m"; exit 0; fi; done; echo "@@mgr none"'
                )
            )
            use = parse_report(probe.stdout).values.get("mgr", "none")
        module_name = {"apt-get": "apt", "apt": "apt", "dnf": "dnf", "yum": "dnf", "dnf5": "dnf"}.get(use)
        if module_name is None:
            raise ModuleFailure(
                f"package: the host's package manager is {use!r}; provision's package supports apt and "
                "dnf/yum (use a command task for others)"
            )
        module_cls = get_module(module_name)
        assert module_cls is not None
        module = module_cls()

        inner = normalize_args(
            module,
            {
                **({"name": ctx.args["name"]} if ctx.args.get("name") is not None else {}),
                "state": ctx.args["state"],
                **ctx.args.get("_forward", {}),
            },
        )
        sub = TaskContext(**{**ctx.__dict__, "args": inner})
        return module.run(sub)


__all__ = ["Dnf", "Package", "Yum"]
