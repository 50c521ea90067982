"""py-lmdb on the host: import it, or use the copy the controller shipped.

Many hosts' Pythons lack py-lmdb (Debian's python3, a fresh conda base) and some cannot reach a
package index. So the controller may upload its own, matching, wheel-installed lmdb package as
`~/.cache/provision/pylib/<tag>.zip` (tag = cpXY-<machine>); this module unpacks it once beside
the zip (an extension module cannot be imported from inside a zip) and puts it on sys.path.
"""

import hashlib
import os
import sys

# platform, shutil and zipfile are imported where used: a host whose Python has py-lmdb (the
# common case) never needs them, and every stage call's start-up counts

PYLIB = os.path.join("~", ".cache", "provision", "pylib")


class MissingDependency(ImportError):
    kind = "missing_lmdb"


def python_tag():
    """What a shipped lmdb must match: CPython minor version and machine."""
    import platform

    impl = (
        "cp"
        if platform.python_implementation() == "CPython"
        else platform.python_implementation().lower()
    )
    return "%s%d%d-%s" % (impl, sys.version_info[0], sys.version_info[1], platform.machine())


def python_info():
    import platform

    return {
        "executable": sys.executable,
        "version": platform.python_version(),
        "tag": python_tag(),
        "libc": "-".join(platform.libc_ver()),
    }


def shipped_zip(package=None, tag=None):
    """Where the controller puts a package it ships for the Python `tag` (this one's by
    default): <tag>.zip for py-lmdb (the first one shipped, its name kept), <tag>-<package>.zip
    for any other (zstandard)."""
    suffix = "" if package in (None, "lmdb") else "-" + package
    return os.path.join(PYLIB, (tag or python_tag()) + suffix + ".zip")


def _shipped_site(package=None):
    zip_path = os.path.expanduser(shipped_zip(package))
    base = zip_path[: -len(".zip")]
    site = os.path.join(base, "site")
    if not os.path.isfile(zip_path):
        return site if os.path.isdir(site) else None
    with open(zip_path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    marker = os.path.join(site, ".provision-zip-sha256")
    try:
        with open(marker) as fh:
            if fh.read().strip() == digest:
                return site
    except OSError:
        pass
    import shutil
    import tempfile
    import zipfile

    if not os.path.isdir(base):  # the first shipment: only the .zip beside it so far
        os.makedirs(base, mode=0o700)
    tmp = tempfile.mkdtemp(prefix=os.path.basename(site) + ".tmp-", dir=base)
    with zipfile.ZipFile(zip_path) as zf:
        for name in zf.namelist():
            if name.startswith("/") or ".." in name.split("/"):
                raise MissingDependency(
                    "refusing %s: member %r leaves the folder" % (zip_path, name)
                )
        zf.extractall(tmp)
    with open(os.path.join(tmp, ".provision-zip-sha256"), "w") as fh:
        fh.write(digest)
    shutil.rmtree(site, ignore_errors=True)
    os.rename(tmp, site)
    return site


_site_ran = []


def _run_site():
    """Under -S (the dataset commands start without site): do site's start-up work now, once,
    .pth import lines included. True the first time."""
    if _site_ran:
        return False
    _site_ran.append(True)
    import site

    site.main()
    return True


def import_lmdb():
    """The lmdb module, from the host's Python or from the shipped copy; else MissingDependency."""
    try:
        import lmdb

        return lmdb
    except ImportError:
        pass
    if sys.flags.no_site and _run_site():
        try:  # an install that only a .pth import line makes importable
            import lmdb

            return lmdb
        except ImportError:
            pass
    site = _shipped_site()
    if site:
        if site not in sys.path:
            sys.path.insert(0, site)
        try:
            import lmdb

            return lmdb
        except ImportError as exc:
            raise MissingDependency(
                "the py-lmdb shipped to %s does not load in %s: %s" % (site, sys.executable, exc)
            ) from None
    import platform

    raise MissingDependency(
        "py-lmdb is not importable by %s (Python %s); install it on the host "
        "(`%s -m pip install lmdb`) or let provision ship it"
        % (sys.executable, platform.python_version(), sys.executable)
    )


def import_optional(module):
    """`module` from the host's Python (site's start-up run first under -S), else from the copy
    the controller shipped (shipped_zip), else None: for optional packages (zstandard), whose
    callers go on without."""
    try:
        return __import__(module)
    except Exception:  # ImportError, or a broken build
        pass
    if sys.flags.no_site and _run_site():
        try:
            return __import__(module)
        except Exception:
            pass
    try:
        site = _shipped_site(module)
    except Exception:  # a damaged zip: as if none were shipped (the controller ships again)
        return None
    if not site:
        return None
    if site not in sys.path:
        sys.path.append(site)  # after the host's own: never shadows what the host has
    try:
        return __import__(module)
    except Exception:
        return None


def lmdb_version():
    try:
        return import_lmdb().__version__
    except Exception:  # missing, or a shipped copy that does not load: the caller ships again
        return None
