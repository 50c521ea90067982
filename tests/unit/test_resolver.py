"""The resolver over real GPU x driver x Python combinations.

Expected plans were worked out by hand from the tables (docs/compat.md shows the rules); the
invariant sweep at the end checks every combination against facts written down here
independently of the resolver's code.
"""

from __future__ import annotations

import itertools

import pytest
from packaging.version import Version

from provision.compat import (
    GpuFact,
    HostFacts,
    InstallPlan,
    NoPlan,
    ResolveInputError,
    TorchRequest,
    load_compat,
    resolve_install_plan,
    result_document,
)
from provision.compat.loader import parse_driver

K80 = "Tesla K80"
P100 = "Tesla P100-PCIE-16GB"
V100 = "Tesla V100-SXM2-32GB"
T4 = "Tesla T4"
RTX3090 = "NVIDIA GeForce RTX 3090"
RTX4090 = "NVIDIA GeForce RTX 4090"
RTX5090 = "NVIDIA GeForce RTX 5090"
A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
B200 = "NVIDIA B200"

# Real driver releases, one per branch the brief names.
D418, D450, D470 = "418.87.01", "450.80.02", "470.82.01"
D525, D535, D550 = "525.60.13", "535.104.05", "550.54.14"
D570, D580, D595 = "570.124.06", "580.65.06", "595.58.03"

CU13 = {"cu130", "cu132"}


def facts(gpus, driver, python, **kw) -> HostFacts:
    return HostFacts(
        gpus=tuple(GpuFact(name=g) for g in gpus),
        driver_version=driver,
        python_version=python,
        **kw,
    )


def resolve(gpus, driver, python, facts_kw=None, **request):
    return resolve_install_plan(
        facts(gpus, driver, python, **(facts_kw or {})), TorchRequest(**request)
    )


