"""The run's code on the host: a folder plus a content-hash manifest, so the next run sends only
the files that changed (by content) and removes the ones that went away.

The manifest (.provision-code.json in the folder) maps each path to [sha256, size, mtime_ns]; a
file changed on the host since (size or mtime differs) is dropped from it, so it is sent again.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

from provision.agent.datasets.safety import member_relpath
from provision.agent.datasets.tarstream import read_members

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, Dict, List

MANIFEST = ".provision-code.json"


def load_manifest(dest: str) -> Dict[str, List[Any]]:
    try:
        with open(os.path.join(dest, MANIFEST)) as f:
            files = json.load(f).get("files") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    valid = {}
    for rel, entry in files.items():
        try:
            st = os.stat(os.path.join(dest, rel))
        except OSError:
            continue
        if [st.st_size, st.st_mtime_ns] == list(entry[1:3]):
            valid[rel] = entry
    return valid


def have(dest: str) -> Dict[str, str]:
    """path -> sha256 of what the host already holds, unchanged."""
    return dict((rel, entry[0]) for rel, entry in load_manifest(dest).items())


def apply(dest: str, stream: IO[bytes], files: Dict[str, str], executable: List[str]) -> Dict[str, int]:
    """Write the tar's members into `dest`, remove what `files` (the full new manifest: path ->
    sha256) no longer lists, record the manifest. Returns counts."""
    os.makedirs(dest, exist_ok=True)
    old = load_manifest(dest)
    wanted = dict((member_relpath(rel, "code manifest"), sha) for rel, sha in files.items())
    execs = set(executable)
    written = 0
    for name, data in read_members(stream):
        rel = member_relpath(name, "code stream")
        if rel not in wanted:
            raise ValueError("code stream: %r is not in the manifest the controller sent" % rel)
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = target + ".provision-tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o755 if rel in execs else 0o644)
        os.rename(tmp, target)
        written += 1
    removed = 0
    for rel in old:
        if rel not in wanted:
            try:
                os.unlink(os.path.join(dest, rel))
                removed += 1
            except OSError:
                pass
    manifest = {}
    for rel, sha in wanted.items():
        try:
            st = os.stat(os.path.join(dest, rel))
        except OSError:
            raise ValueError("code folder %s lacks %r after the transfer (send it again)" % (dest, rel)) from None
        manifest[rel] = [sha, st.st_size, st.st_mtime_ns]
    fd, tmp = tempfile.mkstemp(prefix=MANIFEST + ".tmp", dir=dest)
    with os.fdopen(fd, "w") as f:
        json.dump({"files": manifest}, f)
    os.rename(tmp, os.path.join(dest, MANIFEST))
    return {"sent": written, "kept": len(wanted) - written, "removed": removed, "files": len(wanted)}


def copy_code(src: str, dst: str) -> None:
    """The run's own copy of the synced code (a later sync must not change a running job)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(MANIFEST, MANIFEST + ".tmp*"), symlinks=True)
