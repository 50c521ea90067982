"""Services: `systemd` (alias `systemd_service`) and `service`.

Most rented GPU servers are containers without systemd (PID 1 is a shell, supervisord, tini, …).
`systemd` says so plainly instead of failing on `systemctl`'s "System has not been booted with
systemd": it names PID 1 and the alternatives. `service` uses systemd when it runs, else the
image's /etc/init.d script (`status` exit code, or `pattern` via pgrep), as Ansible's sysvinit
path does. Each is one shell round trip: look, act only when the state differs, report.
"""

from __future__ import annotations

from typing import Any

from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.modules.files import parse_report
from provision.shell import Raw, sh

_NO_SYSTEMD = (
    "systemd is not running on this host (PID 1 is '{pid1}'): this looks like a container, as most "
    "rented GPU servers are, so there are no units to {what}. Start the program directly (a `shell` "
    "task with `nohup … &` or `setsid`), or use the `service` module, which falls back to the "
    "image's /etc/init.d scripts."
)

_PROBE = r"""
if [ -d /run/systemd/system ]; then echo "@@init systemd"; else echo "@@init none"; fi
echo "@@pid1 $(cat /proc/1/comm 2>/dev/null || echo unknown)"
"""

_SYSTEMD_BODY = r"""
command -v systemctl >/dev/null 2>&1 || { echo "@@error systemctl not found"; exit 1; }
sc() { systemctl $scope "$@"; }
if [ "$reload" = 1 ]; then echo "@@daemon_reload 1"; [ "$check" = 1 ] || sc daemon-reload || exit 1; fi
[ -z "$unit" ] && exit 0
load=$(sc show -p LoadState --value "$unit" 2>/dev/null)
active=$(sc show -p ActiveState --value "$unit" 2>/dev/null)
file=$(sc is-enabled "$unit" 2>/dev/null)
echo "@@load $load"; echo "@@active $active"; echo "@@enabled_before $file"
if [ "$load" = not-found ] && [ -z "$masked" ]; then echo "@@error Could not find the requested service $unit: host"; exit 1; fi
if [ -n "$masked" ]; then
  if [ "$masked" = 1 ] && [ "$file" != masked ]; then echo "@@changed masked"; [ "$check" = 1 ] || sc mask "$unit" || exit 1; fi
  if [ "$masked" = 0 ] && [ "$file" = masked ]; then echo "@@changed unmasked"; [ "$check" = 1 ] || sc unmask "$unit" || exit 1; fi
fi
if [ -n "$enabled" ]; then
  case "$file" in enabled|enabled-runtime|alias|static|indirect|generated) is=1 ;; *) is=0 ;; esac
  if [ "$enabled" != "$is" ]; then
    if [ "$enabled" = 1 ]; then echo "@@changed enabled"; [ "$check" = 1 ] || sc enable "$unit" || exit 1
    else echo "@@changed disabled"; [ "$check" = 1 ] || sc disable "$unit" || exit 1; fi
  fi
fi
case "$state" in
  started) [ "$active" = active ] || { echo "@@changed started"; [ "$check" = 1 ] || sc $noblock start "$unit" || exit 1; } ;;
  stopped) case "$active" in active|activating|deactivating|reloading) echo "@@changed stopped"; [ "$check" = 1 ] || sc $noblock stop "$unit" || exit 1 ;; esac ;;
  restarted) echo "@@changed restarted"; [ "$check" = 1 ] || sc $noblock restart "$unit" || exit 1 ;;
  reloaded) if [ "$active" != active ]; then echo "@@changed started"; [ "$check" = 1 ] || sc $noblock start "$unit" || exit 1
            else echo "@@changed reloaded"; [ "$check" = 1 ] || sc $noblock reload-or-restart "$unit" || exit 1; fi ;;
esac
echo "@@active_after $(sc show -p ActiveState --value "$unit" 2>/dev/null)"
"""

# where the init scripts and rc?.d links are (a test points it at a tree of its own)
SYSV_ETC = "/etc"

