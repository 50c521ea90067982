"""On a GPU host: train a few steps of known models and print `provision choose`'s prediction for
this GPU beside the measured samples/s and peak memory.

    PYTHONPATH=$PWD python3 benchmarks/choose_gpu_check.py [--out FILE.json]
    PYTHONPATH=$PWD python3 benchmarks/choose_gpu_check.py --tiny      # CPU smoke test, tiny sizes

Workloads (AMP fp16 with GradScaler, AdamW; ResNet-50 with SGD momentum): resnet50 at 224 px
batch 128, bert-base at seq 384 batch 32, gpt2 at seq 1024 batch 8. Each: 3 warm-up steps, then
the median of 5 timed runs of 5 steps (CUDA synchronized). Peak memory: max_memory_reserved
(what the caching allocator took) plus the CUDA context as nvidia-smi shows it is not counted,
so compare with total_gb − 1.0 (docs/choose.md, Memory).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from provision.choose import catalogue, graph, memory, models, speed

WORKLOADS = [("resnet50", None, None, 128, "sgd"), ("bert-base", 384, None, 32, "adamw"),
             ("gpt2", 1024, None, 8, "adamw")]
TINY = [("resnet18", None, 64, 4, "sgd"), ("gpt2", 64, None, 2, "adamw")]


def _train(spec: models.ModelSpec, batch: int, optimizer: str, device: str, amp: bool, runs: int, steps: int) -> float:
    model = spec.build().to(device)
    model.train()
    params = list(model.parameters())
    opt = (torch.optim.SGD(params, lr=0.01, momentum=0.9) if optimizer == "sgd"
           else torch.optim.AdamW(params, lr=1e-4))
    scaler = torch.amp.GradScaler(device, enabled=amp)
    if spec.unit == models.IMAGE:
        x = torch.randn(batch, 3, spec.image_size, spec.image_size, device=device)
    else:
        x = torch.randint(0, spec.vocab or 1000, (batch, spec.seq_len), device=device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.float16, enabled=amp):
            loss = spec.loss(model(x), batch)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(3):
        step()
    sync()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        times.append((time.perf_counter() - t) / steps)
    return batch / statistics.median(times)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--out")
    a = p.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    gpu = None
    if cuda:
        props = torch.cuda.get_device_properties(0)
        gpu = catalogue.lookup(torch.cuda.get_device_name(0), props.total_memory / 2**30)
        print(f"GPU {torch.cuda.get_device_name(0)} → catalogue {gpu.name if gpu else 'unknown'}")
    rows = []
    for name, seq, size, batch, optimizer in (TINY if a.tiny else WORKLOADS):
        spec = models.resolve(name, seq_len=seq, image_size=size)
        profile = graph.measure(spec)
        precision = "amp" if cuda else "fp32"
        mem = memory.estimate(profile, precision, optimizer)
        predicted = None
        if gpu is not None:
            predicted = speed.step(profile, gpu, precision, optimizer, batch, batch).samples_per_s
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        measured = _train(spec, batch, optimizer, device, cuda, runs=2 if a.tiny else 5, steps=1 if a.tiny else 5)
        peak = torch.cuda.max_memory_reserved() / 2**30 if cuda else None
        rows.append({"model": spec.describe(), "batch": batch, "optimizer": optimizer, "precision": precision,
                     "measured_samples_per_s": round(measured, 2),
                     "predicted_samples_per_s": round(predicted, 2) if predicted else None,
                     "ratio_predicted_over_measured": round(predicted / measured, 3) if predicted else None,
                     "predicted_gb_without_context": round(mem.total_gb(batch) - memory.CONTEXT_GB, 2),
                     "measured_peak_reserved_gb": round(peak, 2) if peak is not None else None})
        print(json.dumps(rows[-1]))
        if cuda:
            torch.cuda.empty_cache()
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump({"gpu": gpu.name if gpu else None, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
