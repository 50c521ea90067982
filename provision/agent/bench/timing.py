"""How every figure is timed: warm up, synchronize around the timed work, median of repeats.

`measure` uses torch.utils.benchmark.Timer, which synchronizes the accelerator around each
block and reports the median; its default of ONE thread would understate CPU figures, so the
current torch thread count is passed on. `cuda_event_times` is for work that must be timed on
the GPU's own clock (copies, collectives): events recorded on the stream, read after a sync.
"""

import time


class Timing(object):
    """Median seconds per call, with the spread and how many timed repeats it came from."""

    def __init__(self, median_s, times, per_call=1):
        self.median_s = median_s
        self.times = list(times)
        self.per_call = per_call

    @property
    def repeats(self):
        return len(self.times)

    def as_dict(self):
        return {
            "median_ms": round(self.median_s * 1e3, 4),
            "min_ms": round(min(self.times) * 1e3, 4) if self.times else None,
            "repeats": self.repeats,
        }


def median(values):
    """Median of a non-empty sequence (mean of the middle two for an even count)."""
    data = sorted(values)
    if not data:
        raise ValueError("median of no values")
    mid = len(data) // 2
    if len(data) % 2:
        return data[mid]
    return (data[mid - 1] + data[mid]) / 2.0


def synchronize(torch, device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize(device)


def measure(torch, fn, device="cpu", warmup=1, min_run_time=0.2):
    """Median seconds per fn() call: `warmup` untimed calls, then Timer.blocked_autorange."""
    from torch.utils.benchmark import Timer

    for _ in range(warmup):
        fn()
    synchronize(torch, device)
    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    result = timer.blocked_autorange(min_run_time=min_run_time)
    # Measurement.times are per-call seconds for each block of number_per_run calls.
    return Timing(result.median, result.times, result.number_per_run)


def time_once(torch, fn, device="cpu"):
    """Seconds for one synchronized call: a probe that decides how big the real run can be."""
    synchronize(torch, device)
    start = time.perf_counter()
    fn()
    synchronize(torch, device)
    return time.perf_counter() - start


def cuda_event_times(torch, fn, repeats, warmup=1, stream=None):
    """Per-call seconds for fn() measured with CUDA events on `stream` (default: current)."""
    stream = stream or torch.cuda.current_stream()
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    pairs = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        fn()
        end.record(stream)
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / 1e3 for s, e in pairs]


def wall_times(fn, repeats, warmup=1, sync=None):
    """Per-call seconds with perf_counter; `sync()` (if given) runs before each clock read."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if sync:
            sync()
        start = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - start)
    return times


class Deadline(object):
    """A time bound for a loop: `left()` seconds remain, `expired` once it is spent."""

    def __init__(self, seconds, clock=time.monotonic):
        self._clock = clock
        self.end = clock() + seconds

    def left(self):
        return self.end - self._clock()

    @property
    def expired(self):
        return self.left() <= 0
