"""`package_facts`: the host's installed packages as `ansible_facts.packages`, as Ansible's module
gives them (name -> list of installed versions, each with its manager as `source`).

One round trip: the host's Python reads the request on stdin and asks each manager in turn —
apt through python3-apt, rpm through the rpm bindings (moving to the system Python that has
them, as Ansible respawns), apk through `apk info -v` — until one (strategy `first`) or all
(`all`) answered with packages. The fields per manager are Ansible's.
"""

from __future__ import annotations

import json
from typing import Any

from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.shell import sh

MANAGERS = ("apt", "rpm", "apk")
ALIASES = {"apt-get": "apt", "dnf": "rpm", "dnf5": "rpm", "yum": "rpm", "zypper": "rpm"}

# Runs on the host's Python (3.6+); request on stdin; one JSON line out.
_SCRIPT = r"""
import json, os, subprocess, sys
req = json.loads(sys.stdin.readline())
SYSTEM = {"apt": ["/usr/bin/python3"], "rpm": ["/usr/libexec/platform-python", "/usr/bin/python3"]}
def txt(v):
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
def lib(name):
    try:
        return __import__(name)
    except ImportError:
        return None
def elsewhere(mgr):
    # the library lives in the system's Python only: ask that one (Ansible respawns there)
    for py in SYSTEM.get(mgr, []):
        if os.path.realpath(py) == os.path.realpath(sys.executable) or not os.access(py, os.X_OK):
            continue
        done = subprocess.run([py, "-c", CODE], input=json.dumps({"managers": [mgr], "strategy": "first", "inner": 1}) + "\n",
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        try:
            out = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            continue
        if out.get("packages"):
            return out["packages"]
    return None
def apt_packages():
    apt = lib("apt")
    if apt is None:
        return None
    cache = apt.Cache()
    out = {}
    for name in [k for k in cache.keys() if cache[k].is_installed]:
        v = cache[name].installed
        out.setdefault(name, []).append({"name": name, "version": v.version, "arch": v.architecture,
                                         "category": v.section, "origin": v.origins[0].origin, "source": "apt"})
    return out
def rpm_packages():
    rpm = lib("rpm")
    if rpm is None:
        return None
    out = {}
    for h in rpm.TransactionSet().dbMatch():
        d = {"name": txt(h[rpm.RPMTAG_NAME]), "version": txt(h[rpm.RPMTAG_VERSION]), "release": txt(h[rpm.RPMTAG_RELEASE]),
             "epoch": txt(h[rpm.RPMTAG_EPOCH]), "arch": txt(h[rpm.RPMTAG_ARCH]), "source": "rpm"}
        out.setdefault(d["name"], []).append(d)
    return out
def apk_packages():
    try:
        done = subprocess.run(["apk", "info", "-v"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    except OSError:
        return None
    if done.returncode != 0:
        raise RuntimeError("Unable to list packages rc=%s : %s" % (done.returncode, done.stderr))
    out = {}
    for line in done.stdout.splitlines():
        nvr = line.rsplit("-", 2)
        d = {"name": nvr[0], "version": nvr[1], "release": nvr[2]} if len(nvr) == 3 else {"name": line, "version": "", "release": ""}
        d["source"] = "apk"
        out.setdefault(d["name"], []).append(d)
    return out
ASK = {"apt": apt_packages, "rpm": rpm_packages, "apk": apk_packages}
packages, warnings, found = {}, [], 0
for mgr in req["managers"]:
    if req["strategy"] == "first" and found:
        break
    try:
        got = ASK[mgr]()
        if got is None and not req.get("inner"):
            got = elsewhere(mgr)
    except Exception as e:
        warnings.append("Failed to retrieve packages with %s: %s" % (mgr, e))
        continue
    if got is None:
        continue
    if got:
        found += 1
        for k, v in got.items():
            packages.setdefault(k, []).extend(v)
    else:
        warnings.append('Found "%s" but no associated packages' % mgr)
print(json.dumps({"packages": packages if found else None, "warnings": warnings}))
"""


@register
class PackageFacts(Module):
    name = "package_facts"
    facts_hold_no_secrets = True
    args = {
        "manager": Arg("list", default=["auto"], elements="str"),
        "strategy": Arg("str", default="first", choices=("first", "all")),
    }

    def check_args(self, args: dict[str, Any]) -> list[str]:
        asked = [ALIASES.get(str(m).lower(), str(m).lower()) for m in args.get("manager") or []]
        bad = [m for m in asked if m != "auto" and m not in MANAGERS]
        return [f"Unsupported package managers requested: {', '.join(bad)}"] if bad else []

    def run(self, ctx: TaskContext) -> ModuleResult:
        asked = [ALIASES.get(str(m).lower(), str(m).lower()) for m in ctx.args["manager"]]
        if "auto" in asked:
            asked = [m for m in asked if m != "auto"] + list(MANAGERS)
        managers = list(dict.fromkeys(asked))
        script = sh(
            'py={py}\ncommand -v "$py" >/dev/null 2>&1 || [ -x "$py" ] || '
            '{ echo "@@error no Python interpreter $py on the host"; exit 1; }\n'
            'CODE={code} exec "$py" -c "import os; CODE = os.environ[\'CODE\']; exec(CODE)"\n',
            py=ctx.host.python or "python3",
            code=_SCRIPT,
        )
        request = {"managers": managers, "strategy": ctx.args["strategy"]}
        done = ctx.run(script, stdin=(json.dumps(request) + "\n").encode())
        line = next((ln for ln in reversed(done.stdout.splitlines()) if ln.startswith("{")), None)
        if line is None:
            raise ModuleFailure(f"package_facts: no answer from the host's Python: {done.stderr.strip()[-400:]}")
        out = json.loads(line)
        data = {"warnings": out["warnings"]} if out.get("warnings") else {}
        if out.get("packages") is None:
            return ModuleResult(
                failed=True,
                msg="Could not detect a supported package manager from the following list: "
                f"{managers}, or the required Python library is not installed. Check warnings for details.",
                data=data,
            )
        return ModuleResult(changed=False, facts={"packages": out["packages"]}, data=data)
