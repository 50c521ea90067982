"""The largest training batch that fits, and the gradient accumulation for a target batch.

On a GPU the search tries real steps and recovers from CUDA out-of-memory errors. On a CPU
there is no such signal: Linux overcommits and the OOM killer ends the process instead, so
the search is bounded by a memory budget (request["memory_budget_mb"], else a fraction of the
available memory, cgroup limit included): a batch is only tried when a fit of the peaks
measured so far predicts it stays under budget. Every search is also bounded in time.
"""

import gc
import math
import time

from provision.agent.bench.common import (
    available_memory_bytes,
    cuda_available,
    import_torch,
    mb,
    sig,
)


class BudgetExceeded(Exception):
    """A batch would not (or did not) fit the memory budget: the CPU's stand-in for an OOM."""


def is_oom(exc):
    if isinstance(exc, (BudgetExceeded, MemoryError)):
        return True
    if type(exc).__name__ == "OutOfMemoryError":  # torch.cuda.OutOfMemoryError (1.13+)
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text or "CUBLAS_STATUS_ALLOC_FAILED" in text
    )


class SearchResult(object):
    def __init__(self):
        self.max_batch = 0  # largest batch that ran
        self.first_failing = None  # smallest batch that did not fit
        self.bounded_by = None  # oom | budget | cap | time | error
        self.tried = []  # [(batch, "ok" | "oom" | "budget" | "error")]
        self.error = None

    @property
    def exact(self):
        """Whether max_batch is the boundary (within the search resolution), not a lower bound."""
        return self.bounded_by in ("oom", "budget", "cap")

    def as_dict(self):
        return {
            "max_batch": self.max_batch,
            "first_failing": self.first_failing,
            "bounded_by": self.bounded_by,
            "exact": self.exact,
            "tried": [{"batch": b, "result": r} for b, r in self.tried],
            "error": self.error,
        }


def _round_batch(value, lo, hi):
    """Midpoints as multiples of 8 (what people pick) when that stays strictly inside (lo, hi)."""
    if value >= 16:
        rounded = int(value) // 8 * 8
        if lo < rounded < hi:
            return rounded
    return int(value)


def search_max_batch(
    try_batch,
    start=8,
    cap=1 << 16,
    time_left=None,
    resolution=0.05,
    recover=None,
    predict_seconds=None,
):
    """Double from `start` until a batch fails, then bisect to within `resolution`.

    try_batch(b) runs one step at batch b, raising an OOM-like error (see is_oom) when it does
    not fit. time_left() -> seconds, predict_seconds(b) -> estimated seconds for batch b: the
    search stops before a try that would overrun. recover() runs after each failure.
    """
    result = SearchResult()
    timings = {}

    def out_of_time(batch):
        if time_left is None:
            return False
        left = time_left()
        if left <= 0:
            return True
        return predict_seconds is not None and predict_seconds(batch, timings) > left

    def attempt(batch):
        began = time.monotonic()
        failure = None
        try:
            try_batch(batch)
        except Exception as exc:
            if not is_oom(exc):
                if result.max_batch == 0:
                    raise
                result.tried.append((batch, "error"))
                result.error = "%s: %s" % (type(exc).__name__, (str(exc).splitlines() or [""])[0])
                return None
            failure = "budget" if isinstance(exc, BudgetExceeded) else "oom"
        if failure:
            # Recover outside the except block: until it ends, the traceback keeps the failed
            # step's frames (and their tensors) alive, so empty_cache could free nothing.
            result.tried.append((batch, failure))
            if recover:
                recover()
            return failure
        timings[batch] = time.monotonic() - began
        result.tried.append((batch, "ok"))
        return "ok"

    batch = max(1, min(start, cap))
    while True:  # grow
        if out_of_time(batch):
            result.bounded_by = "time"
            return result
        outcome = attempt(batch)
        if outcome is None:
            result.bounded_by = "error"
            return result
        if outcome != "ok":
            result.first_failing = batch
            result.bounded_by = outcome
            break
        result.max_batch = batch
        if batch >= cap:
            result.bounded_by = "cap"
            return result
        batch = min(batch * 2, cap)
    lo, hi = result.max_batch, result.first_failing
    while hi - lo > max(1, int(lo * resolution)):  # bisect between last fit and first failure
        mid = _round_batch((lo + hi) / 2.0, lo, hi)
        if out_of_time(mid):
            result.bounded_by = "time"
            break
        outcome = attempt(mid)
        if outcome is None:
            result.bounded_by = "error"
            break
        if outcome == "ok":
            lo = result.max_batch = mid
        else:
            hi = result.first_failing = mid
            result.bounded_by = outcome
    return result


def grad_accumulation(target_batch, max_batch):
    """Fewest accumulation steps whose micro-batch fits: steps = ceil(target / max_batch)."""
    if not max_batch or max_batch < 1 or not target_batch:
        return None
    steps = int(math.ceil(target_batch / float(max_batch)))
    micro = int(math.ceil(target_batch / float(steps)))
    return {
        "target_batch": target_batch,
        "micro_batch": micro,
        "steps": steps,
        "effective_batch": micro * steps,
    }


