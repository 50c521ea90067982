"""Where bundled playbooks/templates and local state live."""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def bundle_dir(kind: str) -> Path:
    """`playbooks` or `templates`: the repo's top-level folder in a checkout, else the copy in the wheel."""
    checkout = _PACKAGE_DIR.parent / kind
    if checkout.is_dir():
        return checkout
    return _PACKAGE_DIR / "_bundled" / kind


def state_dir() -> Path:
    """Controller-side state: project known_hosts, report history, wheel cache."""
    base = os.environ.get("PROVISION_HOME") or os.path.join(
        os.environ.get("XDG_STATE_HOME", os.path.expanduser("~/.local/state")), "provision"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_atomic(path: str | os.PathLike[str], data: bytes | str, *, mode: int | None = None) -> Path:
    """Write a whole file or nothing: a temp file in the same folder, fsync, then rename over the
    target. A crash or a full disk mid-write leaves the old file (or none), never a truncated
    one that a later read takes for complete (reports, lock files, known_hosts)."""
    import tempfile

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        elif target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # what open() would have made, not mkstemp's 0600
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


class OutsideDestination(ValueError):
    """A path a host reported would put a controller-side file outside its destination."""


def under_destination(root: str | os.PathLike[str], relative: str, *, host: str, reported: str) -> Path:
    """`root`/`relative` where `relative` comes from what a host reported (issue 20): resolved
    (`..` and any symlink on the way followed as the kernel would) and checked to stay inside
    `root`, else OutsideDestination naming the host, the reported path and the destination.
    Text normalisation alone is not enough: `a/../../x` and a symlinked folder both get out."""
    base = Path(os.path.realpath(root))
    if "\x00" in relative:
        raise OutsideDestination(f"{host} reported the path {reported!r}, which holds a NUL byte: refusing to "
                                 f"write it under {base}")
    candidate = Path(os.path.normpath(os.path.join(root, relative.lstrip("/"))))
    resolved = Path(os.path.realpath(os.path.join(base, relative.lstrip("/"))))
    if base not in resolved.parents:
        raise OutsideDestination(
            f"{host} reported the path {reported!r}: the local copy would be {resolved}, outside the "
            f"destination {base}; refusing to write it (a host's reply or its $HOME is not to be trusted)")
    # the caller's spelling of the path when it names the same file (Ansible's `dest` field)
    return candidate if os.path.realpath(candidate) == str(resolved) else resolved
