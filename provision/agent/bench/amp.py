"""fp32 vs automatic mixed precision training: samples/s, speedup and peak memory per workload.

On a GPU: fp16 with a GradScaler (fp16's narrow exponent underflows small gradients without
loss scaling) and bf16 where the GPU has bf16 tensor cores (compute capability 8.0+). On a CPU
autocast supports bf16 only and needs no scaler. Each precision trains a fresh copy of the
same initial weights so the runs differ only in precision.
"""

import copy

from provision.agent.bench.common import (
    cuda_available,
    import_torch,
    mb,
    reset_peak_rss,
    rss_bytes,
    sig,
)
from provision.agent.bench.timing import measure as timed
from provision.agent.bench.timing import median, time_once, wall_times


def precisions(torch, on_gpu):
    """[(name, autocast dtype or None, needs GradScaler)] to compare on this device."""
    if not on_gpu:
        return [("fp32", None, False), ("bf16", torch.bfloat16, False)]
    modes = [("fp32", None, False), ("fp16", torch.float16, True)]
    if torch.cuda.get_device_capability()[0] >= 8:
        modes.append(("bf16", torch.bfloat16, False))
    return modes


def make_scaler(torch):
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        try:
            return amp.GradScaler("cuda")
        except TypeError:  # torch < 2.3: torch.amp.GradScaler had no device argument
            pass
    return torch.cuda.amp.GradScaler()


def train_step(torch, spec, model, optimizer, inputs, targets, device_type, dtype, scaler):
    """A closure doing one optimizer step: forward (under autocast when dtype), backward, step."""

    def step():
        optimizer.zero_grad(set_to_none=True)
        if dtype is None:
            loss = spec.loss(model(inputs), targets)
        else:
            with torch.autocast(device_type=device_type, dtype=dtype):
                loss = spec.loss(model(inputs), targets)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()

    return step


class MemoryProbe(object):
    """Peak memory of what runs between start() and peak_bytes(): the CUDA allocator's peak on a
    GPU, the growth of the process's peak RSS (VmHWM, reset first) on a CPU."""

    def __init__(self, torch, device):
        self.torch = torch
        self.device = device
        self.on_gpu = str(device).startswith("cuda")
        self.base = 0
        self.source = "cuda max_memory_allocated" if self.on_gpu else "process peak RSS growth"

    def start(self):
        if self.on_gpu:
            self.torch.cuda.synchronize(self.device)
            self.torch.cuda.empty_cache()
            self.torch.cuda.reset_peak_memory_stats(self.device)
            self.base = 0
        else:
            if not reset_peak_rss():
                self.source = "process peak RSS since start (VmHWM not resettable here)"
            self.base = rss_bytes("VmRSS") or 0

    def peak_bytes(self):
        if self.on_gpu:
            return self.torch.cuda.max_memory_allocated(self.device)
        peak = rss_bytes("VmHWM")
        return None if peak is None else max(0, peak - self.base)


def _run_mode(torch, spec, base_model, device, mode, min_run_time, batch, quick=False):
    name, dtype, needs_scaler = mode
    probe = MemoryProbe(torch, device)
    probe.start()
    # lazy: torch model code, loaded only by the section that trains (the agent starts per call)
    from provision.agent.bench.models import make_optimizer

    model = copy.deepcopy(base_model).to(device).train()
    optimizer = make_optimizer(model.parameters(), probe.on_gpu, lr=0.01, momentum=0.9)
    inputs, targets = spec.make_batch(batch, device)
    scaler = make_scaler(torch) if needs_scaler else None
    device_type = "cuda" if str(device).startswith("cuda") else "cpu"
    step = train_step(torch, spec, model, optimizer, inputs, targets, device_type, dtype, scaler)
    # The priming step already ran these shapes once; one more warm-up step settles allocator
    # caches (and cuDNN autotuning when enabled).
    if quick:
        median_s, repeats = _quick_timing(torch, step, device, min_run_time)
    else:
        t = timed(torch, step, device=device, warmup=2, min_run_time=min_run_time)
        median_s, repeats = t.median_s, t.repeats
    peak = probe.peak_bytes()
    del model, optimizer, inputs, targets, step
    out = {
        "samples_per_s": sig(batch / median_s),
        "step_ms": round(median_s * 1e3, 3),
        "repeats": repeats,
        "peak_memory_mb": mb(peak),
    }
    if scaler is not None:
        out["grad_scaler"] = True
    return out


