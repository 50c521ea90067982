"""Measure a model's training step from its own graph, on the meta device.

One forward + backward is traced at batch 2 and at batch 4 under a dispatch mode that sees every
aten op: its FLOPs (torch's own flop formulas, the ones FlopCounterMode uses), the bytes it reads
and writes, and its kind (matmul, conv, attention, or memory-bound: elementwise, norms, softmax,
reductions, embedding lookups). The two traces run the same op sequence, so each op's cost
splits into a per-sample part (the difference, halved) and a per-step part (weights read once per
step whatever the batch). Saved tensors (what autograd keeps for backward — the activation
memory) are counted with saved_tensors_hooks the same way. Parameters and their views are not
activations: they are counted as weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from provision.choose.models import ModelSpec
from provision.errors import ConfigError

MATMUL, CONV, ATTENTION, MEMORY = "matmul", "conv", "attention", "memory"
KINDS = (MATMUL, CONV, ATTENTION, MEMORY)
_B1, _B2 = 2, 4  # the two traced batch sizes
_aten = torch.ops.aten
_CONV = {_aten.convolution, _aten._convolution, _aten.convolution_backward, _aten.cudnn_convolution,
         _aten.convolution_overrideable, _aten._slow_conv2d_forward}
_ATTENTION = {p for p in flop_registry if "attention" in str(p)}
# ops that move no data of their own (metadata, views, allocation without a write)
_FREE = {_aten.empty, _aten.empty_like, _aten.empty_strided, _aten.new_empty, _aten.new_empty_strided,
         _aten.lift_fresh, _aten.detach, _aten.alias}


@dataclass(frozen=True)
class Op:
    kind: str
    flops_fixed: float  # per step
    flops_per: float  # per sample
    fbytes_fixed: float  # floating-point bytes (fp32 as traced): halved under AMP/bf16
    fbytes_per: float
    ibytes_fixed: float  # integer / bool bytes (indices, masks): not scaled by precision
    ibytes_per: float
    winograd: bool = False  # a 3x3, stride-1, undilated, ungrouped convolution (speed.py)


@dataclass
class Profile:
    """A model's step, measured. Bytes are as traced in fp32 (see `Op`)."""

    params: int
    trainable: int
    ops: list[Op]
    saved_fp_bytes_per_sample: float  # activations saved for backward, floating point (fp32)
    saved_int_bytes_per_sample: float
    saved_fp_bytes_fixed: float = 0.0
    batch_norm: bool = False
    counts: dict[str, int] = field(default_factory=dict)

    def flops_per_sample(self) -> float:
        return sum(op.flops_per for op in self.ops)

    def bytes_per_sample(self, half: bool) -> float:
        scale = 0.5 if half else 1.0
        return sum(op.fbytes_per * scale + op.ibytes_per for op in self.ops)


def _nbytes(t: torch.Tensor) -> tuple[float, float]:
    size = float(t.numel() * t.element_size())
    return (size, 0.0) if t.is_floating_point() else (0.0, size)


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, float, float, float, bool]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        if packet in _FREE or getattr(func, "is_view", False):
            return out
        flops = 0.0
        if packet in flop_registry:
            flops = float(flop_registry[packet](*args, **kwargs, out_val=out))
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        fb = ib = 0.0
        for t in (*tensors, *outs):
            f, i = _nbytes(t)
            fb, ib = fb + f, ib + i
        if packet in _CONV:
            kind = CONV
        elif packet in _ATTENTION:
            kind = ATTENTION
        elif flops > 0:
            kind = MATMUL
        else:
            kind = MEMORY
            if packet in (_aten.fill_, _aten.zeros_like, _aten.zero_, _aten.full, _aten.zeros, _aten.ones,
                          _aten.ones_like, _aten.scalar_tensor, _aten.arange):
                fb, ib = sum(_nbytes(t)[0] for t in outs), sum(_nbytes(t)[1] for t in outs)
        self.ops.append((kind, flops, fb, ib, kind == CONV and _winograd_shape(packet, args)))
        return out