_SYSV_BODY = r"""
script="$etc/init.d/$svc"
if [ ! -x "$script" ]; then echo "@@error Could not find the requested service $svc: no systemd on this host (PID 1 is '$(cat /proc/1/comm 2>/dev/null)') and no executable $script"; exit 1; fi
running() { if [ -n "$pattern" ]; then pgrep -f -- "$pattern" >/dev/null 2>&1; else "$script" status >/dev/null 2>&1; fi; }
if running; then was=1; else was=0; fi
echo "@@running_before $was"
act() { [ "$check" = 1 ] && return 0; o=$(mktemp) || return 1; "$script" "$1" $args >"$o" 2>&1; rc=$?; [ $rc = 0 ] || echo "@@error $script $1 failed (exit $rc): $(tail -3 "$o" | tr '\n' ' ')"; rm -f "$o"; return $rc; }
case "$state" in
  started) [ $was = 1 ] || { echo "@@changed started"; act start || exit 1; } ;;
  stopped) [ $was = 0 ] || { echo "@@changed stopped"; act stop || exit 1; } ;;
  restarted) echo "@@changed restarted"; if [ $was = 1 ]; then act stop; fi; act start || exit 1 ;;
  reloaded) if [ $was = 0 ]; then echo "@@changed started"; act start || exit 1; else echo "@@changed reloaded"; act reload || act restart || exit 1; fi ;;
esac
if [ -n "$enabled" ]; then
  # Ansible's rule: enabled when a start link /etc/rc?.d/S??NAME exists (the script runs with
  # `set -f`: globbing is switched on for these two tests only)
  set +f; is=0; for l in "$etc"/rc?.d/S??"$svc"; do [ -e "$l" ] && is=1; done
  k=0; for l in "$etc"/rc?.d/K??"$svc"; do [ -e "$l" ] && k=1; done; set -f
  if [ "$enabled" != "$is" ]; then
    command -v update-rc.d >/dev/null 2>&1 || { echo "@@error enabling $svc at boot needs update-rc.d (sysv-rc), which this host lacks"; exit 1; }
    if [ "$enabled" = 1 ]; then echo "@@changed enabled"; [ "$check" = 1 ] || { { [ $k = 1 ] || update-rc.d "$svc" defaults >/dev/null; } && update-rc.d "$svc" enable >/dev/null; } || exit 1
    else echo "@@changed disabled"; [ "$check" = 1 ] || update-rc.d "$svc" disable >/dev/null || exit 1; fi
  fi
fi
if [ "$check" = 0 ] && [ -n "$sleep" ] && [ "$state" = restarted ]; then sleep "$sleep"; fi
"""


def _flag(value: Any) -> str:
    return "" if value is None else ("1" if value else "0")


def _probe(ctx: TaskContext) -> tuple[str, str]:
    report = parse_report(ctx.run(Raw(_PROBE)).stdout)
    return report.values.get("init", "none"), report.values.get("pid1", "unknown")


def _systemd(ctx: TaskContext, args: dict[str, Any]) -> ModuleResult:
    scope = {"system": "", "user": "--user", "global": "--global"}[args.get("scope") or "system"]
    script = sh(
        "unit={unit}; state={state}; enabled={enabled}; masked={masked}; reload={reload}; check={check}; "
        "scope={scope}; noblock={noblock}\n{body}",
        unit=str(args.get("name") or ""),
        state=str(args.get("state") or ""),
        enabled=_flag(args.get("enabled")),
        masked=_flag(args.get("masked")),
        reload="1" if args.get("daemon_reload") else "0",
        check="1" if ctx.check_mode else "0",
        scope=scope,
        noblock="--no-block" if args.get("no_block") else "",
        body=Raw(_SYSTEMD_BODY),
    )
    result = ctx.run(script)
    report = parse_report(result.stdout)
    if report.errors or not result.ok:
        raise ModuleFailure("; ".join(report.errors) or result.stderr.strip() or f"exit code {result.exit_code}")
    data: dict[str, Any] = {"name": args.get("name")}
    if args.get("state"):
        data["state"] = args["state"]
    if args.get("enabled") is not None:
        data["enabled"] = args["enabled"]
    data["status"] = {
        "LoadState": report.values.get("load", ""),
        "ActiveState": report.values.get("active_after", report.values.get("active", "")),
        "UnitFileState": report.values.get("enabled_before", ""),
    }
    return ModuleResult(changed=bool(report.changed), data=data)


