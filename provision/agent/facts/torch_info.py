"""PyTorch as installed, read from files: `import torch` costs seconds (it loads CUDA libraries),
so facts never import it.

torch/version.py holds `__version__ = '2.1.0+cu121'` and `cuda = '12.1'` (None on CPU builds,
`hip` on ROCm builds). cuDNN is not in it: a wheel either bundles it in torch/lib
(libcudnn.so.8, older wheels and conda builds) or depends on the nvidia-cudnn-cu* wheel, whose
dist-info names the exact version. torchvision and torchaudio have their own version.py.
"""

import glob
import importlib.util
import os
import re
import sys
from typing import Any, Dict, List, Optional

from provision.agent.facts._util import read_text

_VERSION = re.compile(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.M)


def version_assignment(text: str, name: str) -> Optional[str]:
    """Value of `name = '...'` (or `name: Optional[str] = '...'`) in a version.py; None for None."""
    match = re.search(
        r"^%s\s*(?::[^=\n]*)?=\s*(?:['\"]([^'\"]*)['\"]|None)" % re.escape(name), text, re.M
    )
    return match.group(1) if match and match.group(1) else None


def gather(conda_envs: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
    torch_dir = _find_package("torch")
    result = (
        describe(torch_dir)
        if torch_dir
        else _absent("torch is not installed for %s" % sys.executable)
    )
    result["python"] = sys.executable
    others = []
    for env in conda_envs or []:
        for path in sorted(
            glob.glob(os.path.join(env["path"], "lib", "python3*", "site-packages", "torch"))
        ):
            if torch_dir and os.path.realpath(path) == os.path.realpath(torch_dir):
                continue
            info = describe(path)
            others.append(
                {
                    "env": env["name"],
                    "python": os.path.join(env["path"], "bin", "python"),
                    "version": info["version"],
                    "cuda": info["cuda"],
                }
            )
    result["other_envs"] = others
    return result


def _absent(reason: str) -> Dict[str, Any]:
    return {
        "installed": False,
        "version": None,
        "cuda": None,
        "hip": None,
        "cudnn": None,
        "torchvision": None,
        "torchaudio": None,
        "location": None,
        "nvidia_wheels": {},
        "reason": reason,
    }


def _find_package(name: str) -> Optional[str]:
    """The package's directory on this interpreter's path, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def describe(torch_dir: str) -> Dict[str, Any]:
    text = read_text(os.path.join(torch_dir, "version.py")) or ""
    site = os.path.dirname(torch_dir)
    version_match = _VERSION.search(text)
    if not version_match:
        result = _absent("%s/version.py is missing or unreadable (a broken install?)" % torch_dir)
        result["location"] = torch_dir
        return result
    wheels = nvidia_wheels(site)
    return {
        "installed": True,
        "version": version_match.group(1),
        "cuda": version_assignment(text, "cuda"),
        "hip": version_assignment(text, "hip"),
        "cudnn": cudnn(torch_dir, wheels),
        "torchvision": _companion_version(site, "torchvision"),
        "torchaudio": _companion_version(site, "torchaudio"),
        "location": torch_dir,
        "nvidia_wheels": wheels,
    }


def _companion_version(site: str, name: str) -> Optional[str]:
    text = read_text(os.path.join(site, name, "version.py"))
    if text:
        match = _VERSION.search(text)
        if match:
            return match.group(1)
    return _dist_version(site, name)


def _dist_version(site: str, name: str) -> Optional[str]:
    for meta in glob.glob(os.path.join(site, "%s-*.dist-info" % name)):
        match = re.match(r"%s-([^-]+)\.dist-info$" % re.escape(name), os.path.basename(meta))
        if match:
            return match.group(1)
    return None


def nvidia_wheels(site: str) -> Dict[str, str]:
    """NVIDIA's pip-packaged CUDA libraries next to torch: nvidia_cudnn_cu12-9.1.0.70.dist-info
    -> {"nvidia-cudnn-cu12": "9.1.0.70"}."""
    wheels = {}
    for meta in sorted(glob.glob(os.path.join(site, "nvidia_*.dist-info"))):
        match = re.match(r"(nvidia_[A-Za-z0-9_]+)-([^-]+)\.dist-info$", os.path.basename(meta))
        if match:
            wheels[match.group(1).replace("_", "-")] = match.group(2)
    return wheels


def cudnn(torch_dir: str, wheels: Dict[str, str]) -> Optional[Dict[str, Any]]:
    for name, version in sorted(wheels.items()):
        if name.startswith("nvidia-cudnn-"):
            return {"version": version, "source": "%s wheel" % name}
    bundled = sorted(glob.glob(os.path.join(torch_dir, "lib", "libcudnn*.so*")))
    for path in bundled:
        match = re.search(r"libcudnn(?:_\w+)?\.so\.(\d+(?:\.\d+)*)", os.path.basename(path))
        if match:
            return {"version": match.group(1), "source": "bundled %s" % os.path.basename(path)}
    # conda's pytorch takes cuDNN from a separate `cudnn` conda package in the same env.
    prefix = os.path.normpath(os.path.join(torch_dir, "..", "..", "..", ".."))
    for meta in sorted(glob.glob(os.path.join(prefix, "conda-meta", "cudnn-*.json"))):
        match = re.match(r"cudnn-(\d+(?:\.\d+)*)-", os.path.basename(meta))
        if match:
            return {
                "version": match.group(1),
                "source": "conda package %s" % os.path.basename(meta),
            }
    return None
