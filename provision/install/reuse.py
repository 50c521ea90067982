"""A rebuilt env that is file-for-file a generation already verified: checked in one interpreter
start instead of importing torch again, and given that generation's bytecode.

uv links every file of a package from its cache (`--link-mode hardlink`), so two generations
filled from the same cache share inodes: the same inode IS the same bytes. When the install's
fingerprint matches a kept generation that passed the full verification on this host (with the
same number of GPUs), the new generation is compared with it:

  - the same distributions at the same versions (importlib.metadata in both site-packages), and
  - every file under site-packages outside *.dist-info/ (uv writes RECORD per install) and
    __pycache__/ the same inode as there (pip's and setuptools' own files may be copies: ensurepip
    copies them into a `python -m venv` env, the first one on a host without uv);

then the earlier verification stands for this one (recorded as `verify.reused`), and its
__pycache__ files whose source is that same inode are hard-linked in (a .pyc is valid for a source
of the same mtime and size, which a shared inode has), so the first `import torch` does not
compile. Anything else (pip-built generations copy files; a package changed since; files edited)
gets the full verification, as before. What this cannot see: a file edited in place in the
generation, which with hardlinks is also an edit of uv's cache (uv's documented hardlink caveat).
"""

from __future__ import annotations

import json
from typing import Any

from provision.connection.base import Connection
from provision.shell import sh

# Run by the new generation's python (host Python 3.8+, stdlib only): argv = the verified
# generation's root, then its own root. Prints one JSON line.
_COMPARE = r"""
import json, os, sys, sysconfig
old_root, new_root = sys.argv[1:3]
new_sp = sysconfig.get_paths()["purelib"]
if not new_sp.startswith(new_root + "/"):
    print(json.dumps({"same": False, "why": "site-packages %s is not under %s" % (new_sp, new_root)}))
    sys.exit(0)
old_sp = old_root + new_sp[len(new_root):]
try:
    import importlib.metadata as md
    def dists(sp):
        return dict(sorted((d.metadata["Name"], d.version) for d in md.distributions(path=[sp])))
    old_d, new_d = dists(old_sp), dists(new_sp)
except Exception as exc:
    print(json.dumps({"same": False, "why": "listing failed: %s" % exc}))
    sys.exit(0)
out = {"packages": new_d, "files": 0, "differ": [], "pyc_linked": 0}
if old_d != new_d:
    out.update(same=False, why="packages differ from the verified generation")
    print(json.dumps(out))
    sys.exit(0)
# pip's own files (and setuptools' before 3.12): not the plan's, never imported by torch, same
# version (the listing above); a copy there is no difference in what was verified
SEEDS = {"pip", "setuptools", "pkg_resources", "_distutils_hack", "distutils-precedence.pth"}
def skip(rel):
    parts = rel.split("/")
    return "__pycache__" in parts or any(x.endswith(".dist-info") for x in parts[:-1])
seen = set()
cut = len(new_sp) + 1
for d, dirs, files in os.walk(new_sp):
    base = old_sp + d[len(new_sp):]
    for f in files:
        rel = (d + "/" + f)[cut:]
        if skip(rel):
            continue
        out["files"] += 1
        seen.add(rel)
        try:
            a, b = os.lstat(d + "/" + f), os.lstat(base + "/" + f)
            same = (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev) or (
                os.path.islink(d + "/" + f) and os.readlink(d + "/" + f) == os.readlink(base + "/" + f))
        except OSError:
            same = False
        if not same:
            if rel.split("/")[0] in SEEDS:  # copied by ensurepip in a `python -m venv` env
                out["seed_copies"] = out.get("seed_copies", 0) + 1
                continue
            out["differ"].append(rel)
            break
    if out["differ"]:
        break
cut = len(old_sp) + 1
pycs = []
for d, dirs, files in os.walk(old_sp):
    if out["differ"]:
        break
    if d.endswith("/__pycache__"):
        pycs += [(d, f) for f in files if f.endswith(".pyc")]
        continue
    for f in files:
        rel = (d + "/" + f)[cut:]
        if rel not in seen and not skip(rel):
            out["differ"].append(rel + " (only in the verified generation)")
            break
out["same"] = not out["differ"] and out["files"] > 0
for d, f in pycs if out["same"] else []:
    # a .pyc is valid for a source of the same mtime and size: the same inode is
    rel_dir = d[cut:] if len(d) > cut else ""
    src = os.path.dirname(rel_dir) + "/" + f.split(".")[0] + ".py"
    try:
        a, b = os.stat(new_sp + "/" + src.lstrip("/")), os.stat(old_sp + "/" + src.lstrip("/"))
        if (a.st_ino, a.st_dev) != (b.st_ino, b.st_dev):
            continue
        target = new_sp + "/" + rel_dir
        if not os.path.isdir(target):
            os.mkdir(target)
        os.link(d + "/" + f, target + "/" + f)
        out["pyc_linked"] += 1
    except OSError:
        pass
print(json.dumps(out))
"""