# (gpus, driver, python, request, expected "version+variant", variants that must never be chosen)
PLAN_CASES = [
    # Kepler: only cu118-and-older wheels carry sm_37; 470 reaches CUDA 11.8 via minor-version compat
    ([K80], D470, "3.10", {}, "2.7.1+cu118", {"cu121", "cu126", "cu128", *CU13}),
    ([K80], D450, "3.9", {}, "2.7.1+cu118", {"cu126", *CU13}),
    # Pascal: cu126 is the newest build with sm_60; never cu128+ (sm_50/60 removed)
    ([P100], D470, "3.10", {}, "2.7.1+cu118", {"cu126", "cu128", *CU13}),
    ([P100], D535, "3.12", {}, "2.14.0+cu126", {"cu128", "cu129", *CU13}),
    ([P100], D580, "3.12", {}, "2.14.0+cu126", {"cu128", *CU13}),
    ([P100], D595, "3.13", {}, "2.14.0+cu126", CU13),
    # Volta: never cu13x; cu128 carries sm_70 only in 2.8-2.10
    ([V100], D450, "3.8", {}, "2.4.1+cu118", {"cu121", "cu124", *CU13}),
    ([V100], D580, "3.12", {}, "2.14.0+cu126", CU13),
    ([V100], D535, "3.12", {"allow_minor_version_compat": False}, "2.7.1+cu118", CU13),
    ([V100], D570, "3.11", {"spec": "2.10"}, "2.10.0+cu128", CU13),
    ([V100], D570, "3.11", {"spec": "2.11"}, "2.11.0+cu126", {"cu128", *CU13}),
    # Turing
    ([T4], D525, "3.10", {}, "2.14.0+cu126", CU13),
    ([T4], D580, "3.11", {}, "2.14.0+cu130", {"cu132"}),
    ([T4], D595, "3.14", {}, "2.14.0+cu130", set()),
    # Ampere consumer
    ([RTX3090], D535, "3.10", {}, "2.14.0+cu126", CU13),
    ([RTX3090], D535, "3.10", {"allow_minor_version_compat": False}, "2.7.1+cu118", CU13),
    ([RTX3090], D550, "3.9", {}, "2.8.0+cu126", CU13),
    ([RTX3090], D470, "3.10", {}, "2.7.1+cu118", {"cu126", *CU13}),
    # Ada runs sm_86 SASS
    ([RTX4090], D525, "3.11", {}, "2.14.0+cu126", CU13),
    ([RTX4090], D580, "3.12", {}, "2.14.0+cu130", set()),
    ([RTX4090], D535, "3.8", {}, "2.4.1+cu121", {"cu124", *CU13}),
    ([RTX4090], D535, "3.14", {}, "2.14.0+cu126", CU13),
    # Blackwell consumer (sm_120): never cu126 or older; cu13x only with driver >= 580
    ([RTX5090], D570, "3.12", {}, "2.11.0+cu128", {"cu118", "cu124", "cu126", *CU13}),
    ([RTX5090], D550, "3.12", {}, "2.11.0+cu128", {"cu126", *CU13}),
    ([RTX5090], D535, "3.9", {}, "2.8.0+cu128", {"cu126", "cu129"}),
    ([RTX5090], D580, "3.13", {}, "2.14.0+cu130", {"cu126"}),
    # Ampere data centre; Python 3.7 only has 1.x (installed with --extra-index-url and +cu pins)
    ([A100], D450, "3.10", {}, "2.7.1+cu118", {"cu126", *CU13}),
    ([A100], D535, "3.11", {}, "2.14.0+cu126", CU13),
    ([A100], D595, "3.12", {}, "2.14.0+cu130", set()),
    ([A100], D525, "3.7", {}, "1.13.1+cu117", {"cu102"}),
    # Hopper: sm_90 since cu118 in 2.0
    ([H100], D525, "3.10", {}, "2.14.0+cu126", CU13),
    ([H100], D470, "3.10", {}, "2.7.1+cu118", {"cu126", *CU13}),
    ([H100], D580, "3.14", {}, "2.14.0+cu130", set()),
    # Blackwell data centre (sm_100)
    ([B200], D570, "3.12", {}, "2.11.0+cu128", {"cu126", *CU13}),
    ([B200], D535, "3.10", {}, "2.11.0+cu128", {"cu126", *CU13}),
    ([B200], D580, "3.12", {}, "2.14.0+cu130", {"cu126"}),
    ([B200], D595, "3.14", {}, "2.14.0+cu130", {"cu126"}),
    # CPU-only hosts
    ([], None, "3.12", {}, "2.14.0+cpu", {"cu126", *CU13}),
    ([], None, "3.8", {}, "2.4.1+cpu", set()),
    # PyPI-only mirrors serve only PyPI's default build (cu130 from 2.11)
    ([RTX3090], D535, "3.10", {"mirror": "pypi"}, "2.10.0+cu128", CU13),
    ([V100], D580, "3.12", {"mirror": "pypi"}, "2.10.0+cu128", CU13),
    ([P100], D580, "3.12", {"mirror": "pypi"}, "2.7.1+cu126", {"cu128", *CU13}),
    # ALL GPUs must be served: V100 + RTX 5090 only meet in cu128 of 2.8-2.10
    ([V100, RTX5090], D580, "3.12", {}, "2.10.0+cu128", {"cu126", *CU13}),
    ([T4, RTX5090], D580, "3.12", {}, "2.14.0+cu130", {"cu126"}),
    # Specs and explicit variants
    ([RTX3090], D535, "3.13", {"spec": "2.5"}, "2.5.1+cu121", {"cu124"}),
    ([RTX3090], D535, "3.12", {"spec": "2.5.1", "variant": "cu124"}, "2.5.1+cu124", set()),
    ([RTX3090], D550, "3.12", {"spec": ">=2.4,<2.6"}, "2.5.1+cu124", set()),
    ([RTX3090], D550, "3.12", {"spec": "2.4.0"}, "2.4.0+cu121", set()),
    ([RTX3090], D580, "3.12", {"variant": "cpu"}, "2.14.0+cpu", set()),
]


