"""System CUDA pieces outside the driver: toolkits and nvcc, cuDNN, and libcuda.

None of this is needed to run a PyTorch wheel (the wheel brings its CUDA runtime and cuDNN);
it matters for building extensions (nvcc must match torch's CUDA major) and for explaining
"two cuDNNs" problems when LD_LIBRARY_PATH puts the system one first.

Read from files wherever the answer is in a file, so a host runs no program for this: the
dynamic linker's cache (/etc/ld.so.cache, what `ldconfig -p` prints) and nvcc's version as its
toolkit records it (version.json, or the dist-info of a pip-assembled toolkit). `ldconfig -p`
and `nvcc --version` run only where those files do not answer.
"""

from __future__ import annotations

import os
import sys

from provision.agent.facts._util import list_dir, read_text, run, which

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

LD_CACHE = "/etc/ld.so.cache"
# Sonames the facts use: libcuda.so* (the driver's) and libcudnn.so* (a system cuDNN).
LIBRARY_PREFIXES = ("libcuda.so", "libcudnn.so")
_CUDNN_HEADERS = (
    "/usr/include/cudnn_version.h",
    "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h",
    "/usr/include/x86_64-linux-gnu/cudnn_version_v8.h",
    "/usr/include/aarch64-linux-gnu/cudnn_version_v9.h",
    "/usr/include/aarch64-linux-gnu/cudnn_version_v8.h",
    "/usr/local/cuda/include/cudnn_version.h",
)


def gather(env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    env = dict(os.environ) if env is None else env
    libraries = ldconfig_libraries()
    kits = toolkits(env)
    return {
        "nvcc": nvcc(env, kits),
        "toolkits": kits,
        "cudnn": system_cudnn(libraries, kits),
        "libcuda": [path for name, path in libraries if name.startswith("libcuda.so")],
    }


def ldconfig_libraries(prefixes: Tuple[str, ...] = LIBRARY_PREFIXES) -> List[Any]:
    """(soname, path) pairs of the dynamic linker cache whose soname starts with one of
    `prefixes` (all pairs for ()), in the cache's order, as `ldconfig -p` lists them."""
    pairs = read_ld_cache(LD_CACHE, prefixes)
    if pairs is not None:
        return pairs
    ldconfig = which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None
    )
    if ldconfig is None:
        return []
    code, out = run([ldconfig, "-p"], timeout=5)
    if code != 0:
        return []
    return [pair for pair in parse_ldconfig(out) if not prefixes or pair[0].startswith(prefixes)]


def read_ld_cache(path: str = LD_CACHE, prefixes: Tuple[str, ...] = ()) -> Optional[List[Any]]:
    """(soname, path) pairs from glibc's ld.so.cache, or None when the file is missing or not in
    a format read here (then `ldconfig -p` is asked).

    glibc 2.32+ writes the "new" format: the header `glibc-ld.so.cache1.1`, nlibs, the string
    table's length, flags, the extension offset and 3 unused words (48 bytes), then nlibs
    24-byte entries {int32 flags; uint32 key, value; uint32 osversion; uint64 hwcap}; key and
    value are offsets, from the start of that header, of NUL-terminated strings (the soname
    and the file's path). Older glibc writes "compat": an old-format part (`ld.so-1.7.0`,
    nlibs, 12-byte entries) first, then the new format, 8-byte aligned, which is the part read.
    (glibc's elf/cache.c and sysdeps/generic/dl-cache.h.)"""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    base = 0
    if data.startswith(b"ld.so-1.7.0"):
        if len(data) < 16:
            return None
        old_count = int.from_bytes(data[12:16], sys.byteorder)
        base = (16 + 12 * old_count + 7) & ~7
    if not data.startswith(b"glibc-ld.so.cache1.1", base) or len(data) < base + 48:
        return None
    count = int.from_bytes(data[base + 20 : base + 24], sys.byteorder)
    if base + 48 + 24 * count > len(data):
        return None
    wanted = tuple(p.encode() for p in prefixes)
    pairs = []
    for entry in range(base + 48, base + 48 + 24 * count, 24):
        key = base + int.from_bytes(data[entry + 4 : entry + 8], sys.byteorder)
        if wanted and not data.startswith(wanted, key):
            continue
        value = base + int.from_bytes(data[entry + 8 : entry + 12], sys.byteorder)
        key_end, value_end = data.find(b"\0", key), data.find(b"\0", value)
        if key_end < 0 or value_end < 0:
            return None
        pairs.append(
            (
                data[key:key_end].decode("utf-8", "replace"),
                data[value:value_end].decode("utf-8", "replace"),
            )
        )
    return pairs


