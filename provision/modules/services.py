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
    "rented GPU servers are, so there are no running units to {what}. Start the program directly (a `shell` "
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

# systemd not running (a container, a chroot): Ansible's systemd module still masks, enables and
# disables unit files (systemctl edits them offline), tolerates a failed daemon-reload in a chroot
# or with SYSTEMD_OFFLINE=1, and can't know a unit's state: a warning there, else it fails
_SYSTEMD_OFFLINE_BODY = r"""
command -v systemctl >/dev/null 2>&1 || { echo "@@error Failed to find required executable \"systemctl\""; exit 1; }
sc() { systemctl $scope "$@"; }
offline=0; root=$(stat -c %d:%i / 2>/dev/null)
if [ -n "$debian_chroot" ]; then offline=1
elif proc=$(stat -c %d:%i /proc/1/root/. 2>/dev/null); then [ "$root" != "$proc" ] && offline=1
else ino=2; case "$(stat -f --format=%T / 2>/dev/null)" in *btrfs*) ino=256 ;; *xfs*) ino=128 ;; esac
  [ "$(stat -c %i /)" != $ino ] && offline=1; fi
chroot=$offline; [ "$SYSTEMD_OFFLINE" = 1 ] && offline=1
for act in daemon-reload daemon-reexec; do
  want=$reload; [ $act = daemon-reexec ] && want=$reexec
  [ "$want" = 1 ] && [ "$check" != 1 ] || continue
  o=$(sc $act 2>&1); rc=$?
  if [ $rc != 0 ]; then
    if [ $offline = 1 ]; then echo "@@warn $act failed, but target is a chroot or systemd is offline. Continuing. Error was: $rc / $(echo "$o" | tr '\n' ' ')"
    else echo "@@error failure $rc during $act: $(echo "$o" | tr '\n' ' ')"; exit 1; fi
  fi
done
[ -z "$unit" ] && exit 0
initd=0; [ -f "/etc/init.d/$unit" ] && initd=1
found=0
case "$(sc is-enabled "$unit" 2>/dev/null)" in
  enabled|enabled-runtime|linked|linked-runtime|masked|masked-runtime|static|indirect|disabled|generated|transient) found=1 ;;
  *) if sc list-unit-files "$unit" >/dev/null 2>&1; then found=1
     else o=$(sc 2>&1) || { echo "@@error $(echo "$o" | tr '\n' ' ')"; exit 1; }; fi ;;
esac
[ $initd = 1 ] && found=1
missing() { [ $found = 1 ] || { echo "@@error Could not find the requested service $unit: host"; exit 1; }; }
if [ -n "$masked" ]; then
  is=0; [ "$(sc is-enabled "$unit" 2>/dev/null)" = masked ] && is=1
  if [ "$masked" != "$is" ]; then
    act=mask; [ "$masked" = 0 ] && act=unmask
    echo "@@changed $act"
    if [ "$check" != 1 ]; then o=$(sc $act "$unit" 2>&1) || { missing; echo "@@error Failed to $act the service ($unit): $(echo "$o" | tr '\n' ' ')"; exit 1; }; fi
  fi
fi
if [ -n "$enabled" ]; then
  missing
  o=$(sc is-enabled "$unit" -l 2>/dev/null); rc=$?; is=0
  if [ $rc = 0 ]; then case "$o" in enabled-runtime|indirect|alias) is=0 ;; *) is=1 ;; esac
  elif [ $rc = 1 ] && [ -z "$scope" ] && [ $initd = 1 ]; then
    case "$o" in *disabled) ;; *) set +f; for l in /etc/rc?.d/S??"$unit"; do [ -e "$l" ] && is=1; done; set -f ;; esac
  fi
  echo "@@enabled_before $is"
  if [ "$enabled" != "$is" ]; then
    act=enable; [ "$enabled" = 0 ] && act=disable
    echo "@@changed ${act}d"
    if [ "$check" != 1 ]; then o=$(sc $act "$unit" 2>&1) || { echo "@@error Unable to $act service $unit: $(echo "$o" | tr '\n' ' ')"; exit 1; }; fi
  fi
fi
if [ -n "$state" ]; then
  missing
  if [ $offline = 1 ]; then echo "@@warn Target is a chroot or systemd is offline. This can lead to false positives or prevent the init system tools from working."
  else echo "@@error Service is in unknown state"; exit 1; fi
fi
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


def _systemd(ctx: TaskContext, args: dict[str, Any], body: str = _SYSTEMD_BODY) -> ModuleResult:
    scope = {"system": "", "user": "--user", "global": "--global"}[args.get("scope") or "system"]
    script = sh(
        "unit={unit}; state={state}; enabled={enabled}; masked={masked}; reload={reload}; check={check}; "
        "reexec={reexec}; scope={scope}; noblock={noblock}\n{body}",
        unit=str(args.get("name") or ""),
        state=str(args.get("state") or ""),
        enabled=_flag(args.get("enabled")),
        masked=_flag(args.get("masked")),
        reload="1" if args.get("daemon_reload") else "0",
        reexec="1" if args.get("daemon_reexec") else "0",
        check="1" if ctx.check_mode else "0",
        scope=scope,
        noblock="--no-block" if args.get("no_block") else "",
        body=Raw(body),
    )
    result = ctx.run(script)
    report = parse_report(result.stdout)
    warnings = [line[len("@@warn "):] for line in result.stdout.splitlines() if line.startswith("@@warn ")]
    if report.errors or not result.ok:
        msg = "; ".join(report.errors) or result.stderr.strip() or f"exit code {result.exit_code}"
        if body is _SYSTEMD_OFFLINE_BODY:  # Ansible's fail_json: the result, not an exception
            return ModuleResult(failed=True, msg=msg, changed=bool(report.changed), data={"name": args.get("name")})
        raise ModuleFailure(msg)
    data: dict[str, Any] = {"name": args.get("name")}
    if warnings:
        data["warnings"] = warnings
    if args.get("state"):
        data["state"] = args["state"]
    if args.get("enabled") is not None:
        data["enabled"] = args["enabled"]
    data["status"] = {} if body is _SYSTEMD_OFFLINE_BODY else {  # offline: nothing to ask
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
            result = _systemd(ctx, ctx.args, body=_SYSTEMD_OFFLINE_BODY)
            if result.failed:  # Ansible's words first, then why: no manager to ask
                result.msg += ". " + _NO_SYSTEMD.format(pid1=pid1, what="start or stop")
            return result
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
