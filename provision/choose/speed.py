"""Training speed from arithmetic: a roofline per op of the model's own graph.

Each traced op takes max(FLOPs / (peak × efficiency of its kind), bytes / (bandwidth × memory
efficiency)) plus a launch cost; a step is the sum over its ops, plus the optimizer's pass over
the parameters (memory-bound: it reads and writes weights, grads and states once) and, under
AMP, the fp16 weight copies autocast makes. Peaks are the catalogue's dense datasheet numbers
for the unit the op runs on (`peaks`): AMP → fp16 tensor cores, bf16 → bf16; fp32 → FP32 CUDA
cores for matmuls (PyTorch leaves TF32 off for them); tf32 (NVIDIA's containers,
set_float32_matmul_precision("high")) → TF32 tensor cores for matmuls where the GPU has them.
A convolution takes the faster of the algorithms cuDNN has for it (`_conv_time`, docs/choose.md):
implicit GEMM on the tensor cores (TF32 for fp32 tensors, cuDNN's default) with the NCHW<->NHWC
transposes those kernels need around them, or, for fp32 tensors, the CUDA cores, where a 3x3
stride-1 convolution runs as Winograd F(2x2, 3x3) with 2.25x fewer multiplies.
The efficiencies are per op kind and the same for every GPU: no per-(model, GPU) input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from provision.choose.graph import ATTENTION, CONV, MATMUL, MEMORY, Op, Profile
from provision.compat.loader import GpuSpec

# Fraction of the datasheet peak an op kind reaches in practice (large GEMMs ~70% of the tensor
# peak, cuDNN convolutions less, element-wise kernels ~75% of DRAM bandwidth).
EFFICIENCY = {MATMUL: 0.70, CONV: 0.40, ATTENTION: 0.55}
MEMORY_EFFICIENCY = 0.75
LAUNCH_S = 4e-6  # per kernel: launch + the tail of a kernel too small to fill the GPU
# Winograd F(2x2, 3x3): 16 multiplies for a 2x2 output tile instead of 36 (Lavin & Gray 2016);
# the tile cuDNN's fused fp32 Winograd kernel uses. Counted only on CUDA cores (fp32 tensors).
WINOGRAD_SAVING = 36 / 16
# Tensor-core convolution kernels work in NHWC; PyTorch's default layout is NCHW, so cuDNN
# transposes the input in and the output back: each read and written once more, two kernels more.
NCHW_TRANSPOSE_PASSES = 2
# Optimizer pass, bytes moved per trainable parameter (read + write): p, g, and states.
_OPT_BYTES = {("fp32", "adam"): 28, ("fp32", "sgd"): 20, ("amp", "adam"): 36, ("amp", "sgd"): 28,
              ("bf16", "adam"): 22, ("bf16", "sgd"): 14}


class Unsupported(ValueError):
    """The GPU cannot run this precision (no bf16 before compute capability 8.0)."""


def storage(precision: str) -> str:
    """The dtype tensors are kept in: TF32 is fp32 storage, rounded only inside the tensor cores."""
    return "fp32" if precision == "tf32" else precision


@dataclass(frozen=True)
class Peaks:
    matmul_tflops: float
    conv_tflops: float  # tensor-core convolutions (0: none)
    bandwidth_gbs: float
    cuda_fp32_tflops: float = 0.0  # fp32 tensors only: the CUDA-core alternative for convolutions
    matmul_unit: str = ""
    conv_unit: str = ""


def peaks(gpu: GpuSpec, precision: str) -> Peaks:
    bw = float(gpu.bw_gbs or 0)
    fp32 = float(gpu.fp32 or 0)
    tf32 = float(gpu.tf32 or 0)
    if precision in ("fp32", "tf32"):
        conv_unit = f"TF32 tensor cores {tf32:g} or FP32 CUDA cores {fp32:g} (the faster)" if tf32 \
            else f"FP32 CUDA cores {fp32:g} (no TF32 before compute capability 8.0)"
        if precision == "tf32" and tf32:
            return Peaks(tf32, tf32, bw, fp32, f"TF32 tensor cores {tf32:g}", conv_unit)
        why = " (no TF32 before compute capability 8.0)" if precision == "tf32" else ""
        return Peaks(fp32, tf32, bw, fp32, f"FP32 CUDA cores {fp32:g}{why}", conv_unit)
    if precision == "bf16":
        if not gpu.bf16:
            raise Unsupported(f"no bf16 on {gpu.name} (compute capability {gpu.cc})")
        unit = f"BF16 tensor cores {float(gpu.bf16):g}"
        return Peaks(float(gpu.bf16), float(gpu.bf16), bw, 0.0, unit, unit)
    half = float(gpu.fp16 or gpu.bf16 or fp32)  # AMP: fp16 (or bf16 where that is what exists)
    if float(gpu.cc) < 7.0:  # no tensor cores before Volta: packed fp16 (or fp32) on CUDA cores
        unit = f"{'FP16' if gpu.fp16 else 'FP32'} CUDA cores {half:g}"
        return Peaks(half, 0.0, bw, half, unit, unit)
    unit = f"FP16 tensor cores {half:g}"
    return Peaks(half, half, bw, 0.0, unit, unit)


def rates(gpu: GpuSpec, precision: str) -> dict[str, Any]:
    """Which units and datasheet peaks (TFLOPS, dense) a prediction assumed, for the document."""
    p = peaks(gpu, precision)
    return {"matmul": p.matmul_unit, "conv": p.conv_unit, "memory_gbs": p.bandwidth_gbs}


def _mem_s(nbytes: float, p: Peaks) -> float:
    return nbytes / (p.bandwidth_gbs * 1e9 * MEMORY_EFFICIENCY)


def _conv_time(op: Op, flops: float, nbytes: float, p: Peaks) -> float:
    """The faster algorithm cuDNN has for this convolution (its heuristics and benchmark mode
    pick by speed): tensor-core implicit GEMM in NHWC, or CUDA-core FP32 (Winograd for 3x3)."""
    options = []
    if p.conv_tflops > 0:
        transposes = NCHW_TRANSPOSE_PASSES * nbytes
        options.append(max(flops / (p.conv_tflops * 1e12 * EFFICIENCY[CONV]), _mem_s(nbytes, p))
                       + _mem_s(transposes, p) + 3 * LAUNCH_S)
    if p.cuda_fp32_tflops > 0:
        work = flops / WINOGRAD_SAVING if op.winograd else flops
        options.append(max(work / (p.cuda_fp32_tflops * 1e12 * EFFICIENCY[CONV]), _mem_s(nbytes, p)) + LAUNCH_S)
    return min(options) if options else _mem_s(nbytes, p) + LAUNCH_S


def _op_time(op: Op, flops: float, nbytes: float, p: Peaks) -> float:
    if op.kind == CONV and flops > 0:
        return _conv_time(op, flops, nbytes, p)
    mem = _mem_s(nbytes, p)
    if op.kind == MEMORY or flops <= 0:
        return mem + LAUNCH_S
    return max(flops / (p.matmul_tflops * 1e12 * EFFICIENCY[op.kind]), mem) + LAUNCH_S


def forward_backward_s(profile: Profile, gpu: GpuSpec, precision: str, micro_batch: int) -> float:
    """Seconds for one forward + backward of `micro_batch` samples on one GPU."""
    p = peaks(gpu, precision)
    scale = 0.5 if precision in ("amp", "bf16") else 1.0
    total = 0.0
    for op in profile.ops:
        flops = op.flops_fixed + micro_batch * op.flops_per
        nbytes = (op.fbytes_fixed + micro_batch * op.fbytes_per) * scale + op.ibytes_fixed + micro_batch * op.ibytes_per
        total += _op_time(op, flops, nbytes, p)
    return total


def optimizer_s(profile: Profile, gpu: GpuSpec, precision: str, optimizer: str) -> float:
    """Seconds for the optimizer step (+ AMP's weight casts): memory-bound passes over the params."""
    per_param = _OPT_BYTES[(storage(precision), "sgd" if optimizer == "sgd" else "adam")]
    casts = 6 * profile.params if precision == "amp" else 0  # read fp32, write fp16, every step
    nbytes = per_param * profile.trainable + casts
    return nbytes / (float(gpu.bw_gbs or 1) * 1e9 * MEMORY_EFFICIENCY)


@dataclass(frozen=True)
class Step:
    micro_batch: int
    accumulation: int
    seconds: float  # one optimizer step (all micro-batches, all GPUs in parallel)
    samples_per_s: float
    scaling: str  # the multi-GPU assumption, in words ("" on one GPU)


# Multi-GPU data parallelism: gradients all-reduced once per step (ring: 2(n-1)/n of their bytes
# over the slowest link), overlapped with backward except what exceeds OVERLAP of the compute.
OVERLAP = 0.6
NVLINK_GBS = 150.0  # effective all-reduce bandwidth over NVLink when the offer does not say
PCIE_GBS = 10.0  # ... over PCIe (through the host when P2P is off)


def step(profile: Profile, gpu: GpuSpec, precision: str, optimizer: str, batch: int,
         max_batch: int, count: int = 1, link: str | None = None, link_gbs: float | None = None) -> Step:
    """One optimizer step of a global `batch` over `count` GPUs, each doing ceil(batch/count)
    samples in micro-batches of at most `max_batch` (gradient accumulation)."""
    share = -(-batch // count)
    accumulation = -(-share // max(1, min(share, max_batch)))
    micro = -(-share // accumulation)  # even micro-batches: 64 in 3 steps is 22+22+22, not 26+26+26
    compute = accumulation * forward_backward_s(profile, gpu, precision, micro)
    seconds = compute + optimizer_s(profile, gpu, precision, optimizer)
    scaling = ""
    if count > 1:
        kind = link or ("nvlink" if gpu.nvlink else "pcie")
        bw = link_gbs or (NVLINK_GBS if kind == "nvlink" else PCIE_GBS)
        grad_bytes = profile.trainable * (2 if precision == "bf16" else 4)
        comm = 2 * (count - 1) / count * grad_bytes / (bw * 1e9)
        exposed = max(comm - OVERLAP * compute, 0.1 * comm)
        seconds += exposed
        scaling = (f"data parallel over {kind} at {bw:g} GB/s: all-reduce {comm * 1e3:.0f} ms/step,"
                   f" {exposed * 1e3:.0f} ms not hidden behind backward")
    return Step(micro, accumulation, seconds, count * micro * accumulation / seconds, scaling)
