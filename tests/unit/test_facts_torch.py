"""PyTorch facts read from files, never by importing torch."""

import json
import subprocess
import sys
from pathlib import Path

from provision.agent.facts import torch_info

REPO = Path(__file__).resolve().parents[2]


def write(path, text=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


CU121_VERSION_PY = """__version__ = '2.1.2+cu121'
debug = False
cuda: Optional[str] = '12.1'
git_version = 'a8e7c98cb95ff97bb30a728c6b2a1ce6bff946eb'
hip: Optional[str] = None
"""


def test_pip_wheel_with_nvidia_cudnn_wheel(tmp_path):
    site = tmp_path / "site-packages"
    write(site / "torch/version.py", CU121_VERSION_PY)
    write(
        site / "torchvision/version.py",
        "__version__ = '0.16.2+cu121'\ngit_version = 'x'\ncuda = '12.1'\n",
    )
    (site / "torchaudio-2.1.2+cu121.dist-info").mkdir(parents=True)
    for meta in ("nvidia_cudnn_cu12-8.9.2.26.dist-info", "nvidia_nccl_cu12-2.18.1.dist-info"):
        (site / meta).mkdir()
    info = torch_info.describe(str(site / "torch"))
    assert info["installed"] is True
    assert (info["version"], info["cuda"], info["hip"]) == ("2.1.2+cu121", "12.1", None)
    assert info["torchvision"] == "0.16.2+cu121" and info["torchaudio"] == "2.1.2+cu121"
    assert info["cudnn"] == {"version": "8.9.2.26", "source": "nvidia-cudnn-cu12 wheel"}
    assert info["nvidia_wheels"] == {"nvidia-cudnn-cu12": "8.9.2.26", "nvidia-nccl-cu12": "2.18.1"}


def test_old_wheel_bundling_cudnn_and_a_cpu_build(tmp_path):
    old = tmp_path / "old/torch"
    write(
        old / "version.py",
        "__version__ = '1.12.1+cu113'\ndebug = False\ncuda = '11.3'\ngit_version = 'x'\nhip = None\n",
    )
    write(old / "lib/libcudnn.so.8")
    write(old / "lib/libcudnn_cnn_infer.so.8")
    info = torch_info.describe(str(old))
    assert info["cuda"] == "11.3" and info["cudnn"] == {
        "version": "8",
        "source": "bundled libcudnn.so.8",
    }
    cpu = tmp_path / "cpu/torch"
    write(
        cpu / "version.py", "__version__ = '2.3.0+cpu'\ndebug = False\ncuda: Optional[str] = None\n"
    )
    info = torch_info.describe(str(cpu))
    assert info["cuda"] is None and info["cudnn"] is None


def test_conda_env_torch_with_cudnn_conda_package(tmp_path):
    env = tmp_path / "miniconda3/envs/train"
    write(env / "lib/python3.10/site-packages/torch/version.py", CU121_VERSION_PY)
    write(env / "conda-meta/cudnn-8.9.2.26-cuda12_0.json", "{}")
    facts = torch_info.gather([{"name": "train", "path": str(env)}])
    (other,) = facts["other_envs"]
    assert other == {
        "env": "train",
        "python": str(env / "bin/python"),
        "version": "2.1.2+cu121",
        "cuda": "12.1",
    }
    info = torch_info.describe(str(env / "lib/python3.10/site-packages/torch"))
    assert info["cudnn"]["version"] == "8.9.2.26"


def test_broken_install_says_so(tmp_path):
    (tmp_path / "torch").mkdir()
    info = torch_info.describe(str(tmp_path / "torch"))
    assert info["installed"] is False and "version.py is missing" in info["reason"]


def test_this_interpreter_without_importing_torch():
    """Gathered in a fresh interpreter: the answer matches what is installed, and torch is
    not in sys.modules afterwards."""
    code = (
        "import json, sys\n"
        "from provision.agent.facts import torch_info\n"
        "facts = torch_info.gather()\n"
        "print(json.dumps({'facts': facts, 'imported': 'torch' in sys.modules}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=str(REPO), stdout=subprocess.PIPE, check=True, timeout=60
    )
    result = json.loads(out.stdout)
    assert result["imported"] is False
    facts = result["facts"]
    try:
        import importlib.metadata as metadata

        installed = metadata.version("torch")
    except Exception:
        installed = None
    assert facts["version"] == installed
    assert facts["python"] == sys.executable


def test_package_found_where_importlib_finds_it(tmp_path, monkeypatch):
    import importlib.util

    first, second = tmp_path / "first", tmp_path / "second"
    (first / "fakepkg").mkdir(parents=True)  # no __init__.py: a namespace portion, passed over
    (second / "fakepkg").mkdir(parents=True)
    (second / "fakepkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    spec = importlib.util.find_spec("fakepkg")
    assert torch_info._find_package("fakepkg") == list(spec.submodule_search_locations)[0]
    assert torch_info._find_package("no_such_package_here") is None
    torch_spec = importlib.util.find_spec("torch")
    if torch_spec is not None:
        assert torch_info._find_package("torch") == list(torch_spec.submodule_search_locations)[0]