_SYSTEMD_ARGS = {
    "name": Arg("str", aliases=("service", "unit")),
    "state": Arg("str", choices=("reloaded", "restarted", "started", "stopped")),
    "enabled": Arg("bool"),
    "force": Arg("bool"),
    "masked": Arg("bool"),
    "daemon_reload": Arg("bool", default=False, aliases=("daemon-reload",)),
    "daemon_reexec": Arg("bool", default=False, aliases=("daemon-reexec",)),
    "scope": Arg("str", default="system", choices=("system", "user", "global")),
    "no_block": Arg("bool", default=False),
}


@register
class Systemd(Module):
    name = "systemd"
    args = _SYSTEMD_ARGS

    def check_args(self, args: dict[str, Any]) -> list[str]:
        if not args.get("name") and not args.get("daemon_reload") and not args.get("daemon_reexec"):
            return ["systemd needs name (a unit) or daemon_reload: yes"]
        if args.get("name") is None and (args.get("state") or args.get("enabled") is not None):
            return ["state and enabled need name (the unit)"]
        return []

    def run(self, ctx: TaskContext) -> ModuleResult:
        init, pid1 = _probe(ctx)
        if init != "systemd":
            what = "start or enable" if ctx.args.get("name") else "reload"
            return ModuleResult(failed=True, msg=_NO_SYSTEMD.format(pid1=pid1, what=what), data={"name": ctx.args.get("name")})
        return _systemd(ctx, ctx.args)


@register
class SystemdService(Systemd):
    name = "systemd_service"


@register
class Service(Module):
    name = "service"
    args = {
        "name": Arg("str", required=True),
        "state": Arg("str", choices=("reloaded", "restarted", "started", "stopped")),
        "enabled": Arg("bool"),
        "pattern": Arg("str"),
        "sleep": Arg("int"),
        "arguments": Arg("str", default="", aliases=("args",)),
        "runlevel": Arg("str", default="default"),
        "use": Arg("str", default="auto"),
    }
    required_one_of = (("state", "enabled"),)

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        init, _pid1 = _probe(ctx) if args["use"] == "auto" else (args["use"], "")
        if init == "systemd":
            return _systemd(ctx, {**args, "daemon_reload": False})
        if init not in ("none", "sysvinit", "service"):
            raise ModuleFailure(f"service: use={init!r} is not supported here (auto, systemd or sysvinit)")
        script = sh(
            "etc={etc}; svc={svc}; state={state}; enabled={enabled}; pattern={pattern}; check={check}; "
            "sleep={sleep}; args={extra}\nset -f\n{body}",
            etc=SYSV_ETC,
            svc=str(args["name"]),
            state=str(args.get("state") or ""),
            enabled=_flag(args.get("enabled")),
            pattern=str(args.get("pattern") or ""),
            check="1" if ctx.check_mode else "0",
            sleep=str(args.get("sleep") or ""),
            extra=str(args.get("arguments") or ""),
            body=Raw(_SYSV_BODY),
        )
        result = ctx.run(script)
        report = parse_report(result.stdout)
        if report.errors or not result.ok:
            raise ModuleFailure("; ".join(report.errors) or result.stderr.strip() or f"exit code {result.exit_code}")
        data: dict[str, Any] = {"name": args["name"]}
        if args.get("state"):
            data["state"] = args["state"]
        if args.get("enabled") is not None:
            data["enabled"] = args["enabled"]
        return ModuleResult(changed=bool(report.changed), data=data)


__all__ = ["Service", "Systemd", "SystemdService"]
