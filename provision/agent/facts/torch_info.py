"""PyTorch as installed, read from files: `import torch` costs seconds (it loads CUDA libraries),
so facts never import it.

torch/version.py holds `__version__ = '2.1.0+cu121'` and `cuda = '12.1'` (None on CPU builds,
`hip` on ROCm builds). cuDNN is not in it: a wheel either bundles it in torch/lib
(libcudnn.so.8, older wheels and conda builds) or depends on the nvidia-cudnn-cu* wheel, whose
dist-info names the exact version. torchvision and torchaudio have their own version.py.
"""

from __future__ import annotations

import os
import sys

from provision.agent.facts._util import list_dir, read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

# (re is imported by the functions that read a torch install: most hosts asking for facts
# have none, and importing re costs more than the rest of this module.)
_VERSION = r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]"


def _version_in(text: str) -> Optional[str]:
    """The `__version__ = '...'` of a version.py."""
    import re

    match = re.search(_VERSION, text, re.M)
    return match.group(1) if match else None


def version_assignment(text: str, name: str) -> Optional[str]:
    """Value of `name = '...'` (or `name: Optional[str] = '...'`) in a version.py; None for None."""
    import re

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
        for path in _conda_env_torches(env["path"]):
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


def _conda_env_torches(prefix: str) -> List[str]:
    """PREFIX/lib/python3*/site-packages/torch folders (what that glob finds)."""
    found = []
    for lib in list_dir(os.path.join(prefix, "lib"), "python3"):
        torch_dir = os.path.join(lib, "site-packages", "torch")
        if os.path.exists(torch_dir):
            found.append(torch_dir)
    return found


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
    """The package's directory on this interpreter's path, without importing it: the first
    sys.path folder holding NAME/__init__.py, where `import NAME` would find it. (Not
    importlib.util.find_spec: importing importlib.util costs ~3 ms, and torch is a plain
    package in a site-packages folder.)"""
    for entry in sys.path:
        package = os.path.join(entry or os.curdir, name)
        if os.path.isfile(os.path.join(package, "__init__.py")):
            return package if entry else os.path.abspath(package)
    return None


def describe(torch_dir: str) -> Dict[str, Any]:
    text = read_text(os.path.join(torch_dir, "version.py")) or ""
    site = os.path.dirname(torch_dir)
    version = _version_in(text)
    if not version:
        result = _absent("%s/version.py is missing or unreadable (a broken install?)" % torch_dir)
        result["location"] = torch_dir
        return result
    wheels = nvidia_wheels(site)
    return {
        "installed": True,
        "version": version,
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
        version = _version_in(text)
        if version:
            return version
    return _dist_version(site, name)


def _dist_version(site: str, name: str) -> Optional[str]:
    import re

    for meta in list_dir(site, name + "-", ".dist-info"):
        match = re.match(r"%s-([^-]+)\.dist-info$" % re.escape(name), os.path.basename(meta))
        if match:
            return match.group(1)
    return None


def nvidia_wheels(site: str) -> Dict[str, str]:
    """NVIDIA's pip-packaged CUDA libraries next to torch: nvidia_cudnn_cu12-9.1.0.70.dist-info
    -> {"nvidia-cudnn-cu12": "9.1.0.70"}."""
    import re

    wheels = {}
    for meta in list_dir(site, "nvidia_", ".dist-info"):
        match = re.match(r"(nvidia_[A-Za-z0-9_]+)-([^-]+)\.dist-info$", os.path.basename(meta))
        if match:
            wheels[match.group(1).replace("_", "-")] = match.group(2)
    return wheels


def cudnn(torch_dir: str, wheels: Dict[str, str]) -> Optional[Dict[str, Any]]:
    import re

    for name, version in sorted(wheels.items()):
        if name.startswith("nvidia-cudnn-"):
            return {"version": version, "source": "%s wheel" % name}
    bundled = [  # torch/lib/libcudnn*.so*
        path
        for path in list_dir(os.path.join(torch_dir, "lib"), "libcudnn")
        if ".so" in os.path.basename(path)[len("libcudnn") :]
    ]
    for path in bundled:
        match = re.search(r"libcudnn(?:_\w+)?\.so\.(\d+(?:\.\d+)*)", os.path.basename(path))
        if match:
            return {"version": match.group(1), "source": "bundled %s" % os.path.basename(path)}
    # conda's pytorch takes cuDNN from a separate `cudnn` conda package in the same env.
    prefix = os.path.normpath(os.path.join(torch_dir, "..", "..", "..", ".."))
    for meta in list_dir(os.path.join(prefix, "conda-meta"), "cudnn-", ".json"):
        match = re.match(r"cudnn-(\d+(?:\.\d+)*)-", os.path.basename(meta))
        if match:
            return {
                "version": match.group(1),
                "source": "conda package %s" % os.path.basename(meta),
            }
    return None