@pytest.mark.parametrize(
    ("gpus", "driver", "python", "request_kw", "expected", "never"),
    PLAN_CASES,
    ids=[f"{'+'.join(c[0]) or 'cpu'}|{c[1]}|py{c[2]}|{c[3]}" for c in PLAN_CASES],
)
def test_plan(gpus, driver, python, request_kw, expected, never):
    plan = resolve(gpus, driver, python, **request_kw)
    assert isinstance(plan, InstallPlan), getattr(plan, "explanation", plan)
    assert f"{plan.torch}+{plan.variant}" == expected, plan.reasons
    assert plan.variant not in never
    assert plan.action == "install"
    assert plan.reasons and plan.reasons[-1].startswith(f"chose torch {expected}")


NO_PLAN_CASES = [
    # (gpus, driver, python, request, words the explanation/options must contain)
    (
        [K80],
        D418,
        "3.10",
        {},
        ["upgrade the NVIDIA driver to ≥ 450.80.02", "2.7.1+cu118", "CPU-only"],
    ),
    ([K80], D470, "3.14", {}, ["Python 3.9–3.13", "2.7.1+cu118"]),
    (
        [K80],
        D470,
        "3.10",
        {"spec": "2.9"},
        ["use torch 2.7.1+cu118", "CPU-only build: torch 2.9.1+cpu"],
    ),
    ([K80], D470, "3.10", {"spec": ">=2.8"}, ["use torch 2.7.1+cu118"]),
    (
        [T4],
        D418,
        "3.10",
        {},
        ["≥ 525.60.13: then torch 2.14.0+cu126", "≥ 440.33 already allows torch 1.12.1+cu102"],
    ),
    (
        [RTX5090],
        D470,
        "3.12",
        {},
        ["≥ 580.65.06: then torch 2.14.0+cu130", "≥ 525.60.13 already allows torch 2.11.0+cu128"],
    ),
    ([RTX5090], D570, "3.12", {"spec": "2.6"}, ["use torch 2.11.0+cu128"]),
    ([RTX5090], D570, "3.12", {"variant": "cu126"}, ["drop --variant cu126: torch 2.11.0+cu128"]),
    ([B200], D470, "3.12", {}, ["upgrade the NVIDIA driver"]),
    ([RTX3090], D535, "3.14", {"spec": "2.5"}, ["Python 3.9–3.12", "use torch 2.14.0+cu126"]),
    (
        [RTX3090],
        D550,
        "3.12",
        {"spec": "2.12", "mirror": "pypi"},
        ["download.pytorch.org/whl/cu126", "≥ 580.65.06"],
    ),
    (
        [A100],
        D535,
        "3.12",
        {"spec": "2.14", "allow_minor_version_compat": False},
        ["allow CUDA minor-version compatibility", "≥ 560.28.03"],
    ),
    ([RTX3090], None, "3.12", {}, ["no NVIDIA driver", "CPU-only"]),
]


@pytest.mark.parametrize(
    ("gpus", "driver", "python", "request_kw", "words"),
    NO_PLAN_CASES,
    ids=[f"{'+'.join(c[0])}|{c[1]}|py{c[2]}|{c[3]}" for c in NO_PLAN_CASES],
)
def test_no_plan(gpus, driver, python, request_kw, words):
    result = resolve(gpus, driver, python, **request_kw)
    assert isinstance(result, NoPlan), f"unexpected plan {getattr(result, 'pin', result)}"
    text = result.explanation + "\n" + "\n".join(result.options)
    for w in words:
        assert w in text, f"{w!r} not in:\n{text}"
    assert result.reasons
    doc = result_document(result)
    assert doc["plan"] is None and doc["options"] == result.options


def test_k80_explains_the_arch():
    result = resolve([K80], D470, "3.10", spec="2.9")
    assert isinstance(result, NoPlan)
    assert "Tesla K80 (sm_37)" in result.explanation
    assert any("no sm_37 SASS or PTX" in r for r in result.reasons)


def test_k80_driver_cap_is_mentioned():
    """K80's last driver branch is R470: an option needing R580 says it may be impossible."""
    result = resolve([K80], D470, "3.10", spec="2.9")
    assert isinstance(result, NoPlan)
    assert not any(
        "upgrade the NVIDIA driver" in o for o in result.options
    )  # no driver helps sm_37 on 2.9
    result = resolve([K80, T4], D418, "3.10")
    assert isinstance(result, NoPlan)
    driver_opt = next(o for o in result.options if o.startswith("upgrade the NVIDIA driver"))
    assert "2.7.1+cu118" in driver_opt  # the newest build serving both sm_37 and sm_75


