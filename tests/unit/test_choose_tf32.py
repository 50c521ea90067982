"""Issue 31 items 6-8 for `provision choose`: TF32 as its own precision (read from the job's script
and environment), card memory by the MiB the driver reports, a memory breakdown whose parts add up,
and convolutions by the faster cuDNN algorithm (Winograd on CUDA cores, NCHW transposes on tensor
cores). Each of these fails on 903c471."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from provision.choose import catalogue, graph, memory, models, plan, precision, speed
from provision.compat.loader import load_compat


@pytest.fixture(scope="module")
def bert() -> tuple[models.ModelSpec, graph.Profile]:
    spec = models.resolve("bert-base", seq_len=128)
    return spec, graph.measure(spec)


# --- 6. TF32 -------------------------------------------------------------------------------------

def test_tf32_runs_matmuls_on_tf32_tensor_cores_where_they_exist_and_says_so(bert) -> None:
    _, profile = bert
    a100, v100 = catalogue.require("A100-SXM4-80GB"), catalogue.require("V100-SXM2-16GB")
    fp32 = speed.step(profile, a100, "fp32", "adamw", 32, 32).samples_per_s
    tf32 = speed.step(profile, a100, "tf32", "adamw", 32, 32).samples_per_s
    assert tf32 > 2.5 * fp32  # A100: TF32 156 vs FP32 19.5 TFLOPS; BERT is mostly matmuls
    # no TF32 on Volta: the same IEEE FP32 rate, and the document says why
    assert speed.step(profile, v100, "tf32", "adamw", 32, 32).samples_per_s == pytest.approx(
        speed.step(profile, v100, "fp32", "adamw", 32, 32).samples_per_s)
    assert speed.rates(a100, "tf32")["matmul"] == "TF32 tensor cores 156"
    assert speed.rates(a100, "fp32")["matmul"] == "FP32 CUDA cores 19.5"
    assert "no TF32" in speed.rates(v100, "tf32")["matmul"]
    # storage is fp32's: the same memory
    assert memory.estimate(profile, "tf32", "adamw") == memory.estimate(profile, "fp32", "adamw")


def test_each_prediction_in_the_document_names_the_rates_it_assumed(bert) -> None:
    spec, profile = bert
    req = plan.Request(batch=16, precision="tf32", precision_from="train.py:3 torch.set_float32_matmul_precision('high')")
    doc = plan.build(spec, profile, req, [catalogue.require("A100-SXM4-80GB"), catalogue.require("T4")], [])
    json.dumps(doc)
    assert doc["request"]["precision"] == "tf32" and doc["request"]["precision_from"].startswith("train.py:3")
    by = {g["gpu"]: g for g in doc["gpus"]}
    assert by["NVIDIA A100-SXM4-80GB"]["rates"]["matmul"].startswith("TF32 tensor cores")
    assert by["Tesla T4"]["rates"]["matmul"].startswith("FP32 CUDA cores")


@pytest.mark.parametrize(("source", "want"), [
    ('import torch\ntorch.set_float32_matmul_precision("high")\n', "tf32"),
    ("import torch\ntorch.set_float32_matmul_precision('medium')\n", "tf32"),
    ("import torch\ntorch.set_float32_matmul_precision('highest')\n", None),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", "tf32"),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = False\n", None),
    ("# torch.set_float32_matmul_precision('high')\nx = 1\n", None),  # a comment sets nothing
    ("args = TrainingArguments('out', tf32=True)\n", "tf32"),
    ("args = TrainingArguments('out', bf16=True, tf32=True)\n", "bf16"),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\nwith torch.autocast('cuda'):\n    pass\n", "amp"),
    ("with torch.autocast('cuda', dtype=torch.bfloat16):\n    pass\n", "bf16"),
    ("scaler = torch.cuda.amp.GradScaler()\n", "amp"),
    ("trainer = L.Trainer(precision='bf16-mixed')\n", "bf16"),
    ("def broken(:\n", None),
])
def test_the_precision_a_script_sets(source: str, want: str | None) -> None:
    found = precision.from_script(source, "train.py")
    assert (found.precision if found else None) == want
    if found:
        assert found.evidence.startswith("train.py:")


def test_nvidias_container_environment_makes_fp32_tf32() -> None:
    plain = "import torch\nmodel = torch.nn.Linear(2, 2)\n"
    assert precision.detect(plain, {}) is None
    found = precision.detect(plain, {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"})
    assert found is not None and found.precision == "tf32" and "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE" in found.evidence
    # autocast in the script still decides what the matmuls run in
    assert precision.detect("with torch.autocast('cuda'):\n    pass\n",
                            {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}).precision == "amp"


def test_the_cli_reads_the_precision_from_the_script(tmp_path, capsys) -> None:
    from provision.cli.main import main

    script = tmp_path / "train.py"
    script.write_text("import torch\n\ntorch.set_float32_matmul_precision('high')\n")
    rc = main(["choose", "--model", "resnet18", "--image-size", "64", "--gpu", "A100-SXM4-80GB",
               "--script", str(script), "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["request"]["precision"] == "tf32"
    assert doc["request"]["precision_from"].startswith("train.py:3 ")
    assert doc["gpus"][0]["rates"]["matmul"] == "TF32 tensor cores 156"


# --- 7. card memory as the driver reports it -----------------------------------------------------

def test_card_memory_is_the_drivers_mib_with_its_source() -> None:
    reported = {"A10": 23028, "T4": 15360, "H100 SXM": 81559, "H200": 143771, "RTX 3090": 24576}
    for name, mib in reported.items():
        spec = catalogue.require(name)
        assert spec.vram_mib == mib, name
        assert spec.memory_gib == pytest.approx(mib / 1024)
        assert spec.vram_source and ":" in spec.vram_source
    for g in load_compat().gpus:  # every card: a figure and where it came from (or the rule used)
        assert g.vram_mib and g.vram_source, g.name
        assert g.vram_mib <= g.vram_gb * 1024, g.name  # never more than the marketing size


def test_an_a10_fits_a_smaller_batch_than_a_3090(bert) -> None:
    spec, profile = bert
    req = plan.Request(batch=8, precision="amp")
    doc = plan.build(spec, profile, req, [catalogue.require("A10"), catalogue.require("RTX 3090")], [])
    a10, rtx3090 = doc["gpus"]
    assert a10["memory_gb"] == pytest.approx(22.49, abs=0.01) and rtx3090["memory_gb"] == 24
    assert 0 < a10["max_batch"] < rtx3090["max_batch"]


# --- 8. the memory breakdown adds up --------------------------------------------------------------

@pytest.mark.parametrize("prec", ["amp", "fp32", "bf16", "tf32"])
def test_the_memory_parts_add_up_to_the_total(bert, prec: str) -> None:
    spec, profile = bert
    doc = plan.build(spec, profile, plan.Request(batch=24, precision=prec), [catalogue.require("A100-SXM4-80GB")], [])
    mem = doc["model"]["memory"]
    parts = ("weights_gb", "grads_gb", "optimizer_gb", "amp_weight_copies_gb", "saved_fixed_gb",
             "activations_gb", "cuda_context_gb", "fragmentation_gb")
    assert sum(mem[k] for k in parts) == pytest.approx(mem["total_gb"], rel=1e-3)
    assert (mem["amp_weight_copies_gb"] > 0) == (prec == "amp")
    assert mem["cuda_context_gb"] == memory.CONTEXT_GB and mem["fragmentation_gb"] > 0


# --- 8. convolutions: the algorithm cuDNN would pick ------------------------------------------

class _Convs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.s = nn.Conv2d(3, 64, 1, bias=False)  # 1x1 stem
        self.a = nn.Conv2d(64, 64, 3, padding=1, bias=False)  # 3x3 stride 1: Winograd
        self.b = nn.Conv2d(64, 64, 3, stride=2, padding=1, bias=False)  # strided: not
        self.c = nn.Conv2d(64, 64, 1, bias=False)  # 1x1: not

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.b(self.a(self.s(x)))).mean(dim=(2, 3))


def test_only_3x3_stride_1_convolutions_are_winograd_candidates() -> None:
    spec = models.ModelSpec("convs", _Convs, models.IMAGE, image_size=32)
    profile = graph.measure(spec)
    convs = [op for op in profile.ops if op.kind == graph.CONV]
    flagged = [op for op in convs if op.winograd]
    assert len(convs) == 8  # 4 layers, forward + backward each
    assert len(flagged) == 2  # the 3x3 stride-1 layer's forward and backward


def test_fp32_convolutions_take_the_faster_cudnn_algorithm() -> None:
    op = graph.Op(graph.CONV, 0.0, 2e9, 0.0, 4e6, 0.0, 0.0, winograd=True)
    plain = graph.Op(graph.CONV, 0.0, 2e9, 0.0, 4e6, 0.0, 0.0, winograd=False)
    v100, h100 = catalogue.require("V100-SXM2-16GB"), catalogue.require("H100 SXM")
    p = speed.peaks(v100, "fp32")
    # CUDA cores only (no TF32 on Volta): Winograd F(2x2,3x3) does 2.25x fewer multiplies
    t_w, t_p = speed._op_time(op, 2e9, 4e6, p), speed._op_time(plain, 2e9, 4e6, p)
    assert (t_p - speed.LAUNCH_S) / (t_w - speed.LAUNCH_S) == pytest.approx(speed.WINOGRAD_SAVING, rel=1e-6)
    # H100: TF32 tensor cores (494.7) beat FP32 CUDA cores even with Winograd, and pay the
    # NCHW<->NHWC transposes those kernels need: more than the bytes of the op alone
    q = speed.peaks(h100, "fp32")
    t = speed._op_time(op, 2e9, 4e6, q)
    bytes_only = 4e6 / (q.bandwidth_gbs * 1e9 * speed.MEMORY_EFFICIENCY)
    compute = 2e9 / (q.conv_tflops * 1e12 * speed.EFFICIENCY[graph.CONV])
    assert t == pytest.approx(max(compute, bytes_only) + 2 * bytes_only + 3 * speed.LAUNCH_S)
