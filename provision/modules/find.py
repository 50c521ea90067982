"""`find`: Ansible's find, walked on the host by its python3 in one round trip.

The walk, filters and the shape of each entry follow ansible/modules/find.py (glob or regex
`patterns`/`excludes` on the base name, `contains`, `age`, `size`, `depth`, `hidden`, `limit`,
`file_type`), so registered results compare equal with Ansible's.
"""

from __future__ import annotations

import re
from typing import Any

from provision.modules._hostfile import run_host_python
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register

# Runs on the host's Python 3.8+: request JSON on stdin, MARKER (argv[1]) then one JSON line.
_FIND_PY = r"""
import fnmatch, grp, hashlib, json, os, pwd, re, stat, sys, time
p = json.load(sys.stdin)
def pfilter(f, pats, excl, rx):
    m = (lambda pat: re.compile(pat).match(f)) if rx else (lambda pat: fnmatch.fnmatch(f, pat))
    if not any(m(x) for x in pats):
        return False
    return not any(m(x) for x in (excl or []))
def info(st):
    try: pw = pwd.getpwuid(st.st_uid).pw_name
    except Exception: pw = ""
    try: gr = grp.getgrgid(st.st_gid).gr_name
    except Exception: gr = ""
    m = st.st_mode
    d = {"mode": "%04o" % stat.S_IMODE(m), "isdir": stat.S_ISDIR(m), "ischr": stat.S_ISCHR(m),
         "isblk": stat.S_ISBLK(m), "isreg": stat.S_ISREG(m), "isfifo": stat.S_ISFIFO(m),
         "islnk": stat.S_ISLNK(m), "issock": stat.S_ISSOCK(m), "uid": st.st_uid, "gid": st.st_gid,
         "size": st.st_size, "inode": st.st_ino, "dev": st.st_dev, "nlink": st.st_nlink,
         "atime": st.st_atime, "mtime": st.st_mtime, "ctime": st.st_ctime, "gr_name": gr, "pw_name": pw}
    for who, bits in (("usr", (stat.S_IWUSR, stat.S_IRUSR, stat.S_IXUSR)),
                      ("grp", (stat.S_IWGRP, stat.S_IRGRP, stat.S_IXGRP)),
                      ("oth", (stat.S_IWOTH, stat.S_IROTH, stat.S_IXOTH))):
        for k, b in zip("wrx", bits): d[k + who] = bool(m & b)
    d["isuid"] = bool(m & stat.S_ISUID); d["isgid"] = bool(m & stat.S_ISGID)
    return d
def agef(st, now):
    a = p["age"]
    if a is None: return True
    t = now - getattr(st, "st_" + p["age_stamp"])
    return t >= abs(a) if a >= 0 else t <= abs(a)
def sizef(st):
    s = p["size"]
    if s is None: return True
    return st.st_size >= abs(s) if s >= 0 else st.st_size <= abs(s)
def contf(name):
    if p["contains"] is None: return True
    prog = re.compile(p["contains"])
    with open(name, encoding=p["encoding"]) as f:
        if p["read_whole_file"]: return bool(prog.search(f.read()))
        return any(prog.match(line) for line in f)
def modef(st):
    want = p["mode"]
    if want is None: return True
    have = stat.S_IMODE(st.st_mode)
    return have == want if p["exact_mode"] else (have & want) == want
def digest(name):
    h = hashlib.new(p["checksum_algorithm"])
    with open(name, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""): h.update(chunk)
    return h.hexdigest()
files, skipped, looked, msg, warned, now = [], {}, 0, "All paths examined", False, time.time()
def onerr(e): skipped[e.filename] = str(e)
for npath in p["paths"]:
    npath = os.path.expanduser(npath)
    try:
        if not os.path.isdir(npath): raise Exception("'%s' is not a directory" % npath)
        for root, dirs, names in os.walk(npath, onerror=onerr, followlinks=p["follow"], topdown=True):
            looked += len(names) + len(dirs)
            for obj in names + dirs:
                full = os.path.normpath(os.path.join(root, obj))
                if p["depth"]:
                    w = npath.rstrip(os.sep) + os.sep
                    if full.count(os.sep) - w.count(os.sep) + 1 > p["depth"]:
                        del dirs[:]; continue
                if os.path.basename(full).startswith(".") and not p["hidden"]: continue
                try: st = os.lstat(full)
                except OSError as e: skipped[full] = str(e); warned = True; continue
                if not (pfilter(obj, p["patterns"], p["excludes"], p["use_regex"]) and agef(st, now) and modef(st)):
                    continue
                r = {"path": full}; kind = p["file_type"]; m = st.st_mode; ok = False
                if kind == "any": ok = sizef(st) if stat.S_ISREG(m) else True
                elif kind == "directory": ok = stat.S_ISDIR(m)
                elif kind == "file": ok = stat.S_ISREG(m) and sizef(st) and contf(full)
                elif kind == "link": ok = stat.S_ISLNK(m)
                if ok:
                    r.update(info(st))
                    if stat.S_ISREG(m) and p["get_checksum"] and kind in ("any", "file"): r["checksum"] = digest(full)
                    files.append(r)
                if len(files) == p["limit"]: msg = "Limit of matches reached"; break
            if not p["recurse"] or len(files) == p["limit"]: break
    except Exception as e:
        skipped[npath] = str(e); warned = True
if warned: msg = "Not all paths examined, check warnings for details"
sys.stdout.write(sys.argv[1] + "\n" + json.dumps({"files": files, "msg": msg, "matched": len(files),
    "examined": looked, "skipped_paths": skipped}) + "\n")
"""