def linear_fit(points):
    """Least-squares (intercept, slope) through [(x, y)]; through the origin for one point."""
    if not points:
        return None
    if len(points) == 1 or len(set(x for x, _ in points)) == 1:
        x, y = points[-1]
        return 0.0, y / float(x)
    n = float(len(points))
    sx = sum(x for x, _ in points)
    sy = sum(y for _, y in points)
    sxx = sum(x * x for x, _ in points)
    sxy = sum(x * y for x, y in points)
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    intercept = (sy - slope * sx) / n
    if slope <= 0:  # noise on tiny batches: fall back to the conservative proportional estimate
        x, y = max(points)
        return 0.0, y / float(x)
    return intercept, slope


def _predict_seconds(batch, timings):
    """Step time grows about linearly with batch: scale the largest batch timed so far."""
    if not timings:
        return 0.0
    known = max(timings)
    return timings[known] * batch / float(known)


def measure(request, quick, amp_result=None):
    torch = import_torch()
    from provision.agent.bench.amp import (  # lazy: torch model code, loaded only when the memory section runs
        MemoryProbe,
        make_scaler,
        train_step,
    )
    from provision.agent.bench.models import (
        make_optimizer,
        workloads,
    )

    on_gpu = cuda_available(torch)
    device = "cuda:0" if on_gpu else "cpu"
    target = int(request.get("target_batch") or 256)
    best = (amp_result or {}).get("best_dtype") or ("fp16" if on_gpu else "bf16")
    if (amp_result or {}).get("speedup") is not None and amp_result["speedup"] < 1.0:
        best = "fp32"  # AMP slower than fp32 here (bf16 emulated on this CPU): nobody trains so
    dtype = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}.get(best)
    image_size = (amp_result or {}).get("image_size")
    per_workload_s = (10.0 if quick else 45.0) if on_gpu else (1.5 if quick else 20.0)
    out = {"device": device, "dtype": best, "target_batch": target, "models": {}}
    budget = None
    if not on_gpu:
        budget, source = cpu_budget(request)
        out["budget_mb"] = mb(budget)
        out["budget_source"] = source
        out["note"] = (
            "CPU: Linux gives no out-of-memory error before its OOM killer ends the process, so "
            "batches are bounded by a memory budget, not by what the machine could hold"
        )
    for spec in workloads(on_gpu, quick, image_size):
        model = spec.build().to(device).train()
        optimizer = make_optimizer(model.parameters(), on_gpu, lr=0.01, momentum=0.9)
        scaler = make_scaler(torch) if (on_gpu and best == "fp16") else None
        peaks = []  # (batch, peak bytes) of the tries that ran
        probe = MemoryProbe(torch, device)
        # One small step first: optimizer state and library workspaces are allocated once, and
        # would otherwise inflate the first try's peak (and every prediction made from it).
        warm_inputs, warm_targets = spec.make_batch(2, device)
        train_step(
            torch,
            spec,
            model,
            optimizer,
            warm_inputs,
            warm_targets,
            device.split(":")[0],
            dtype,
            scaler,
        )()
        del warm_inputs, warm_targets

        def try_batch(
            batch,
            spec=spec,
            model=model,
            optimizer=optimizer,
            scaler=scaler,
            peaks=peaks,
            probe=probe,
        ):
            if budget is not None:
                fit = linear_fit(peaks)
                if fit and fit[0] + fit[1] * batch > budget:
                    raise BudgetExceeded("predicted to exceed the budget")
            probe.start()
            inputs, targets = spec.make_batch(batch, device)
            train_step(
                torch, spec, model, optimizer, inputs, targets, device.split(":")[0], dtype, scaler
            )()
            if on_gpu:
                torch.cuda.synchronize(device)
            peak = probe.peak_bytes()
            if peak is not None:
                peaks.append((batch, peak))
            if budget is not None and peak is not None and peak > budget:
                raise BudgetExceeded("measured peak above the budget")

        def recover():
            gc.collect()
            if on_gpu:
                torch.cuda.empty_cache()

        started = time.monotonic()
        result = search_max_batch(
            try_batch,
            start=16 if on_gpu else 8,
            cap=1 << 16,
            time_left=lambda started=started: per_workload_s - (time.monotonic() - started),
            recover=recover,
            predict_seconds=_predict_seconds,
        )
        entry = result.as_dict()
        entry["unit"] = spec.unit
        entry["seconds"] = round(time.monotonic() - started, 2)
        fit = linear_fit(peaks)
        if fit:
            entry["per_sample_mb"] = sig(fit[1] / float(1 << 20))
            if budget is not None and fit[1] > 0:
                entry["estimated_max_batch"] = int(max(0, (budget - fit[0]) / fit[1]))
        entry["grad_accumulation"] = grad_accumulation(target, result.max_batch)
        out["models"][spec.name] = entry
        del model, optimizer, try_batch
        recover()
    return out


def cpu_budget(request):
    """(bytes, how it was chosen): the request's memory_budget_mb or a fraction of what's free."""
    if request.get("memory_budget_mb"):
        value = float(request["memory_budget_mb"])
        return int(value * (1 << 20)), "request memory_budget_mb=%g" % value
    fraction = float(request.get("memory_fraction") or 0.25)
    avail = available_memory_bytes()
    if not avail:
        return 1 << 30, "1024 MB default (available memory unknown)"
    return int(avail * fraction), "%d%% of available memory (%d MB, cgroup limit included)" % (
        round(fraction * 100),
        mb(avail),
    )
