"""Mounts: `mount_facts` (ansible.builtin, read-only) and `mount` (ansible.posix.mount semantics).

mount_facts reads /proc/mounts (`dynamic`) and /etc/fstab (`static`) with the host's python3 and
returns `ansible_facts.mount_points` keyed by mount point, with sizes from statvfs — what a
container can always do. `mount` keeps the fstab line (`present`/`absent`) and mounts/unmounts
(`mounted`/`unmounted`/`remounted`/`ephemeral`); a container without CAP_SYS_ADMIN, as rentals
are, gets a message that says so instead of mount(8)'s "permission denied".
"""

from __future__ import annotations

from typing import Any

from provision.modules._hostfile import content_diff, read_host_file, run_host_python
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.modules.files import parse_report, put_content
from provision.shell import Raw, sh

_FACTS_PY = r"""
import fnmatch, json, os, sys
q = json.load(sys.stdin)
def unescape(s):
    return s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
def entries(path):
    try:
        with open(path) as f: lines = f.read().splitlines()
    except OSError: return []
    out = []
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"): continue
        f = line.split()
        if len(f) < 4: continue
        out.append((line, unescape(f[0]), unescape(f[1]), f[2], f[3], int(f[4]) if len(f) > 4 and f[4].isdigit() else 0,
                    int(f[5]) if len(f) > 5 and f[5].isdigit() else 0))
    return out
sources = []
for s in q["sources"]:
    if s in ("all", "dynamic"): sources.append("/proc/mounts")
    if s in ("all", "static"): sources.append("/etc/fstab")
    if s not in ("all", "dynamic", "static"): sources.append(s)
points, aggregate = {}, []
for src in dict.fromkeys(sources):
    for line, dev, mnt, fstype, opts, dump, passno in entries(src):
        if q["devices"] and not any(fnmatch.fnmatch(dev, p) for p in q["devices"]): continue
        if q["fstypes"] and not any(fnmatch.fnmatch(fstype, p) for p in q["fstypes"]): continue
        info = {"ansible_context": {"source": src, "source_data": line}, "device": dev, "mount": mnt,
                "fstype": fstype, "options": opts, "dump": dump, "passno": passno, "uuid": None}
        if dev.startswith("UUID="): info["uuid"] = dev[5:]
        try:
            st = os.statvfs(mnt)
            info.update(block_size=st.f_frsize, block_total=st.f_blocks, block_available=st.f_bavail,
                        block_used=st.f_blocks - st.f_bfree, inode_total=st.f_files, inode_available=st.f_favail,
                        inode_used=st.f_files - st.f_ffree, size_total=st.f_blocks * st.f_frsize,
                        size_available=st.f_bavail * st.f_frsize)
        except OSError:
            for k in ("block_size", "block_total", "block_available", "block_used", "inode_total",
                      "inode_available", "inode_used", "size_total", "size_available"): info[k] = 0
        if mnt in points: aggregate.append(points[mnt])
        points[mnt] = info
facts = {"mount_points": points}
if q["include_aggregate_mounts"]: facts["aggregate_mounts"] = aggregate
sys.stdout.write(sys.argv[1] + "\n" + json.dumps({"ansible_facts": facts}) + "\n")
"""


@register
class MountFacts(Module):
    name = "mount_facts"
    args = {
        "devices": Arg("list", elements="str"),
        "fstypes": Arg("list", elements="str"),
        "sources": Arg("list", elements="str", default=["all"]),
        "mount_binary": Arg("raw"),
        "timeout": Arg("float"),
        "on_timeout": Arg("str", default="error", choices=("error", "warn", "ignore")),
        "include_aggregate_mounts": Arg("bool"),
    }

    def run(self, ctx: TaskContext) -> ModuleResult:
        a = ctx.args
        request = {
            "devices": a.get("devices") or [],
            "fstypes": a.get("fstypes") or [],
            "sources": a.get("sources") or ["all"],
            "include_aggregate_mounts": bool(a.get("include_aggregate_mounts")),
        }
        answer = run_host_python(ctx, _FACTS_PY, request, timeout=a.get("timeout"), what="mount_facts")
        return ModuleResult(facts=answer.get("ansible_facts", {}))


def _escape(value: str) -> str:
    return value.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011")


def edit_fstab(text: str, want: dict[str, str] | None, path: str) -> str:
    """The fstab with `path`'s line replaced by `want` (first one kept, in place) or removed."""
    out, done = [], False
    for line in text.splitlines():
        fields = line.split()
        if line.lstrip().startswith("#") or len(fields) < 2 or fields[1] != _escape(path):
            out.append(line)
            continue
        if want is not None and not done:
            cur = fields + ["0"] * (6 - len(fields))
            new = [want["src"], want["path"], want["fstype"], want["opts"], want["dump"], want["passno"]]
            out.append(line if cur[:6] == new else " ".join(new))
            done = True
    if want is not None and not done:
        out.append(" ".join([want["src"], want["path"], want["fstype"], want["opts"], want["dump"], want["passno"]]))
    return "\n".join(out) + "\n" if out else ""


