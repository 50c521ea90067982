"""System CUDA pieces outside the driver: toolkits and nvcc, cuDNN, and libcuda.

None of this is needed to run a PyTorch wheel (the wheel brings its CUDA runtime and cuDNN);
it matters for building extensions (nvcc must match torch's CUDA major) and for explaining
"two cuDNNs" problems when LD_LIBRARY_PATH puts the system one first.
"""

import glob
import json
import os
import re
import shutil
from typing import Any, Dict, List, Optional

from provision.agent.facts._util import read_text, run

_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)")
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


def ldconfig_libraries() -> List[Any]:
    """(soname, path) pairs from the dynamic linker cache."""
    ldconfig = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None
    )
    if ldconfig is None:
        return []
    code, out = run([ldconfig, "-p"], timeout=5)
    return parse_ldconfig(out) if code == 0 else []


def parse_ldconfig(text: str) -> List[Any]:
    pairs = []
    for line in text.splitlines():
        match = _LDCONFIG_LINE.match(line)
        if match:
            pairs.append((match.group(1), match.group(3)))
    return pairs


def toolkits(env: Dict[str, str]) -> List[Dict[str, Any]]:
    """CUDA toolkits under /usr/local (and CUDA_HOME/CUDA_PATH), with versions read from files."""
    roots = sorted(glob.glob("/usr/local/cuda-*"))
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
    text = read_text(os.path.join(root, "version.json"))
    if text:
        try:
            return json.loads(text)["cuda"]["version"]
        except (ValueError, KeyError, TypeError):
            pass
    text = read_text(os.path.join(root, "version.txt"))
    if text:
        match = re.search(r"CUDA Version\s+([\d.]+)", text)
        if match:
            return match.group(1)
    # pip-assembled toolkits keep the wheels' dist-info: nvidia_cuda_nvcc-13.0.88.dist-info
    metas = glob.glob(os.path.join(root, "nvidia_cuda_nvcc-*.dist-info")) + glob.glob(
        os.path.join(root, "dist-info", "nvidia_cuda_nvcc-*.dist-info")
    )
    for meta in metas:
        match = re.match(r"nvidia_cuda_nvcc-([\d.]+)\.dist-info", os.path.basename(meta))
        if match:
            return match.group(1)
    return None


def nvcc(env: Dict[str, str], kits: List[Dict[str, Any]]) -> Dict[str, Any]:
    path = shutil.which("nvcc", path=env.get("PATH"))
    on_path = path is not None
    if path is None:
        default = [k for k in kits if k["default"] and k["has_nvcc"]] or [
            k for k in kits if k["has_nvcc"]
        ]
        if default:
            path = os.path.join(default[-1]["path"], "bin", "nvcc")
    if path is None:
        return {"path": None, "version": None, "on_path": False}
    code, out = run([path, "--version"], timeout=10)
    if code != 0:
        return {
            "path": path,
            "version": None,
            "on_path": on_path,
            "error": " ".join(out.split())[:200],
        }
    return {"path": path, "version": parse_nvcc_version(out), "on_path": on_path}


def parse_nvcc_version(text: str) -> Optional[str]:
    """ "Cuda compilation tools, release 12.1, V12.1.105" -> "12.1.105"."""
    match = re.search(r"release (\d+\.\d+), V([\d.]+)", text)
    if match:
        return match.group(2)
    match = re.search(r"release (\d+\.\d+)", text)
    return match.group(1) if match else None


def system_cudnn(libraries: List[Any], kits: List[Dict[str, Any]]) -> Dict[str, Any]:
    paths = sorted({path for name, path in libraries if name.startswith("libcudnn.so")})
    for kit in kits:
        paths.extend(
            p
            for p in sorted(glob.glob(os.path.join(kit["path"], "lib64", "libcudnn.so*")))
            if p not in paths
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
    parts = []
    for name in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"):
        match = re.search(r"#define\s+%s\s+(\d+)" % name, text)
        if not match:
            break
        parts.append(match.group(1))
    return ".".join(parts) if parts else None