def test_minor_version_compat_warns_and_explains():
    plan = resolve([V100], D535, "3.12")
    assert isinstance(plan, InstallPlan)
    assert plan.mode == "minor-version-compat"
    warning = next(w for w in plan.warnings if "minor-version compatibility" in w)
    assert "PTX JIT is unavailable" in warning and "560.28.03" in warning
    full = resolve([V100], D580, "3.12")
    assert isinstance(full, InstallPlan) and full.mode == "full"
    assert not any("minor-version" in w for w in full.warnings)


def test_ada_runs_ampere_sass_with_a_note():
    plan = resolve([RTX4090], D535, "3.12")
    assert isinstance(plan, InstallPlan)
    assert any("sm_89" in w and "sm_86 SASS" in w for w in plan.warnings)


def test_ptx_is_not_used_under_minor_version_compat():
    """A future sm_121 GPU (cc 12.1) runs sm_120 SASS; cc 13.0 would need 12.0+PTX = full driver."""
    fut = HostFacts(
        gpus=(GpuFact(name="future", cc="13.0"),), driver_version=D570, python_version="3.12"
    )
    result = resolve_install_plan(fut, TorchRequest())
    assert isinstance(result, NoPlan)  # cu129 of 2.8 has 12.0+PTX but 570 < 575.51.03 (full)
    assert any("PTX JIT is unavailable" in r for r in result.reasons)
    fut = HostFacts(
        gpus=(GpuFact(name="future", cc="13.0"),), driver_version=D580, python_version="3.12"
    )
    plan = resolve_install_plan(fut, TorchRequest())
    assert isinstance(plan, InstallPlan) and plan.mode == "ptx-jit" and plan.variant == "cu130"
    assert any("JIT-compiled from compute_120 PTX" in w for w in plan.warnings)


def test_pip_args_and_index_urls():
    plan = resolve([RTX3090], D550, "3.12", spec="2.5.1")
    assert isinstance(plan, InstallPlan)
    assert plan.pip_args == [
        "install", "torch==2.5.1", "torchvision==0.20.1", "torchaudio==2.5.1",
        "--index-url", "https://download.pytorch.org/whl/cu124",
    ]  # fmt: skip
    assert plan.pip_command("/opt/venv/bin/python")[:3] == ["/opt/venv/bin/python", "-m", "pip"]
    assert plan.cudnn == "9.1.0.70"
    mirror = resolve(
        [RTX3090], D550, "3.12", spec="2.5.1", index_base="https://mirrors.nju.edu.cn/pytorch/whl/"
    )
    assert mirror.index_url == "https://mirrors.nju.edu.cn/pytorch/whl/cu124"
    pypi = resolve([RTX3090], D550, "3.12", spec="2.5.1", mirror="pypi",
                   index_base="https://pypi.tuna.tsinghua.edu.cn/simple")  # fmt: skip
    assert pypi.variant == "cu124"
    assert pypi.pip_args[-2:] == ["--index-url", "https://pypi.tuna.tsinghua.edu.cn/simple"]
    assert not any("+cu" in a for a in pypi.pip_args)
    legacy = resolve([A100], D525, "3.7")
    assert legacy.pip_args[1:4] == [
        "torch==1.13.1+cu117",
        "torchvision==0.14.1+cu117",
        "torchaudio==0.13.1+cu117",
    ]
    assert legacy.pip_args[-2] == "--extra-index-url"
    no_audio = resolve([RTX3090], D550, "3.12", torchaudio=False)
    assert no_audio.torchaudio is None and not any("torchaudio" in a for a in no_audio.pip_args)


def test_torchaudio_after_2_11_is_2_11_1():
    plan = resolve([A100], D595, "3.12")
    assert plan.torch == "2.14.0" and plan.torchaudio == "2.11.1"
    assert "torchaudio==2.11.1" in plan.pip_args
    assert any("torchaudio 2.11.1" in w for w in plan.warnings)


