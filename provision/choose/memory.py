"""GPU memory of a training step: model states, activations, framework overhead; max batch.

Bytes per trainable parameter (weights + gradients + optimizer states):

    precision  weights            grads   adam/adamw (m, v)   sgd (momentum)
    fp32/tf32  4                  4       8                   4
    amp        4 (fp32 master)    4       8                   4     + 2 for the fp16 weight
               copies autocast makes and saves for backward
    bf16       2                  2       8 (fp32 m, v)       4

(TF32 changes how matmuls round inside the tensor cores, not what is stored: fp32's bytes.)

Activations: the bytes of the tensors autograd saved for backward in the traced step, per
sample (graph.py), at 4 bytes per floating-point element as traced; under AMP/bf16 they are 2.
Overhead: the CUDA context, cuBLAS/cuDNN workspaces and allocator reserve (CONTEXT_GB), and
fragmentation of the caching allocator (FRAGMENTATION × everything allocated).
"""

from __future__ import annotations

from dataclasses import dataclass

from provision.choose.graph import Profile

GB = 2**30  # memory figures are GiB, as nvidia-smi's MiB / 1024 (an "80 GB" card has 80)
CONTEXT_GB = 1.0  # CUDA context ~0.5-0.8 GB + library workspaces
FRAGMENTATION = 1.10  # caching-allocator blocks that cannot be reused for other sizes
PRECISIONS = ("fp32", "tf32", "amp", "bf16")
OPTIMIZERS = ("adam", "adamw", "sgd")
_STATE_BYTES = {"adam": 8.0, "adamw": 8.0, "sgd": 4.0}


@dataclass(frozen=True)
class Memory:
    weights_gb: float
    grads_gb: float
    optimizer_gb: float
    activations_gb_per_sample: float
    fixed_gb: float  # batch-independent: states + amp weight copies + saved tensors that do not scale
    amp_weight_copies_gb: float = 0.0  # the 16-bit weight copies autocast makes (amp only)
    saved_fixed_gb: float = 0.0  # saved tensors that do not grow with the batch

    def total_gb(self, batch: int) -> float:
        """What a card needs for `batch` samples in one step (overhead included)."""
        return CONTEXT_GB + FRAGMENTATION * (self.fixed_gb + batch * self.activations_gb_per_sample)

    def breakdown(self, batch: int) -> dict[str, float]:
        """Every part of `total_gb(batch)`, GiB; the parts add up to it (`total_gb` is the last key)."""
        activations = batch * self.activations_gb_per_sample
        allocated = self.fixed_gb + activations
        return {"weights_gb": self.weights_gb, "grads_gb": self.grads_gb, "optimizer_gb": self.optimizer_gb,
                "amp_weight_copies_gb": self.amp_weight_copies_gb, "saved_fixed_gb": self.saved_fixed_gb,
                "activations_gb": activations, "cuda_context_gb": CONTEXT_GB,
                "fragmentation_gb": (FRAGMENTATION - 1) * allocated, "total_gb": self.total_gb(batch)}

    def max_batch(self, memory_gb: float) -> int:
        """Largest batch that fits a card of `memory_gb`; 0 when the model states alone do not."""
        room = (memory_gb - CONTEXT_GB) / FRAGMENTATION - self.fixed_gb
        if room <= 0 or self.activations_gb_per_sample <= 0:
            return 0 if room <= 0 else 1 << 20
        return int(room // self.activations_gb_per_sample)


def estimate(profile: Profile, precision: str, optimizer: str) -> Memory:
    n, frozen = profile.trainable, profile.params - profile.trainable
    half = precision in ("amp", "bf16")
    weight_bytes = 2.0 if precision == "bf16" else 4.0
    grad_bytes = weight_bytes
    weights = (n + frozen) * weight_bytes
    grads = n * grad_bytes
    states = n * _STATE_BYTES[optimizer]
    casts = profile.params * 2.0 if precision == "amp" else 0.0
    act_scale = 0.5 if half else 1.0
    per_sample = profile.saved_fp_bytes_per_sample * act_scale + profile.saved_int_bytes_per_sample
    fixed_acts = profile.saved_fp_bytes_fixed * act_scale
    return Memory(
        weights_gb=weights / GB,
        grads_gb=grads / GB,
        optimizer_gb=states / GB,
        activations_gb_per_sample=per_sample / GB,
        fixed_gb=(weights + grads + states + casts + fixed_acts) / GB,
        amp_weight_copies_gb=casts / GB,
        saved_fixed_gb=fixed_acts / GB,
    )
