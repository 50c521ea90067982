"""What watching a job costs it: `provision train`'s sampler and instrumentation vs the same
training loop run bare, on this machine (localhost: the same agent and supervisor a remote host
runs).

    python3 benchmarks/train_overhead.py                       # 5 rounds, 7 pairs, 1 s sampling
    python3 benchmarks/train_overhead.py --rounds 7 --steps 400 --pairs 9 --interval 0.2
    python3 benchmarks/train_overhead.py --rounds 1 --steps 40 --pairs 1 --batches 100   # a smoke run

Prints the median step time bare / sampled / sampled+instrumented (rounds interleaved, so
drifting load hits all three alike) and, because on a shared machine those medians swing by more
than the overhead, the two costs measured directly: the sampler's CPU per sample (in-process,
process time: what it takes from the job is ms per sample / interval) and the instrumentation's
extra time per training step (the DataLoader wrappers, the backward and optimizer-step hooks that
find the training loader: plain vs wrapped in alternated pairs in one process, the median and
spread of the difference). Goal: under 2 % of step time. Needs torch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

JOB = r'''
import json, sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
torch.set_num_threads(1)
steps = int(sys.argv[1])
data = TensorDataset(torch.randn(steps * 32, 256), torch.randint(0, 10, (steps * 32,)))
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
times = []
last = None
for x, y in DataLoader(data, batch_size=32, num_workers=0):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    now = time.perf_counter()
    if last is not None:
        times.append(now - last)
    last = now
times = times[len(times) // 10:]  # warm-up out
print("RESULT " + json.dumps({"step_ms": 1000 * sorted(times)[len(times) // 2], "steps": len(times)}))
'''


def bare(job: Path, steps: int) -> float:
    out = subprocess.run([sys.executable, str(job), str(steps)], capture_output=True, text=True, check=True).stdout
    return _result(out)


def _result(text: str) -> float:
    line = next(x for x in text.splitlines() if x.startswith("RESULT "))
    return float(json.loads(line[7:])["step_ms"])


def watched(trainer, code: Path, steps: int, interval: float, instrument: bool) -> float:
    from provision.train.launch import TrainSpec

    spec = TrainSpec(command=["python", "job.py", str(steps)], code_dir=str(code), python=sys.executable,
                     instrument=instrument, interval=interval)
    run = trainer.follow_to_end(trainer.start(spec)["run"]["run_id"])
    return _result(Path(run["log"]).read_text())


def sample_cost(interval_samples: int = 200) -> float:
    """CPU ms per RunSampler.sample() on a process group of one (this process)."""
    from provision.agent.train.gpu import GpuProbe
    from provision.agent.train.sampler import RunSampler

    sampler = RunSampler(os.getpid(), os.getpgid(0), GpuProbe())
    start = time.process_time()
    for _ in range(interval_samples):
        sampler.sample()
    return 1000 * (time.process_time() - start) / interval_samples


PER_BATCH = r'''
import importlib.util, json, os, statistics, sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset
import torch.utils.data.dataloader as dl
import torch.optim.optimizer as optim_mod
torch.set_num_threads(1)
base = dl._BaseDataLoaderIter
def grab():
    return (base.__init__, base._reset, base.__next__, torch.autograd.backward,
            dict(optim_mod._global_optimizer_post_hooks))
def put(state):
    base.__init__, base._reset, base.__next__, torch.autograd.backward, hooks = state
    optim_mod._global_optimizer_post_hooks.clear()
    optim_mod._global_optimizer_post_hooks.update(hooks)
plain = grab()
spec = importlib.util.spec_from_file_location("provision_instrument", sys.argv[1])
inst = importlib.util.module_from_spec(spec)
spec.loader.exec_module(inst)  # with PROVISION_TRAIN_INSTRUMENT set: it patches loader, backward, optimizer
patched = grab()
n = int(sys.argv[2])
data = TensorDataset(torch.zeros(n, 4), torch.zeros(n, 1))
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.0)
def per_step():
    # the smallest real training step: what the wrappers add is largest relative to it
    start = time.perf_counter()
    for x, y in DataLoader(data, batch_size=1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
    return (time.perf_counter() - start) / n
per_step()  # warm-up
pairs = []
for _ in range(int(sys.argv[3])):  # pairs, alternated: drifting load hits both alike
    put(plain); a = per_step()
    put(patched); b = per_step()
    pairs.append((a, b))
d = sorted(1e6 * (b - a) for a, b in pairs)
print("RESULT " + json.dumps({"plain": 1e6 * statistics.median(a for a, _ in pairs),
                              "patched": 1e6 * statistics.median(b for _, b in pairs),
                              "diff_median": statistics.median(d), "diff_min": d[0], "diff_max": d[-1],
                              "pairs": len(pairs)}))
'''


def instrumentation_cost(tmp: Path, steps: int = 2000, pairs: int = 7) -> dict[str, float]:
    '''µs per training step (DataLoader batch + backward + optimizer step) without and with the
    sitecustomize's wrappers, in one process, `pairs` alternated pairs: medians and the spread
    of the per-pair difference.'''
    script = tmp / "per_batch.py"
    script.write_text(PER_BATCH)
    env = dict(os.environ, PROVISION_TRAIN_INSTRUMENT=str(tmp / "inst.jsonl"))
    source = ROOT / "provision" / "agent" / "train" / "instrument" / "sitecustomize.py"
    out = subprocess.run([sys.executable, str(script), str(source), str(steps), str(pairs)], capture_output=True,
                         text=True, env=env, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    return json.loads(line[7:])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5, help="end-to-end rounds (each: bare, sampled, instrumented)")
    parser.add_argument("--pairs", type=int, default=7, help="plain/instrumented pairs of the per-step measurement")
    parser.add_argument("--batches", type=int, default=2000, help="training steps per per-step measurement")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    from provision.connection.local import LocalConnection
    from provision.inventory.model import Host
    from provision.train.launch import HostTrainer

    with tempfile.TemporaryDirectory(prefix="train-overhead-") as tmp:
        code = Path(tmp) / "code"
        code.mkdir()
        job = code / "job.py"
        job.write_text(JOB)
        (Path(tmp) / "data").mkdir()
        host = Host("localhost", local=True, vars={"data_dir": str(Path(tmp) / "data")})
        rows: dict[str, list[float]] = {"bare": [], "sampled": [], "sampled+instrumented": []}
        with LocalConnection(host) as conn:
            trainer = HostTrainer(conn)
            for r in range(args.rounds):
                rows["bare"].append(bare(job, args.steps))
                rows["sampled"].append(watched(trainer, code, args.steps, args.interval, False))
                rows["sampled+instrumented"].append(watched(trainer, code, args.steps, args.interval, True))
                print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f} ms" for k, v in rows.items()), file=sys.stderr)
        cost = sample_cost()
        per = instrumentation_cost(Path(tmp), args.batches, args.pairs)
    base = statistics.median(rows["bare"])
    print(f"\n{os.cpu_count()} CPUs, {args.steps} steps per run, {args.rounds} rounds, sampling every {args.interval:g} s")
    print(f"{'':24} {'median step ms':>15} {'spread (min-max)':>18} {'vs bare':>9}")
    for name, values in rows.items():
        med = statistics.median(values)
        print(f"{name:24} {med:15.3f} {min(values):8.3f}-{max(values):<9.3f} {100 * (med - base) / base:+8.2f}%")
    print(f"sampler CPU per sample: {cost:.2f} ms -> {100 * cost / 1000 / args.interval:.2f}% of one core "
          f"at a {args.interval:g} s interval")
    print(f"instrumentation per training step (loader batch + backward + optimizer step, {per['pairs']} pairs): "
          f"{per['plain']:.1f} -> {per['patched']:.1f} µs; added {per['diff_median']:+.1f} µs "
          f"(pairs {per['diff_min']:+.1f} to {per['diff_max']:+.1f}) -> "
          f"{100 * per['diff_median'] / 1000 / base:.3f}% of the bare {base:.2f} ms step; goal < 2 %")
    print("(end-to-end medians on a shared machine swing by more than the overhead: read the two lines above)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