def parse_ldconfig(text: str) -> List[Any]:
    """(soname, path) pairs from `ldconfig -p` output."""
    import re

    line_pattern = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)")
    pairs = []
    for line in text.splitlines():
        match = line_pattern.match(line)
        if match:
            pairs.append((match.group(1), match.group(3)))
    return pairs


def toolkits(env: Dict[str, str]) -> List[Dict[str, Any]]:
    """CUDA toolkits under /usr/local (and CUDA_HOME/CUDA_PATH), with versions read from files."""
    roots = list_dir("/usr/local", "cuda-")
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(variable):
            roots.append(env[variable])
    default = os.path.realpath("/usr/local/cuda") if os.path.exists("/usr/local/cuda") else None
    if default and default not in [os.path.realpath(r) for r in roots]:
        roots.append(default)
    result = []
    seen = set()
    for root in roots:
        real = os.path.realpath(root)
        if real in seen or not os.path.isdir(real):
            continue
        seen.add(real)
        result.append(
            {
                "path": root,
                "version": toolkit_version(real),
                "has_nvcc": os.access(os.path.join(real, "bin", "nvcc"), os.X_OK),
                "default": real == default,
            }
        )
    return result


def toolkit_version(root: str) -> Optional[str]:
    version = _version_json(root, "cuda")
    if version:
        return version
    text = read_text(os.path.join(root, "version.txt"))
    if text:
        import re

        match = re.search(r"CUDA Version\s+([\d.]+)", text)
        if match:
            return match.group(1)
    # pip-assembled toolkits keep the wheels' dist-info: nvidia_cuda_nvcc-13.0.88.dist-info
    return _dist_info_version(root, "nvidia_cuda_nvcc")


def _version_json(root: str, component: str) -> Optional[str]:
    """version.json's COMPONENT.version: `cuda` is the toolkit's, `cuda_nvcc` nvcc's."""
    text = read_text(os.path.join(root, "version.json"))
    if not text:
        return None
    # lazy: the core bundle's facts start per call; JSON parsing only for a version.json
    from provision.agent.protocol import loads

    try:
        return loads(text)[component]["version"]
    except (ValueError, KeyError, TypeError):
        return None


def _dist_info_version(root: str, name: str) -> Optional[str]:
    """NAME-X.Y.Z.dist-info in ROOT or ROOT/dist-info -> "X.Y.Z"."""
    prefix, suffix = name + "-", ".dist-info"
    for folder in (root, os.path.join(root, "dist-info")):
        for meta in list_dir(folder, prefix, suffix):
            version = os.path.basename(meta)[len(prefix) : -len(suffix)]
            if version and all(c.isdigit() or c == "." for c in version):
                return version
    return None


def nvcc(env: Dict[str, str], kits: List[Dict[str, Any]]) -> Dict[str, Any]:
    path = which("nvcc", path=env.get("PATH"))
    on_path = path is not None
    if path is None:
        default = [k for k in kits if k["default"] and k["has_nvcc"]] or [
            k for k in kits if k["has_nvcc"]
        ]
        if default:
            path = os.path.join(default[-1]["path"], "bin", "nvcc")
    if path is None:
        return {"path": None, "version": None, "on_path": False}
    recorded = nvcc_version_from_files(path)
    if recorded is not None:
        version, source = recorded
        return {"path": path, "version": version, "on_path": on_path, "version_from": source}
    code, out = run([path, "--version"], timeout=10)
    if code != 0:
        return {
            "path": path,
            "version": None,
            "on_path": on_path,
            "error": " ".join(out.split())[:200],
        }
    return {
        "path": path,
        "version": parse_nvcc_version(out),
        "on_path": on_path,
        "version_from": "nvcc --version",
    }


