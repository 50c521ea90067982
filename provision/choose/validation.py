"""The prediction against a published table of measured training throughput.

benchmarks/data/lambda_fp16/throughput.csv and lambda_fp32/throughput.csv: Lambda's PyTorch
benchmark (NVIDIA's DeepLearningExamples in NVIDIA's PyTorch container), single-GPU samples/s of
ResNet-50 (224 px, SGD momentum) and BERT base/large SQuAD fine-tuning (sequence 384, Adam), each
at the batch the table ran, with AMP and in "fp32". The container sets
TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1, so its fp32 runs are choose's `tf32` (TF32 matmuls where the
GPU has TF32, IEEE FP32 before Ampere). The tables are for checking the model, never its input:
nothing here feeds back into speed.py.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from provision.choose import catalogue, graph, models, speed

_DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
TABLE = _DATA / "lambda_fp16" / "throughput.csv"
TABLE_FP32 = _DATA / "lambda_fp32" / "throughput.csv"
# each table with the precision choose predicts it at (see the module docstring)
TABLES = {"amp": TABLE, "tf32": TABLE_FP32}
# table column -> (architecture, seq_len, optimizer)
WORKLOADS = {
    "resnet50": ("resnet50", None, "sgd"),
    "bert_base_squad": ("bert-base", 384, "adam"),
    "bert_large_squad": ("bert-large", 384, "adam"),
}


@dataclass(frozen=True)
class Row:
    workload: str
    gpu: str  # catalogue name
    source_name: str
    batch: int
    measured: float
    predicted: float

    @property
    def ratio(self) -> float:
        return self.predicted / self.measured


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""

    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else 0.0


@cache
def _profile(name: str, seq_len: int | None) -> graph.Profile:
    return graph.measure(models.resolve(name, seq_len=seq_len))


def rows(table: Path = TABLE, precision: str = "amp") -> list[Row]:
    with table.open(newline="", encoding="utf-8") as f:
        records = list(csv.DictReader(f))
    out = []
    for column, (name, seq_len, optimizer) in WORKLOADS.items():
        profile = _profile(name, seq_len)
        for rec in records:
            gpu = catalogue.require(rec["gpu"], where=f"{table.name}")
            batch = int(rec[f"{column}_batch"])
            s = speed.step(profile, gpu, precision, optimizer, batch, max_batch=batch)
            out.append(Row(column, gpu.name, rec["source_name"], batch, float(rec[column]), s.samples_per_s))
    return out


def summary(result: list[Row]) -> dict[str, dict[str, float]]:
    """Per workload: Spearman across GPUs and the median predicted/measured ratio."""
    by: dict[str, list[Row]] = {}
    for r in result:
        by.setdefault(r.workload, []).append(r)
    return {w: {"spearman": spearman([r.measured for r in rs], [r.predicted for r in rs]),
                "median_ratio": statistics.median(r.ratio for r in rs), "gpus": len(rs)}
            for w, rs in by.items()}