@pytest.mark.parametrize(
    ("installed", "torch_cuda", "spec", "variant", "action", "pin"),
    [
        ("2.5.1+cu124", None, "2.5", None, "keep", "2.5.1+cu124"),
        ("2.5.1+cu124", None, "any", None, "keep", "2.5.1+cu124"),
        ("2.5.1+cu124", None, "latest", None, "install", "2.14.0+cu126"),  # latest means the newest
        ("2.5.1+cu124", None, "2.5", "cu121", "install", "2.5.1+cu121"),  # explicit variant differs
        (
            "2.14.0",
            "12.6",
            "latest",
            None,
            "keep",
            "2.14.0+cu126",
        ),  # PyPI-style version, CUDA from torch
        (
            "2.14.0+cu130",
            None,
            "latest",
            None,
            "install",
            "2.14.0+cu126",
        ),  # cu130 needs driver >= 580
        ("2.14.0+cpu", None, "any", None, "install", "2.14.0+cu126"),  # CPU build on a GPU host
        ("2.99.0+cu126", None, "any", None, "install", "2.14.0+cu126"),  # not in the table
    ],
)
def test_installed_torch(installed, torch_cuda, spec, variant, action, pin):
    result = resolve([RTX3090], D550, "3.12", {"torch_version": installed, "torch_cuda": torch_cuda},
                     spec=spec, variant=variant)  # fmt: skip
    assert isinstance(result, InstallPlan)
    assert (result.action, f"{result.torch}+{result.variant}") == (action, pin), result.reasons
    if action == "keep":
        assert result.pip_args == [] and "keep it" in result.reasons[-1]
    else:
        assert any(installed in r for r in result.reasons)


def test_keep_latest_when_installed_is_newest_and_fits():
    plan = resolve([A100], D580, "3.12", {"torch_version": "2.14.0+cu126"})
    assert isinstance(plan, InstallPlan) and plan.action == "keep" and plan.variant == "cu126"
    assert result_document(plan)["plan"]["action"] == "keep"


def test_aarch64():
    gh200 = HostFacts(gpus=(GpuFact(name="NVIDIA GH200 480GB", cc="9.0"),), driver_version=D580,
                      python_version="3.12", arch="aarch64")  # fmt: skip
    plan = resolve_install_plan(gh200, TorchRequest())
    assert isinstance(plan, InstallPlan) and plan.pin == "2.14.0+cu130"
    old = resolve_install_plan(gh200, TorchRequest(spec="2.11"))
    assert isinstance(old, NoPlan)
    assert any("aarch64" in r for r in old.reasons)
    assert any("CPU-only build: torch 2.11.0+cpu" in o for o in old.options)


def test_cuda_max_only_and_forward_compat():
    """Without a driver version, nvidia-smi's CUDA decides; a compat package can raise it."""
    only_cuda = HostFacts(gpus=(GpuFact(cc="8.6"),), cuda_max="12.2", python_version="3.12")
    plan = resolve_install_plan(only_cuda, TorchRequest(allow_minor_version_compat=False))
    assert plan.pin == "2.7.1+cu118"  # the newest build whose CUDA (11.8) is <= 12.2
    plan = resolve_install_plan(
        only_cuda, TorchRequest(spec="2.5", allow_minor_version_compat=False)
    )
    assert plan.pin == "2.5.1+cu121"
    forward = HostFacts(
        gpus=(GpuFact(cc="8.0"),), driver_version=D470, cuda_max="12.8", python_version="3.12"
    )
    plan = resolve_install_plan(forward, TorchRequest(allow_minor_version_compat=False))
    assert (
        plan.pin == "2.14.0+cu126"
    )  # 470 + a cuda-compat package reporting 12.8: 12.6 is fully supported


