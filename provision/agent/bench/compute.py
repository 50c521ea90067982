"""Matmul throughput per device and dtype, as a percentage of the device's dense peak.

TF32 vs FP32 is the same fp32 matmul with cuBLAS allowed (or not) to use TF32 tensor cores;
the setting is process-global, so it is set for each run and always restored. PyTorch leaves
TF32 matmul off by default, so the fp32 figure is true fp32. Peaks come from the controller's
GPU table (request["gpu_peaks"]); without one, pct_of_peak is null rather than guessed.
"""

from provision.agent.bench.common import cuda_available, effective_cores, import_torch, sig
from provision.agent.bench.timing import measure as timed
from provision.agent.bench.timing import time_once

DTYPES = ("fp32", "tf32", "fp16", "bf16")


def tflops(n, seconds):
    """An n x n by n x n matmul does 2n^3 floating-point operations."""
    return 2.0 * n**3 / seconds / 1e12


def pct_of_peak(measured, peaks):
    """{dtype: percent} for each dtype with both a measurement and a positive peak, else None."""
    out = {}
    for dtype in DTYPES:
        peak = (peaks or {}).get(dtype)
        value = measured.get(dtype)
        out[dtype] = round(100.0 * value / peak, 1) if value and peak and peak > 0 else None
    return out


def peaks_for(gpu_peaks, index):
    """The peak row for GPU `index`; JSON object keys arrive as strings."""
    if not gpu_peaks:
        return None
    row = gpu_peaks.get(str(index))
    if row is None:
        row = gpu_peaks.get(index)
    return row


def measure(request, quick):
    torch = import_torch()
    peaks = request.get("gpu_peaks") or {}
    if cuda_available(torch):
        per = [_gpu(torch, i, quick, peaks_for(peaks, i)) for i in range(torch.cuda.device_count())]
        device = "cuda"
    else:
        per = [_cpu(torch, quick, peaks_for(peaks, "cpu"))]
        device = "cpu"
    return {"device": device, "per_gpu": per}


def _tf32_state(torch):
    return torch.backends.cuda.matmul.allow_tf32


def _set_tf32(torch, allowed):
    torch.backends.cuda.matmul.allow_tf32 = allowed


def _run_matmul(torch, n, dtype, device, min_run_time):
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    c = torch.empty(n, n, device=device, dtype=dtype)

    def mm():
        torch.mm(a, b, out=c)

    t = timed(torch, mm, device=device, warmup=2, min_run_time=min_run_time)
    return t


def _gpu(torch, index, quick, peaks):
    props = torch.cuda.get_device_properties(index)
    cap = (props.major, props.minor)
    n = 4096 if quick else 8192
    min_run_time = 0.2 if quick else 0.5
    device = "cuda:%d" % index
    dtypes = {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
    }
    measured, skipped, timing = {}, {}, {}
    saved = _tf32_state(torch)
    try:
        with torch.cuda.device(index):
            for name in DTYPES:
                if name in ("tf32", "bf16") and cap < (8, 0):
                    skipped[name] = "%s needs compute capability 8.0+ (this GPU: %d.%d)" % (
                        (name,) + cap
                    )
                    continue
                _set_tf32(torch, name == "tf32")
                try:
                    t = _run_matmul(torch, n, dtypes[name], device, min_run_time)
                except RuntimeError as exc:  # e.g. out of memory on a small or busy card
                    skipped[name] = "matmul %dx%d failed: %s" % (n, n, str(exc).splitlines()[0])
                    torch.cuda.empty_cache()
                    continue
                measured[name] = sig(tflops(n, t.median_s))
                timing[name] = dict(t.as_dict(), n=n)
    finally:
        _set_tf32(torch, saved)
        torch.cuda.empty_cache()
    return {
        "index": index,
        "device": device,
        "name": props.name,
        "capability": "%d.%d" % cap,
        "memory_gb": round(props.total_memory / 1e9, 1),
        "tflops": {d: measured.get(d) for d in DTYPES},
        "pct_of_peak": pct_of_peak(measured, peaks),
        "peak_tflops": peaks,
        "skipped": skipped,
        "timing": timing,
    }


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "cpu"


def _cpu(torch, quick, peaks):
    """CPU fallback: fp32/bf16/fp16 (TF32 is an NVIDIA tensor-core mode, so it is skipped).

    CPUs without native fp16 run fp16 matmul hundreds of times slower than fp32; a probe shrinks
    the matrix until one call fits the time budget, so a slow dtype cannot stall the run.
    """
    budget = 0.4 if quick else 1.5
    dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    measured, skipped, timing = {}, {"tf32": "TF32 is an NVIDIA tensor-core mode; not on CPU"}, {}
    for name in ("fp32", "fp16", "bf16"):
        n = 512 if quick else 1024
        try:
            while True:
                a = torch.randn(n, n).to(dtypes[name])
                b = torch.randn(n, n).to(dtypes[name])
                probe = time_once(torch, lambda a=a, b=b: torch.mm(a, b))
                if probe < budget / 4 or n <= 128:
                    break
                n //= 2
            if probe >= budget / 4:  # still slow at the smallest size: one probe is the figure
                measured[name] = sig(tflops(n, probe))
                timing[name] = {"median_ms": round(probe * 1e3, 3), "repeats": 1, "n": n}
                continue
            t = _run_matmul(torch, n, dtypes[name], "cpu", budget / 2)
        except RuntimeError as exc:  # an old torch without this dtype's CPU kernels
            skipped[name] = "%s matmul not supported by this torch on CPU: %s" % (name, exc)
            continue
        measured[name] = sig(tflops(n, t.median_s))
        timing[name] = dict(t.as_dict(), n=n)
    return {
        "index": None,
        "device": "cpu",
        "name": _cpu_name(),
        "cores": effective_cores(),
        "threads": torch.get_num_threads(),
        "tflops": {d: measured.get(d) for d in DTYPES},
        "pct_of_peak": pct_of_peak(measured, peaks),
        "peak_tflops": peaks,
        "skipped": skipped,
        "timing": timing,
    }
