"""Accounts: `user` and `group`, with the host's shadow-utils (useradd/usermod/userdel, groupadd/…).

One round trip each: the script looks the account up (getent), compares every asked-for field,
runs only the commands that differ (none in check mode) and prints the account as it ends up.
A `password` (a crypt hash, as in Ansible) is the first line of stdin and reaches `chpasswd -e`
through a builtin printf: it is never in the command text, argv or the host's process list.
"""

from __future__ import annotations

from typing import Any

from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.modules.files import parse_report
from provision.shell import Raw, sh

_ROOT = 'if [ "$(id -u)" != 0 ]; then echo "@@error managing accounts needs root: connect as root or set become: yes"; exit 1; fi\n'

_USER_BODY = r"""
set -f  # $groups is split on commas below, never globbed
IFS= read -r pw || pw=""
run() { [ "$check" = 1 ] && return 0; o=$(mktemp) || exit 1; "$@" >"$o" 2>&1 || { echo "@@error $1 failed: $(tail -2 "$o" | tr '\n' ' ')"; rm -f "$o"; exit 1; }; rm -f "$o"; }
entry=$(getent passwd "$name")
if [ "$state" = absent ]; then
  [ -z "$entry" ] && exit 0
  echo "@@changed removed"; set --; [ "$remove" = 1 ] && set -- "$@" -r; [ "$force" = 1 ] && set -- "$@" -f
  run userdel "$@" "$name"; exit 0
fi
gid=""
if [ -n "$group" ]; then
  gid=$(getent group "$group" | cut -d: -f3)
  [ -n "$gid" ] || { echo "@@error Group $group does not exist"; exit 1; }
fi
if [ -n "$groups" ]; then
  for g in $(echo "$groups" | tr ',' ' '); do getent group "$g" >/dev/null || { echo "@@error Group $g does not exist"; exit 1; }; done
fi
if [ -z "$entry" ]; then
  echo "@@changed created"; echo "@@created 1"
  set --
  [ -n "$uid" ] && set -- "$@" -u "$uid"; [ "$nonunique" = 1 ] && set -- "$@" -o
  [ -n "$group" ] && set -- "$@" -g "$group"; [ -n "$groups" ] && set -- "$@" -G "$groups"
  [ -n "$comment_set" ] && set -- "$@" -c "$comment"; [ -n "$home" ] && set -- "$@" -d "$home"
  [ -n "$shell" ] && set -- "$@" -s "$shell"; [ "$system" = 1 ] && set -- "$@" -r
  if [ "$createhome" = 1 ]; then set -- "$@" -m; else set -- "$@" -M; fi
  [ -n "$expdays" ] && set -- "$@" -e "$expires"
  run useradd "$@" "$name"
  if [ -n "$pw" ]; then [ "$check" = 1 ] || printf '%s:%s\n' "$name" "$pw" | chpasswd -e || { echo "@@error setting the password failed"; exit 1; }; fi
  [ "$lock" = 1 ] && run usermod -L "$name"
else
  cur_uid=$(echo "$entry" | cut -d: -f3); cur_gid=$(echo "$entry" | cut -d: -f4)
  cur_comment=$(echo "$entry" | cut -d: -f5); cur_home=$(echo "$entry" | cut -d: -f6); cur_shell=$(echo "$entry" | cut -d: -f7)
  set --
  [ -n "$uid" ] && [ "$uid" != "$cur_uid" ] && { set -- "$@" -u "$uid"; echo "@@changed uid"; }
  [ -n "$uid" ] && [ "$nonunique" = 1 ] && [ "$uid" != "$cur_uid" ] && set -- "$@" -o
  [ -n "$gid" ] && [ "$gid" != "$cur_gid" ] && { set -- "$@" -g "$group"; echo "@@changed group"; }
  [ -n "$comment_set" ] && [ "$comment" != "$cur_comment" ] && { set -- "$@" -c "$comment"; echo "@@changed comment"; }
  [ -n "$home" ] && [ "$home" != "$cur_home" ] && { if [ "$movehome" = 1 ]; then set -- "$@" -d "$home" -m; else set -- "$@" -d "$home"; fi; echo "@@changed home"; }
  [ -n "$shell" ] && [ "$shell" != "$cur_shell" ] && { set -- "$@" -s "$shell"; echo "@@changed shell"; }
  if [ -n "$groups_given" ]; then
    prim=$(getent group "${gid:-$cur_gid}" | cut -d: -f1)
    have=$(id -Gn "$name" | tr ' ' '\n' | grep -vx -- "$prim" | sort -u | tr '\n' ',' | sed 's/,$//')
    want=$(echo "$groups" | tr ',' '\n' | grep -v '^$' | grep -vx -- "$prim" | sort -u | tr '\n' ',' | sed 's/,$//')
    if [ "$append" = 1 ]; then
      missing=$(printf '%s\n' "$want" | tr ',' '\n' | grep -v '^$' | while read -r g; do printf '%s\n' "$have" | tr ',' '\n' | grep -qx -- "$g" || echo "$g"; done | tr '\n' ',' | sed 's/,$//')
      [ -n "$missing" ] && { set -- "$@" -a -G "$missing"; echo "@@changed groups"; }
    elif [ "$have" != "$want" ]; then set -- "$@" -G "$want"; echo "@@changed groups"; fi
  fi
  if [ -n "$expdays" ]; then  # Ansible's rule: an empty field reads as -1 (never); days compared
    cur_exp=$(getent shadow "$name" | cut -d: -f8); cur_exp=${cur_exp:--1}
    if [ "$expdays" -lt 0 ]; then [ "$cur_exp" -ge 0 ] && { set -- "$@" -e ""; echo "@@changed expires"; }
    elif [ "$cur_exp" -lt 0 ] || [ "$cur_exp" != "$expdays" ]; then set -- "$@" -e "$expires"; echo "@@changed expires"; fi
  fi
  [ $# -gt 0 ] && run usermod "$@" "$name"
  if [ -n "$pw" ] && [ "$updatepw" = always ] && [ "$(getent shadow "$name" | cut -d: -f2)" != "$pw" ]; then
    echo "@@changed password"; [ "$check" = 1 ] || printf '%s:%s\n' "$name" "$pw" | chpasswd -e || { echo "@@error setting the password failed"; exit 1; }
  fi
  if [ -n "$lock" ]; then
    case "$(getent shadow "$name" | cut -d: -f2)" in '!'*) locked=1 ;; *) locked=0 ;; esac
    if [ "$lock" != "$locked" ]; then echo "@@changed lock"; if [ "$lock" = 1 ]; then run usermod -L "$name"; else run usermod -U "$name"; fi; fi
  fi
  # as Ansible: an existing user's missing home is made (create_home), from /etc/skel, with
  # login.defs' HOME_MODE (else 0777 & ~UMASK, else 0755), owned by the user throughout
  h=${home:-$cur_home}
  if [ "$createhome" = 1 ] && [ -n "$h" ] && [ ! -e "$h" ]; then
    echo "@@changed home created"
    if [ "$check" != 1 ]; then
      if [ -d /etc/skel ]; then cp -a /etc/skel "$h"; else mkdir -p "$h"; fi || { echo "@@error creating $h failed"; exit 1; }
      if [ -f /etc/login.defs ]; then
        hm=$(awk '$1 == "HOME_MODE" && $2 ~ /^[0-7]+$/ { print $2; exit }' /etc/login.defs)
        um=$(awk '$1 == "UMASK" && $2 ~ /^[0-7]+$/ { u = $2 } END { print u }' /etc/login.defs)
        if [ -n "$hm" ]; then m=$hm; elif [ -n "$um" ]; then m=$(printf %o $(( 0777 & ~0$um ))); else m=755; fi
        chmod "$m" "$h" || exit 1
      fi
      chown -R "$(id -u "$name"):$(id -g "$name")" "$h" || exit 1
    fi
  fi
fi
if [ -n "$pwmin$pwmax$pwwarn" ]; then
  sh_entry=$(getent shadow "$name"); set --
  [ -n "$pwmin" ] && [ "$pwmin" != "$(echo "$sh_entry" | cut -d: -f4)" ] && set -- "$@" -m "$pwmin"
  [ -n "$pwmax" ] && [ "$pwmax" != "$(echo "$sh_entry" | cut -d: -f5)" ] && set -- "$@" -M "$pwmax"
  [ -n "$pwwarn" ] && [ "$pwwarn" != "$(echo "$sh_entry" | cut -d: -f6)" ] && set -- "$@" -W "$pwwarn"
  [ $# -gt 0 ] && { echo "@@changed password_expire"; run chage "$@" "$name"; }
fi
if [ "$genkey" = 1 ]; then
  h=$(getent passwd "$name" | cut -d: -f6)
  case "$keyfile" in /*) kf=$keyfile ;; *) kf="$h/$keyfile" ;; esac
  if [ -n "$h" ] && [ ! -e "$kf" ]; then
    echo "@@changed ssh_key"
    if [ "$check" != 1 ]; then
      kd=$(dirname "$kf")
      [ -d "$kd" ] || { mkdir -p "$kd" && chmod 700 "$kd" && chown "$name:$(id -g "$name")" "$kd"; } || { echo "@@error cannot create $kd"; exit 1; }
      set -- -q -t "$keytype" -f "$kf" -N "" -C "$keycomment"; [ -n "$keybits" ] && set -- "$@" -b "$keybits"
      run ssh-keygen "$@"
      chown "$name:$(id -g "$name")" "$kf" "$kf.pub"
    fi
  fi
  if [ -n "$h" ]; then
    echo "@@ssh_key_file $kf"
    [ -r "$kf.pub" ] && echo "@@ssh_public_key $(cat "$kf.pub")"
    [ -r "$kf.pub" ] && echo "@@ssh_fingerprint $(ssh-keygen -l -f "$kf.pub")"
  fi
fi
entry=$(getent passwd "$name")
[ -n "$entry" ] && echo "@@entry $entry"
exit 0
"""