def test_unknown_gpu_without_cc():
    result = resolve_install_plan(
        HostFacts(gpus=(GpuFact(name="Mystery GPU 9000"),), driver_version=D580)
    )
    assert isinstance(result, NoPlan)
    assert "Mystery GPU 9000" in result.explanation and "--cc" in result.options[0]


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("spec", "two point five", "torch spec"),
        ("variant", "cuda12", "variant"),
        ("mirror", "conda", "mirror kind"),
        ("python", "python3", "Python version"),
        ("python", "2.7", "Python 3"),
        ("driver", "535", "NVIDIA driver version"),
        ("arch", "ppc64le", "x86_64 and aarch64"),
    ],
)
def test_bad_input_is_a_clear_error(field, value, words):
    kw = {"gpus": (GpuFact(cc="8.6"),), "driver_version": D550, "python_version": "3.12"}
    req = {}
    if field in ("spec", "variant", "mirror"):
        req[field] = value
    else:
        kw[{"python": "python_version", "driver": "driver_version", "arch": "arch"}[field]] = value
    with pytest.raises(ResolveInputError) as exc:
        resolve_install_plan(HostFacts(**kw), TorchRequest(**req))
    assert words in str(exc.value) and value in str(exc.value)


def test_spec_matching_nothing():
    result = resolve([A100], D580, "3.12", spec="3.0")
    assert isinstance(result, NoPlan) and "known releases" in result.options[0]


def test_from_facts_document():
    doc = {  # the shape provision/agent/facts produces
        "nvidia": {"driver_version": D535, "cuda_driver_version": "12.2"},
        "gpus": [
            {
                "index": 0,
                "name": RTX3090,
                "compute_capability": "8.6",
                "memory": {"total_mib": 24576},
            }
        ],
        "python": {"version": "3.10.12", "executable": "/usr/bin/python3"},
        "torch": {"version": "2.5.1+cu121", "cuda": "12.1"},
        "os": {"arch": "x86_64"},
    }
    f = HostFacts.from_facts(doc)
    assert f.gpus[0].cc == "8.6" and f.gpus[0].memory_mib == 24576 and f.cuda_max == "12.2"
    assert f.driver_version == D535 and f.python_version == "3.10.12" and f.arch == "x86_64"
    plan = resolve_install_plan(f, TorchRequest(spec="2.5"))
    assert plan.action == "keep" and plan.pin == "2.5.1+cu121"
    # a facts section that failed is an {"error": ...} mapping, not a list
    broken = HostFacts.from_facts(
        {
            "nvidia": {"error": "x"},
            "gpus": {"error": "x"},
            "python": {"agent": {"version": "3.12.3"}},
        }
    )
    assert broken.gpus == () and broken.driver_version is None and broken.python_version == "3.12.3"
    with pytest.raises(ResolveInputError, match="Python version"):
        resolve_install_plan(HostFacts.from_facts({}))


# --- invariant sweep -------------------------------------------------------------------------

# Facts written down independently of the resolver (from the fact sheet's key_facts).
GPU_CC = {K80: (3, 7), P100: (6, 0), V100: (7, 0), T4: (7, 5), RTX3090: (8, 6), RTX4090: (8, 9),
          RTX5090: (12, 0), A100: (8, 0), H100: (9, 0), B200: (10, 0)}  # fmt: skip
NEVER = {
    K80: lambda v, rel: v not in ("cu102", "cu113", "cu116", "cu117", "cu118"),
    P100: lambda v, rel: v in ("cu128", "cu129", *CU13),
    V100: lambda v, rel: v in CU13 or (v == "cu128" and rel >= Version("2.11")),
    RTX5090: lambda v, rel: v not in ("cu128", "cu129", *CU13) or rel < Version("2.7"),
    B200: lambda v, rel: v not in ("cu128", "cu129", *CU13) or rel < Version("2.7"),
}
MVC_FLOOR = {
    "10": "440.33",
    "11": "450.80.02",
    "12": "525.60.13",
    "13": "580.65.06",
}  # 10.x: no MVC
PYTHONS = ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]
DRIVERS = [D418, D450, D470, D525, D535, D550, D570, D580, D595]