def _winograd_shape(packet: object, args: tuple) -> bool:
    """A convolution cuDNN can run as Winograd F(2x2, 3x3): 3x3 kernel, stride 1, no dilation, no
    groups. aten.convolution(input, weight, bias, stride, padding, dilation, transposed, out_pad,
    groups); convolution_backward(grad, input, weight, bias_sizes, stride, ... the same after)."""
    try:
        at = 2 if packet is _aten.convolution_backward else 1
        weight, stride, dilation = args[at], args[at + 2], args[at + 4]
        groups = args[at + 7]
        return (tuple(weight.shape[2:]) == (3, 3) and all(int(s) == 1 for s in stride)
                and all(int(d) == 1 for d in dilation) and int(groups) == 1 and not args[at + 5])
    except (IndexError, TypeError, AttributeError, ValueError):
        return False


def _trace(spec: ModelSpec, model: torch.nn.Module, batch: int) -> tuple[list[tuple[str, float, float, float, bool]], float, float]:
    params = {id(p) for p in model.parameters()}
    seen: dict[int, torch.Tensor] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        base = t._base if t._base is not None else t
        if id(t) not in params and id(base) not in params:
            seen[id(base)] = base  # keep a reference: ids stay unique while tracing
        return t

    rec = _Recorder()
    inputs = spec.inputs(batch)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), rec:
        out = model(*inputs)
        loss = spec.loss(out, batch)
    with rec:
        loss.backward()
    fp = sum(_nbytes(t)[0] for t in seen.values())
    ints = sum(_nbytes(t)[1] for t in seen.values())
    model.zero_grad(set_to_none=True)
    return rec.ops, fp, ints


def measure(spec: ModelSpec) -> Profile:
    """Trace the model's training step at two batch sizes; ConfigError if it cannot run on meta."""
    try:
        with torch.device("meta"):
            model = spec.build()
        model.train()
        # batch 2 and 4, not 1: at batch 1 more reshapes are free views, and the graphs differ
        one, fp1, int1 = _trace(spec, model, _B1)
        two, fp2, int2 = _trace(spec, model, _B2)
    except ConfigError:
        raise
    except Exception as exc:  # the user's model: say which and why, no traceback
        raise ConfigError(f"model {spec.name}: its forward/backward failed on the meta device"
                          f" ({type(exc).__name__}: {exc}); a model for `choose` must run on shapes alone") from None
    if len(one) != len(two) or any(a[0] != b[0] for a, b in zip(one, two, strict=True)):
        raise ConfigError(f"model {spec.name}: its graph changes with the batch size; cannot split"
                          " per-sample from per-step cost")
    ops = []
    step = _B2 - _B1
    for (kind, f1, fb1, ib1, wino), (_, f2, fb2, ib2, _w) in zip(one, two, strict=True):
        fper, fbper, ibper = (max(b - a, 0.0) / step for a, b in ((f1, f2), (fb1, fb2), (ib1, ib2)))
        ops.append(Op(kind, max(f1 - _B1 * fper, 0.0), fper, max(fb1 - _B1 * fbper, 0.0), fbper,
                      max(ib1 - _B1 * ibper, 0.0), ibper, wino))
    counts = {k: sum(1 for op in ops if op.kind == k) for k in KINDS}
    return Profile(
        params=sum(p.numel() for p in model.parameters()),
        trainable=sum(p.numel() for p in model.parameters() if p.requires_grad),
        ops=ops,
        saved_fp_bytes_per_sample=max(fp2 - fp1, 0.0) / step,
        saved_int_bytes_per_sample=max(int2 - int1, 0.0) / step,
        saved_fp_bytes_fixed=max(fp1 - _B1 * max(fp2 - fp1, 0.0) / step, 0.0),
        batch_norm=any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()),
        counts=counts,
    )