_GROUP_BODY = r"""
entry=$(getent group "$name")
run() { [ "$check" = 1 ] && return 0; o=$(mktemp) || exit 1; "$@" >"$o" 2>&1 || { echo "@@error $1 failed: $(tail -2 "$o" | tr '\n' ' ')"; rm -f "$o"; exit 1; }; rm -f "$o"; }
if [ "$state" = absent ]; then
  [ -z "$entry" ] && exit 0
  echo "@@changed removed"; if [ "$force" = 1 ]; then run groupdel -f "$name"; else run groupdel "$name"; fi; exit 0
fi
if [ -z "$entry" ]; then
  echo "@@changed created"; set --
  [ -n "$gid" ] && set -- "$@" -g "$gid"; [ "$nonunique" = 1 ] && set -- "$@" -o; [ "$system" = 1 ] && set -- "$@" -r
  run groupadd "$@" "$name"
elif [ -n "$gid" ] && [ "$gid" != "$(echo "$entry" | cut -d: -f3)" ]; then
  echo "@@changed gid"; if [ "$nonunique" = 1 ]; then run groupmod -o -g "$gid" "$name"; else run groupmod -g "$gid" "$name"; fi
fi
entry=$(getent group "$name"); [ -n "$entry" ] && echo "@@entry $entry"
exit 0
"""


