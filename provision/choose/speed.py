"""Training speed from arithmetic: a roofline per op of the model's own graph.

Each traced op takes max(FLOPs / (peak × efficiency of its kind), bytes / (bandwidth × memory
efficiency)) plus a launch cost; a step is the sum over its ops, plus the optimizer's pass over
the parameters (memory-bound: it reads and writes weights, grads and states once) and, under
AMP, the fp16 weight copies autocast makes. Peaks are the catalogue's dense datasheet numbers
for the dtype the op runs in: AMP → fp16 tensor cores, bf16 → bf16, fp32 → FP32 for matmuls
(PyTorch leaves TF32 off for them) and TF32 for convolutions (cuDNN's default allows it).
The efficiencies are per op kind and the same for every GPU: no per-(model, GPU) input.
"""

from __future__ import annotations

from dataclasses import dataclass

from provision.choose.graph import ATTENTION, CONV, MATMUL, MEMORY, Profile
from provision.compat.loader import GpuSpec

# Fraction of the datasheet peak an op kind reaches in practice (large GEMMs ~70% of the tensor
# peak, cuDNN convolutions less, element-wise kernels ~75% of DRAM bandwidth).
EFFICIENCY = {MATMUL: 0.70, CONV: 0.40, ATTENTION: 0.55}
MEMORY_EFFICIENCY = 0.75
LAUNCH_S = 4e-6  # per kernel: launch + the tail of a kernel too small to fill the GPU
# Optimizer pass, bytes moved per trainable parameter (read + write): p, g, and states.
_OPT_BYTES = {("fp32", "adam"): 28, ("fp32", "sgd"): 20, ("amp", "adam"): 36, ("amp", "sgd"): 28,
              ("bf16", "adam"): 22, ("bf16", "sgd"): 14}


class Unsupported(ValueError):
    """The GPU cannot run this precision (no bf16 before compute capability 8.0)."""


@dataclass(frozen=True)
class Peaks:
    matmul_tflops: float
    conv_tflops: float
    bandwidth_gbs: float


def peaks(gpu: GpuSpec, precision: str) -> Peaks:
    bw = float(gpu.bw_gbs or 0)
    fp32 = float(gpu.fp32 or 0)
    if precision == "fp32":
        return Peaks(fp32, float(gpu.tf32 or fp32), bw)
    if precision == "bf16":
        if not gpu.bf16:
            raise Unsupported(f"no bf16 on {gpu.name} (compute capability {gpu.cc})")
        return Peaks(float(gpu.bf16), float(gpu.bf16), bw)
    half = float(gpu.fp16 or gpu.bf16 or fp32)  # AMP: fp16 (or bf16 where that is what exists)
    return Peaks(half, half, bw)


def _op_time(kind: str, flops: float, nbytes: float, p: Peaks) -> float:
    mem = nbytes / (p.bandwidth_gbs * 1e9 * MEMORY_EFFICIENCY)
    if kind == MEMORY or flops <= 0:
        return mem + LAUNCH_S
    peak = p.conv_tflops if kind == CONV else p.matmul_tflops
    return max(flops / (peak * 1e12 * EFFICIENCY[kind]), mem) + LAUNCH_S


def forward_backward_s(profile: Profile, gpu: GpuSpec, precision: str, micro_batch: int) -> float:
    """Seconds for one forward + backward of `micro_batch` samples on one GPU."""
    p = peaks(gpu, precision)
    scale = 0.5 if precision in ("amp", "bf16") else 1.0
    total = 0.0
    for op in profile.ops:
        flops = op.flops_fixed + micro_batch * op.flops_per
        nbytes = (op.fbytes_fixed + micro_batch * op.fbytes_per) * scale + op.ibytes_fixed + micro_batch * op.ibytes_per
        total += _op_time(op.kind, flops, nbytes, p)
    return total


def optimizer_s(profile: Profile, gpu: GpuSpec, precision: str, optimizer: str) -> float:
    """Seconds for the optimizer step (+ AMP's weight casts): memory-bound passes over the params."""
    per_param = _OPT_BYTES[(precision, "sgd" if optimizer == "sgd" else "adam")]
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
