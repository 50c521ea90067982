"""Path checks for dataset sources: what may become a sample's relative path.

File names travel in the JSON request's manifest, never on a command line, so a name
like `$(rm -rf ~)` is only ever data. What these checks refuse is a name that would point outside
the source: an absolute archive member, a `..` component, a symlink leaving the source root.
"""

import os


class UnsafePathError(ValueError):
    """A source entry points outside the source; the message names it and what to do."""

    kind = "unsafe_path"


def member_relpath(name, where):
    """An archive member name as a clean relative path ("./a/b" -> "a/b"), or UnsafePathError.

    Backslashes are ordinary characters on Linux and stay as they are.
    """
    if name.startswith("/"):
        raise UnsafePathError(
            "%s: member %r has an absolute path; refusing the archive (members must be relative "
            "to the archive root)" % (where, name)
        )
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafePathError(
            "%s: member %r has a '..' component that would leave the archive root; refusing the "
            "archive" % (where, name)
        )
    if not parts:
        raise UnsafePathError("%s: member with an empty name %r" % (where, name))
    if len(parts[0]) == 2 and parts[0][1] == ":" and parts[0][0].isalpha():
        raise UnsafePathError("%s: member %r has a drive-letter path" % (where, name))
    return "/".join(parts)


def link_target(member_path, target, where, hard=False):
    """Resolve an archive link member to the relative path it points at, inside the archive.

    Symlink targets are relative to the member's folder; hard-link targets to the archive root.
    """
    if target.startswith("/"):
        raise UnsafePathError(
            "%s: link %r points at the absolute path %r, outside the archive; refusing the archive"
            % (where, member_path, target)
        )
    base = [] if hard else member_path.split("/")[:-1]
    parts = list(base)
    for p in target.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if not parts:
                raise UnsafePathError(
                    "%s: link %r -> %r leaves the archive root; refusing the archive"
                    % (where, member_path, target)
                )
            parts.pop()
        else:
            parts.append(p)
    if not parts:
        raise UnsafePathError(
            "%s: link %r -> %r points at the archive root" % (where, member_path, target)
        )
    return "/".join(parts)


def inside(root_real, path):
    """True when the resolved `path` is `root_real` or below it."""
    real = os.path.realpath(path)
    return real == root_real or real.startswith(root_real.rstrip("/") + "/")


def check_utf8(relpath, where):
    """Names must be valid UTF-8: they are stored as UTF-8 and compared across machines."""
    try:
        relpath.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafePathError(
            "%s: file name %r is not valid UTF-8; rename it (e.g. with convmv) and rerun"
            % (where, relpath)
        ) from None
    return relpath