@pytest.mark.parametrize("allow_mvc", [True, False])
def test_invariants_over_all_combinations(allow_mvc):
    data = load_compat()
    plans = 0
    for gpu, driver, py in itertools.product(GPU_CC, DRIVERS, PYTHONS):
        result = resolve([gpu], driver, py, allow_minor_version_compat=allow_mvc)
        if isinstance(result, NoPlan):
            assert result.options and result.explanation
            continue
        plans += 1
        where = f"{gpu} {driver} py{py} -> {result.pin}"
        rel = data.release(result.torch)
        tag = result.variant
        assert tag != "cpu", where  # GPU hosts never silently get a CPU build
        # Python: within the release's range (or its listed experimental versions)
        pyv = Version(py)
        assert (
            Version(rel.python_min) <= pyv <= Version(rel.python_max)
            or py in rel.python_experimental
        ), where
        # Driver: CUDA 13 needs >= 580; otherwise the family floor, or the full driver without MVC
        major = tag[2:-1]
        assert parse_driver(driver) >= parse_driver(MVC_FLOOR[major]), where
        if not allow_mvc or result.mode == "ptx-jit":
            assert parse_driver(driver) >= parse_driver(data.min_driver_full(result.cuda)), where
        if major == "13":
            assert parse_driver(driver) >= (580, 65, 6), where
        # Known-bad variants per GPU
        if gpu in NEVER:
            assert not NEVER[gpu](tag, Version(result.torch)), where
        # The GPU is served by same-major SASS of lower-or-equal minor, or by PTX on a full driver
        cc = GPU_CC[gpu]
        archs = rel.variants[tag].archs
        sass = any(a.major == cc[0] and a.minor <= cc[1] for a in archs)
        assert sass or (result.mode == "ptx-jit" and any(a.ptx and a.cc <= cc for a in archs)), (
            where
        )
    assert plans > 300  # most of the 630 combinations have a plan


# --- `provision check --offline` -------------------------------------------------------------


def _check(capsys, *argv):
    import json

    from provision.cli.main import main

    rc = main(["check", "--offline", *argv])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.strip() else None), err


def test_cli_offline_json(capsys):
    rc, doc, _ = _check(capsys, "--gpu", V100, "--driver", D580, "--python", "3.12", "--json")
    assert rc == 0
    assert set(doc) >= {"plan", "reasons", "warnings", "options"}
    plan = doc["plan"]
    assert (plan["torch"], plan["variant"], plan["action"]) == ("2.14.0", "cu126", "install")
    assert plan["index_url"] == "https://download.pytorch.org/whl/cu126"
    assert plan["pip_args"][:2] == ["install", "torch==2.14.0"]
    rc, doc, _ = _check(
        capsys, "--cc", "8.6", "--cc", "12.0", "--driver", D570, "--python", "3.11", "--json"
    )
    assert rc == 0 and doc["plan"]["variant"] == "cu128" and doc["plan"]["torch"] == "2.11.0"


def test_cli_offline_no_plan(capsys):
    rc, doc, _ = _check(
        capsys, "--gpu", K80, "--driver", D470, "--python", "3.10", "--torch", "2.9", "--json"
    )
    assert rc == 1 and doc["plan"] is None
    assert any("2.7.1+cu118" in o for o in doc["options"])
    rc, doc, err = _check(
        capsys, "--gpu", K80, "--driver", D470, "--python", "3.10", "--torch", "2.9"
    )
    assert (
        rc == 1 and doc is None and "no PyTorch build matches torch 2.9" in err and "options" in err
    )


def test_cli_offline_cpu_host_and_human_output(capsys):
    rc, doc, err = _check(capsys, "--python", "3.12")
    assert rc == 0 and doc is None
    assert "install torch 2.14.0+cpu" in err and "pip install torch==2.14.0" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--gpu", "RTX 3009", "--driver", D535], "did you mean 'NVIDIA GeForce RTX 3090'"),
        (["--gpu", RTX3090], "--driver VERSION"),
        (["--gpu", RTX3090, "--cc", "8.6", "--cc", "9.0", "--driver", D535], "one --cc per --gpu"),
        (["--cc", "8.6", "--driver", "535"], "NVIDIA driver version"),
        (["--cc", "8.6", "--driver", D535, "--torch", "newest"], "torch spec"),
        (["localhost"], "give no TARGET"),
    ],
)
def test_cli_offline_usage_errors(capsys, argv, words):
    rc, _, err = _check(capsys, *argv)
    assert rc == 2 and words in " ".join(err.split()), err