_MOUNT_STATE = r"""
if awk -v p="$mnt" '$2 == p { found = 1 } END { exit !found }' /proc/mounts; then echo "@@mounted 1"; fi
cap=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
# CAP_SYS_ADMIN is bit 21
if [ -n "$cap" ] && [ $(( 0x$cap >> 21 & 1 )) = 1 ]; then echo "@@can_mount 1"; fi
"""


@register
class Mount(Module):
    name = "mount"
    aliases = ("ansible.posix.mount",)
    args = {
        "path": Arg("path", required=True, aliases=("name",)),
        "src": Arg("str"),
        "fstype": Arg("str"),
        "opts": Arg("str"),
        "dump": Arg("str", default="0"),
        "passno": Arg("str", default="0"),
        "state": Arg("str", required=True, choices=("absent", "absent_from_fstab", "mounted", "present", "unmounted", "remounted", "ephemeral")),
        "fstab": Arg("str", default="/etc/fstab"),
        "boot": Arg("bool", default=True),
        "backup": Arg("bool", default=False),
    }

    def check_args(self, args: dict[str, Any]) -> list[str]:
        if args.get("state") in ("mounted", "present", "ephemeral") and not (args.get("src") and args.get("fstype")):
            return [f"state={args.get('state')} needs src and fstype"]
        return []

    def run(self, ctx: TaskContext) -> ModuleResult:
        a = ctx.args
        mnt, state = str(a["path"]).rstrip("/") or "/", a["state"]
        opts = a.get("opts") or "defaults"
        if not a["boot"]:
            opts = ",".join([o for o in opts.split(",") if o != "defaults"] + ["noauto"])
        fstab = str(a["fstab"])
        changed = False
        out = ModuleResult(data={"name": mnt, "src": a.get("src"), "fstype": a.get("fstype"), "opts": opts, "dump": a["dump"], "passno": a["passno"], "fstab": fstab})  # fmt: skip
        if state in ("present", "mounted", "absent", "absent_from_fstab"):
            current = read_host_file(ctx, fstab)
            text = (current.data or b"").decode("utf-8", "surrogateescape")
            want = None
            if state in ("present", "mounted"):
                want = {"src": _escape(str(a["src"])), "path": _escape(mnt), "fstype": str(a["fstype"]), "opts": opts, "dump": str(a["dump"]), "passno": str(a["passno"])}  # fmt: skip
            new = edit_fstab(text, want, mnt)
            if new != text:
                changed = True
                if ctx.diff:
                    out.diff = content_diff(current.data, new.encode(), fstab)
                if not ctx.check_mode:
                    sub = TaskContext(**{**ctx.__dict__, "args": {"backup": a["backup"]}})
                    put_content(sub, new.encode(), current.path, expect_old=current.checksum)
        if state == "present" or state == "absent_from_fstab":
            out.changed = changed
            return out
        probe = parse_report(ctx.run(sh("mnt={m}\n{body}", m=mnt, body=Raw(_MOUNT_STATE))).stdout)
        mounted = "mounted" in probe.values
        action: list[str] | None = None
        if state in ("mounted", "ephemeral") and not mounted:
            action = ["mount", "-t", str(a["fstype"]), "-o", opts, str(a["src"]), mnt]
        elif state in ("unmounted", "absent") and mounted:
            action = ["umount", mnt]
        elif state == "remounted" and mounted:
            action = ["mount", "-o", f"remount,{a.get('opts')}" if a.get("opts") else "remount", mnt]
        elif state == "remounted":
            raise ModuleFailure(f"{mnt} is not mounted: nothing to remount")
        if action is not None:
            changed = True
            if "can_mount" not in probe.values:
                raise ModuleFailure(
                    f"cannot {action[0]} {mnt}: this host lacks CAP_SYS_ADMIN (a container, as most rented GPU "
                    "servers are, can't mount or unmount); the fstab entry is "
                    f"{'kept' if state == 'mounted' else 'handled'} but takes effect only where mounting is allowed. "
                    "Use mount_facts to see what is mounted."
                )
            if not ctx.check_mode:
                prep = sh("mkdir -p -- {m} && ", m=mnt) if action[0] == "mount" and state != "remounted" else Raw("")
                done = ctx.run(sh("{prep}{argv}", prep=prep, argv=action))
                if not done.ok:
                    raise ModuleFailure(f"{' '.join(action[:1])} {mnt} failed: {done.stderr.strip() or done.stdout.strip()}")
        out.changed = changed
        return out


__all__ = ["Mount", "MountFacts", "edit_fstab"]