_UNITS_AGE = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_UNITS_SIZE = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def _amount(value: str | None, units: dict[str, int], what: str) -> int | None:
    if value is None:
        return None
    m = re.match(r"^(-?\d+)([a-z])?$", str(value).lower())
    if not m or (m.group(2) and m.group(2) not in units):
        raise ModuleFailure(f"failed to process {what}: {value!r} (e.g. {'4w, -2d' if what == 'age' else '10m, -1k'})")
    return int(m.group(1)) * units.get(m.group(2) or "", 1)


@register
class Find(Module):
    name = "find"
    args = {
        "paths": Arg("list", required=True, aliases=("name", "path"), elements="path"),
        "patterns": Arg("list", default=[], aliases=("pattern",), elements="str"),
        "excludes": Arg("list", aliases=("exclude",), elements="str"),
        "contains": Arg("str"),
        "read_whole_file": Arg("bool", default=False),
        "file_type": Arg("str", default="file", choices=("any", "directory", "file", "link")),
        "age": Arg("str"),
        "age_stamp": Arg("str", default="mtime", choices=("atime", "ctime", "mtime")),
        "size": Arg("str"),
        "recurse": Arg("bool", default=False),
        "hidden": Arg("bool", default=False),
        "follow": Arg("bool", default=False),
        "get_checksum": Arg("bool", default=False),
        "checksum_algorithm": Arg(
            "str",
            default="sha1",
            choices=("md5", "sha1", "sha224", "sha256", "sha384", "sha512"),
            aliases=("checksum", "checksum_algo"),
        ),
        "use_regex": Arg("bool", default=False),
        "depth": Arg("int"),
        "mode": Arg("mode"),
        "exact_mode": Arg("bool", default=True),
        "encoding": Arg("str"),
        "limit": Arg("int"),
    }

    def check_args(self, args: dict[str, Any]) -> list[str]:
        errors = []
        if args.get("limit") is not None and args["limit"] <= 0:
            errors.append(f"limit cannot be {args['limit']} (use None for unlimited)")
        if args.get("use_regex"):
            for pat in [*(args.get("patterns") or []), *(args.get("excludes") or [])]:
                try:
                    re.compile(pat)
                except re.error as exc:
                    errors.append(f"pattern {pat!r} is not a valid regular expression: {exc}")
        return errors

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        mode = args.get("mode")
        if mode is not None and not str(mode).isdigit():
            raise ModuleFailure(f"find: mode must be octal (like '0644'), got {mode!r}")
        request = {
            "paths": [str(p) for p in args["paths"]],
            "patterns": args["patterns"] or ([".*"] if args["use_regex"] else ["*"]),
            "excludes": args.get("excludes"),
            "contains": args.get("contains"),
            "read_whole_file": args["read_whole_file"],
            "file_type": args["file_type"],
            "age": _amount(args.get("age"), _UNITS_AGE, "age"),
            "age_stamp": args["age_stamp"],
            "size": _amount(args.get("size"), _UNITS_SIZE, "size"),
            "recurse": args["recurse"],
            "hidden": args["hidden"],
            "follow": args["follow"],
            "get_checksum": args["get_checksum"],
            "checksum_algorithm": args["checksum_algorithm"],
            "use_regex": args["use_regex"],
            "depth": args.get("depth"),
            "mode": int(str(mode), 8) if mode is not None else None,
            "exact_mode": args["exact_mode"],
            "encoding": args.get("encoding"),
            "limit": args.get("limit"),
        }
        answer = run_host_python(ctx, _FIND_PY, request, what="find")
        return ModuleResult(msg=answer.pop("msg", ""), data=answer)


__all__ = ["Find"]