def verified_twins(
    connection: Connection, generations: list[str], fingerprint: str, gpus: int
) -> list[tuple[str, dict[str, Any]]]:
    """Kept generations whose manifest has `fingerprint`, a recorded torch verification and the
    same GPU count; newest first. One round trip."""
    if not generations:
        return []
    script = sh(
        'for g in {gens}; do printf "gen=%s\\n" "$g"; cat "$g"/provision-env.json 2>/dev/null; '
        "echo; done",
        gens=list(generations),
    )
    result = connection.run(script, timeout=60)
    twins: list[tuple[str, dict[str, Any]]] = []
    current = None
    for line in result.stdout.splitlines():
        if line.startswith("gen="):
            current = line[4:]
            continue
        if not current or not line.strip():
            continue
        try:
            manifest = json.loads(line)
        except ValueError:
            continue
        if (
            manifest.get("fingerprint") == fingerprint
            and (manifest.get("verify") or {}).get("torch")
            and manifest.get("gpus") == gpus
        ):
            twins.append((current, manifest))
        current = None
    return sorted(twins, key=lambda t: t[0], reverse=True)


def compare(connection: Connection, python: str, verified: str, generation: str) -> dict[str, Any]:
    """Compare `generation` with the verified one and link its bytecode in (see the module
    docstring). {"same": bool, "files", "differ", "packages", "pyc_linked", "why"?}."""
    result = connection.run(
        sh("{python} -c {code} {old} {new}", python=python, code=_COMPARE, old=verified,
           new=generation),  # fmt: skip
        timeout=300,
    )
    try:
        return dict(json.loads((result.stdout.strip().splitlines() or ["{}"])[-1]))
    except ValueError:
        detail = (result.stderr.strip() or f"exit {result.exit_code}").splitlines()[-1:]
        return {"same": False, "why": f"comparison failed: {detail[0] if detail else '?'}"}


def reused_verification(
    connection: Connection,
    generations: list[str],
    fingerprint: str,
    gpus: int,
    python: str,
    generation: str,
) -> dict[str, Any] | None:
    """The verification data for `generation` when it is file-for-file the newest verified twin
    (then its bytecode is linked in too); None: run the full verification."""
    twins = verified_twins(connection, [g for g in generations if g != generation], fingerprint, gpus)
    if not twins:
        return None
    twin, manifest = twins[0]
    found = compare(connection, python, twin, generation)
    if not found.get("same"):
        return None
    torch = dict((manifest.get("verify") or {}).get("torch") or {})
    return {
        "ok": True,
        "problems": [],
        "torch": torch,
        "devices": list((manifest.get("verify") or {}).get("devices") or []),
        "reused": {"from": twin, "files": found.get("files"), "pyc_linked": found.get("pyc_linked")},
        "packages": dict(found.get("packages") or {}),  # the new generation's, for the result
    }