def nvcc_version_from_files(path: str) -> Optional[Tuple[str, str]]:
    """(version, where it was read) of the nvcc at `path` as its toolkit records it, the
    same "12.1.105" `nvcc --version` prints as V12.1.105; None when no file says.

    TOOLKIT/bin/nvcc: TOOLKIT/version.json's cuda_nvcc (NVIDIA's installers and .debs), the
    nvidia_cuda_nvcc wheel's dist-info (toolkits assembled from pip wheels) or conda's
    cuda-nvcc package record. A small shell script that execs another nvcc (a wrapper in
    /usr/local/bin) is followed once."""
    real = os.path.realpath(path)
    target = _wrapped_nvcc(real)
    if target is not None:
        real = os.path.realpath(target)
    bin_dir = os.path.dirname(real)
    if os.path.basename(bin_dir) != "bin":
        return None
    root = os.path.dirname(bin_dir)
    version = _version_json(root, "cuda_nvcc")
    if version:
        return version, os.path.join(root, "version.json")
    version = _dist_info_version(root, "nvidia_cuda_nvcc")
    if version:
        return version, "nvidia_cuda_nvcc dist-info in %s" % root
    for meta in list_dir(os.path.join(root, "conda-meta"), "cuda-nvcc-", ".json"):
        version = os.path.basename(meta)[len("cuda-nvcc-") :].split("-")[0]
        if version and version[0].isdigit() and all(c.isdigit() or c == "." for c in version):
            return version, "conda package %s" % os.path.basename(meta)
    return None


def _wrapped_nvcc(path: str) -> Optional[str]:
    """The nvcc a `#!/bin/sh ... exec /x/bin/nvcc "$@"` wrapper script runs, else None."""
    try:
        with open(path, "rb") as f:
            head = f.read(4097)
    except OSError:
        return None
    if not head.startswith(b"#!") or len(head) > 4096:
        return None
    for word in head.decode("utf-8", "replace").split():
        word = word.strip("\"'")
        if word.startswith("/") and word.endswith("/nvcc") and word != path:
            if os.access(word, os.X_OK) and os.path.realpath(word) != path:
                return word
    return None


def parse_nvcc_version(text: str) -> Optional[str]:
    """ "Cuda compilation tools, release 12.1, V12.1.105" -> "12.1.105"."""
    import re

    match = re.search(r"release (\d+\.\d+), V([\d.]+)", text)
    if match:
        return match.group(2)
    match = re.search(r"release (\d+\.\d+)", text)
    return match.group(1) if match else None


def system_cudnn(libraries: List[Any], kits: List[Dict[str, Any]]) -> Dict[str, Any]:
    paths = sorted({path for name, path in libraries if name.startswith("libcudnn.so")})
    for kit in kits:
        paths.extend(  # lib64/libcudnn.so*
            p for p in list_dir(os.path.join(kit["path"], "lib64"), "libcudnn.so") if p not in paths
        )
    version = None
    header_path = None
    headers = list(_CUDNN_HEADERS) + [
        os.path.join(k["path"], "include", "cudnn_version.h") for k in kits
    ]
    for header in headers:
        text = read_text(header)
        if text:
            version = parse_cudnn_header(text)
            if version:
                header_path = header
                break
    return {"libraries": paths, "version": version, "header": header_path}


def parse_cudnn_header(text: str) -> Optional[str]:
    import re

    parts = []
    for name in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"):
        match = re.search(r"#define\s+%s\s+(\d+)" % name, text)
        if not match:
            break
        parts.append(match.group(1))
    return ".".join(parts) if parts else None