def _quick_timing(torch, step, device, min_run_time):
    """(median seconds, repeats) for a quick run. The warm-up step is timed: where one step
    already takes longer than min_run_time (emulated bf16 on a CPU without bf16 units, a big
    model on a small CPU), two more steps say all the quick run can say; otherwise the usual
    Timer runs. Every figure is still a synchronized median of repeats after a warm-up."""
    first = time_once(torch, step, device)
    if first < min_run_time:
        t = timed(torch, step, device=device, warmup=0, min_run_time=min_run_time)
        return t.median_s, t.repeats
    sync = (lambda: torch.cuda.synchronize(device)) if str(device).startswith("cuda") else None
    times = wall_times(step, repeats=2, warmup=0, sync=sync)
    return median(times), len(times)


def _prime(torch, spec, base_model, device, modes):
    """One tiny step per precision first: library set-up (oneDNN/cuBLAS workspaces, thread
    pools) happens once per process and would otherwise land in the first mode's peak memory."""
    # lazy: torch model code, loaded only by the section that trains (the agent starts per call)
    from provision.agent.bench.models import make_optimizer

    device_type = "cuda" if str(device).startswith("cuda") else "cpu"
    for _name, dtype, needs_scaler in modes:
        try:
            model = copy.deepcopy(base_model).to(device).train()
            optimizer = make_optimizer(model.parameters(), device_type == "cuda", lr=0.01)
            inputs, targets = spec.make_batch(2, device)
            scaler = make_scaler(torch) if needs_scaler else None
            train_step(torch, spec, model, optimizer, inputs, targets, device_type, dtype, scaler)()
        except RuntimeError:
            pass  # the measured run reports it


def measure(request, quick, image_size=None):
    torch = import_torch()
    # lazy: torch model code, loaded only by the section that trains (the agent starts per call)
    from provision.agent.bench.models import workloads

    on_gpu = cuda_available(torch)
    device = "cuda:0" if on_gpu else "cpu"
    min_run_time = (0.3 if quick else 1.0) if on_gpu else (0.25 if quick else 1.0)
    modes = precisions(torch, on_gpu)
    models = {}
    torch.manual_seed(0)
    for spec in workloads(on_gpu, quick, image_size):
        base_model = spec.build()
        runs, errors = {}, {}
        _prime(torch, spec, base_model, device, modes)
        for mode in modes:
            try:
                runs[mode[0]] = _run_mode(
                    torch, spec, base_model, device, mode, min_run_time, spec.batch, quick
                )
            except RuntimeError as exc:  # OOM or a kernel missing for this dtype: keep the others
                errors[mode[0]] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                if on_gpu:
                    torch.cuda.empty_cache()
        models[spec.name] = summarize(spec, runs, errors)
    headline = models.get("convnet", {})
    return {
        "device": device,
        "precisions": [m[0] for m in modes],
        "fp32_settings": _fp32_settings(torch, on_gpu),
        "memory_source": MemoryProbe(torch, device).source,
        "models": models,
        # The headline is the convnet, the workload published AMP speedups are quoted for.
        "speedup": headline.get("speedup"),
        "best_dtype": headline.get("best_amp_dtype"),
        "train_samples_per_s": headline.get("best_samples_per_s"),
        "image_size": (headline.get("model") or {}).get("image_size"),
    }


def summarize(spec, runs, errors):
    """Per-workload result: each precision's figures, the best AMP one and its speedup."""
    fp32 = (runs.get("fp32") or {}).get("samples_per_s")
    amp_runs = dict((k, v) for k, v in runs.items() if k != "fp32")
    best_amp = max(amp_runs, key=lambda k: amp_runs[k]["samples_per_s"]) if amp_runs else None
    speedup = None
    if best_amp and fp32:
        speedup = round(amp_runs[best_amp]["samples_per_s"] / fp32, 3)
    all_sps = [v["samples_per_s"] for v in runs.values()]
    out = {
        "model": spec.describe,
        "batch": spec.batch,
        "unit": spec.unit,
        "runs": runs,
        "best_amp_dtype": best_amp,
        "speedup": speedup,
        "best_samples_per_s": max(all_sps) if all_sps else None,
    }
    if errors:
        out["errors"] = errors
    return out


def _fp32_settings(torch, on_gpu):
    """What "fp32" meant: on Ampere+ cuDNN convolutions use TF32 unless told otherwise."""
    if not on_gpu:
        return {}
    return {
        "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
    }
