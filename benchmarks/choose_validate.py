"""`provision choose`'s predictions against Lambda's published AMP and fp32 training throughput.

    PYTHONPATH=$PWD python3 benchmarks/choose_validate.py [--markdown] [--fp32]

--fp32: the fp32 table (benchmarks/data/lambda_fp32), predicted as `tf32` (NVIDIA's container
turns fp32 matmuls into TF32 on Ampere and newer; see provision/choose/validation.py).

Prints, per workload and GPU, the measured samples/s (benchmarks/data/lambda_fp16, source and
commit in its README), the prediction, and predicted ÷ measured; then per workload Spearman's
rank correlation across the GPUs and the median ratio. Pure arithmetic on the CPU (the model
graphs are traced on the meta device): no GPU and no quiet machine needed. Exit 1 when a goal
(Spearman ≥ 0.9, median ratio within 1.5×) is missed.
"""

from __future__ import annotations

import sys

from provision.choose import validation


def main(argv: list[str]) -> int:
    precision = "tf32" if "--fp32" in argv else "amp"
    rows = validation.rows(validation.TABLES[precision], precision)
    md = "--markdown" in argv
    if md:
        print("| workload | GPU | batch | measured | predicted | predicted ÷ measured |")
        print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        if md:
            print(f"| {r.workload} | {r.gpu} | {r.batch} | {r.measured:.0f} | {r.predicted:.0f} | {r.ratio:.2f} |")
        else:
            print(f"{r.workload:18} {r.gpu:32} {r.batch:5} {r.measured:8.0f} {r.predicted:8.0f} {r.ratio:6.2f}")
    ok = True
    print()
    for workload, s in validation.summary(rows).items():
        good = s["spearman"] >= 0.9 and 1 / 1.5 <= s["median_ratio"] <= 1.5
        ok &= good
        print(f"{workload:18} GPUs {s['gpus']:.0f}  Spearman {s['spearman']:.3f}  median predicted/measured"
              f" {s['median_ratio']:.2f}  {'ok' if good else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
