"""A short-lived memo of `verify_torch` answers on the host (Python 3.8+, stdlib only).

`up` verifies the same environment twice in one run (the compatibility check, then install's
"unchanged" path), and a rerun minutes later verifies it again: each time an `import torch` and
the GPU checks, 1-3 s. A verification that passed is remembered for `memo_s` seconds, keyed by
what would change its answer without a new import: the interpreter, the mtimes of its
site-packages folders (pip adds or removes a folder there on every install, upgrade or
uninstall), torch's own folder, the NVIDIA driver version, the GPU device nodes,
CUDA_VISIBLE_DEVICES and the request. Only a request that asks (`memo_s` > 0) is answered from
the memo: a verification right after an install never is. Failures are never remembered.

The memo lives under ~/.cache/provision/verify (0700, files 0600, written whole by rename).
"""

import glob
import hashlib
import json
import os
import sys
import time

MEMO_DIR = os.path.join("~", ".cache", "provision", "verify")


def _mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _read(path, limit=4096):
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def state_key(request):
    """What the answer depends on, as one string (no torch import)."""
    import importlib.util

    site_dirs = sorted(
        p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p) and os.path.isdir(p)
    )
    try:
        spec = importlib.util.find_spec("torch")
        torch_dir = os.path.dirname(spec.origin) if spec and spec.origin else None
    except (ImportError, ValueError):
        torch_dir = None
    parts = {
        "python": os.path.realpath(sys.executable),
        "version": sys.version,
        "site": [(p, _mtime(p)) for p in site_dirs],
        "torch": [torch_dir, _mtime(torch_dir) if torch_dir else None],
        "driver": _read("/proc/driver/nvidia/version"),
        "devices": sorted(glob.glob("/dev/nvidia[0-9]*")),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "request": {k: request.get(k) for k in sorted(request) if k != "memo_s"},
    }
    return json.dumps(parts, sort_keys=True, default=str)


def _path(key):
    name = hashlib.sha256(os.path.realpath(sys.executable).encode()).hexdigest()[:16]
    return os.path.join(os.path.expanduser(MEMO_DIR), name + ".json")


def recall(request):
    """The remembered answer (with `memo: {age_s}`) when it is still valid, else None."""
    try:
        memo_s = float(request.get("memo_s") or 0)
    except (TypeError, ValueError):
        memo_s = 0.0
    if memo_s <= 0:
        return None
    key = state_key(request)
    text = _read(_path(key), limit=1 << 20)
    if not text:
        return None
    try:
        saved = json.loads(text)
        age = time.time() - float(saved["at"])
        if saved.get("key") != key or not 0 <= age <= memo_s or not saved["result"].get("ok"):
            return None
        result = dict(saved["result"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    result["memo"] = {"age_s": round(age, 1)}
    return result


def remember(request, result):
    """Keep a passed verification; failures and write errors are ignored (it is only a memo)."""
    if not result.get("ok"):
        return
    key = state_key(request)
    path = _path(key)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"key": key, "at": time.time(), "result": result}, fh)
        os.replace(tmp, path)
    except OSError:
        pass