def _bit(value: Any) -> str:
    return "" if value is None else ("1" if value else "0")


def _num(value: Any) -> str:
    return "" if value is None else str(int(value))


def _run(ctx: TaskContext, script: str, stdin: bytes | None = None) -> tuple[list[str], dict[str, str]]:
    result = ctx.run(script, stdin=stdin)
    report = parse_report(result.stdout)
    if report.errors or not result.ok:
        raise ModuleFailure("; ".join(report.errors) or result.stderr.strip() or f"exit code {result.exit_code}")
    return report.changed, report.values


@register
class User(Module):
    name = "user"
    args = {
        "name": Arg("str", required=True, aliases=("user",)),
        "state": Arg("str", default="present", choices=("absent", "present")),
        "uid": Arg("int"),
        "non_unique": Arg("bool", default=False),
        "group": Arg("str"),
        "groups": Arg("list", elements="str"),
        "comment": Arg("str"),
        "home": Arg("path"),
        "shell": Arg("path"),
        "password": Arg("str", no_log=True),
        "update_password": Arg("str", default="always", choices=("always", "on_create")),
        "password_lock": Arg("bool"),
        "force": Arg("bool", default=False),
        "remove": Arg("bool", default=False),
        "create_home": Arg("bool", default=True, aliases=("createhome",)),
        "system": Arg("bool", default=False),
        "move_home": Arg("bool", default=False),
        "append": Arg("bool", default=False),
        "expires": Arg("float"),
        "local": Arg("bool"),
        "password_expire_min": Arg("int"),
        "password_expire_max": Arg("int"),
        "password_expire_warn": Arg("int"),
        "generate_ssh_key": Arg("bool", default=False),
        "ssh_key_type": Arg("str", default="rsa"),
        "ssh_key_bits": Arg("int"),
        "ssh_key_file": Arg("path", default=".ssh/id_rsa"),
        "ssh_key_comment": Arg("str"),
    }

    def check_args(self, args: dict[str, Any]) -> list[str]:
        pw = args.get("password")
        if pw and not str(pw).startswith(("$", "!", "*")):
            return [
                "password must be a crypt hash (like Ansible's): use \"{{ 'secret' | password_hash('sha512') }}\" "
                "or `openssl passwd -6`, never the plain password"
            ]
        return []

    def run(self, ctx: TaskContext) -> ModuleResult:
        a = ctx.args
        groups = a.get("groups")
        expires = a.get("expires")
        if expires is not None:
            import time

            expires_day = "" if expires < 0 else time.strftime("%Y-%m-%d", time.gmtime(expires))
            expires_days = "-1" if expires < 0 else str(int(expires // 86400))
        script = sh(
            "name={name}; state={state}; check={check}; uid={uid}; nonunique={nu}; group={group}; "
            "groups={groups}; groups_given={gg}; append={append}; comment={comment}; comment_set={cs}; "
            "home={home}; shell={shell}; createhome={ch}; system={system}; movehome={mh}; updatepw={up}; "
            "lock={lock}; remove={remove}; force={force}; expires={expires}; expdays={expdays}; pwmin={pwmin}; "
            "pwmax={pwmax}; pwwarn={pwwarn}; genkey={genkey}; keytype={keytype}; keybits={keybits}; "
            "keyfile={keyfile}; keycomment={keycomment}\n{root}{body}",
            name=str(a["name"]),
            state=a["state"],
            check="1" if ctx.check_mode else "0",
            uid="" if a.get("uid") is None else str(a["uid"]),
            nu=_bit(a["non_unique"]),
            group=str(a.get("group") or ""),
            groups=",".join(str(g) for g in groups or []),
            gg="1" if groups is not None else "",
            append=_bit(a["append"]),
            comment=str(a.get("comment") or ""),
            cs="1" if a.get("comment") is not None else "",
            home=str(a.get("home") or ""),
            shell=str(a.get("shell") or ""),
            ch=_bit(a["create_home"]),
            system=_bit(a["system"]),
            mh=_bit(a["move_home"]),
            up=a["update_password"],
            lock=_bit(a.get("password_lock")),
            remove=_bit(a["remove"]),
            force=_bit(a["force"]),
            expires=expires_day if expires is not None else "",
            expdays=expires_days if expires is not None else "",
            pwmin=_num(a.get("password_expire_min")),
            pwmax=_num(a.get("password_expire_max")),
            pwwarn=_num(a.get("password_expire_warn")),
            genkey="1" if a["generate_ssh_key"] and a["state"] == "present" else "",
            keytype=str(a["ssh_key_type"]),
            keybits="" if not a.get("ssh_key_bits") else str(a["ssh_key_bits"]),
            keyfile=str(a["ssh_key_file"]),
            # Ansible's default comment names the host it was made on
            keycomment=str(a.get("ssh_key_comment") or f"ansible-generated on {ctx.host.name}"),
            root=Raw(_ROOT),
            body=Raw(_USER_BODY),
        )
        secret = (str(a["password"]) if a.get("password") else "") + "\n"
        changed, values = _run(ctx, script, stdin=secret.encode())
        data: dict[str, Any] = {"name": a["name"], "state": a["state"]}
        if a["state"] == "absent":
            data.update(force=a["force"], remove=a["remove"])
        else:
            if "created" in values:
                data.update(system=a["system"], create_home=a["create_home"])
            else:
                data.update(append=a["append"], move_home=a["move_home"])
            if a.get("password"):
                data["password"] = "NOT_LOGGING_PASSWORD"
            entry = values.get("entry", "").split(":")
            if len(entry) >= 7:
                data.update(uid=int(entry[2]), group=int(entry[3]), comment=entry[4], home=entry[5], shell=entry[6])
            elif ctx.check_mode:
                pass  # would be created: nothing to show yet
            if groups is not None:
                data["groups"] = ",".join(str(g) for g in groups)
            for key in ("ssh_key_file", "ssh_public_key", "ssh_fingerprint"):
                if key in values:
                    data[key] = values[key]
        return ModuleResult(changed=bool(changed), data=data)


@register
class Group(Module):
    name = "group"
    args = {
        "name": Arg("str", required=True),
        "gid": Arg("int"),
        "state": Arg("str", default="present", choices=("absent", "present")),
        "force": Arg("bool", default=False),
        "system": Arg("bool", default=False),
        "local": Arg("bool", default=False),
        "non_unique": Arg("bool", default=False),
        "gid_min": Arg("int"),
        "gid_max": Arg("int"),
    }

    def run(self, ctx: TaskContext) -> ModuleResult:
        a = ctx.args
        script = sh(
            "name={name}; state={state}; check={check}; gid={gid}; nonunique={nu}; system={system}; force={force}\n{root}{body}",
            name=str(a["name"]),
            state=a["state"],
            check="1" if ctx.check_mode else "0",
            gid="" if a.get("gid") is None else str(a["gid"]),
            nu=_bit(a["non_unique"]),
            system=_bit(a["system"]),
            force=_bit(a["force"]),
            root=Raw(_ROOT),
            body=Raw(_GROUP_BODY),
        )
        changed, values = _run(ctx, script)
        data: dict[str, Any] = {"name": a["name"], "state": a["state"]}
        entry = values.get("entry", "").split(":")
        if a["state"] == "present":
            data["system"] = a["system"]
            if len(entry) >= 3:
                data["gid"] = int(entry[2])
            elif a.get("gid") is not None:
                data["gid"] = a["gid"]
        return ModuleResult(changed=bool(changed), data=data)


__all__ = ["Group", "User"]
