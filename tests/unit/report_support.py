"""Report test material: the REAL quick bench + facts of this machine (run once per test
process), and GPU-host documents built with the agent's own code wherever it has a function
for the shape (nvidia-smi XML parser, sampler summary, DataLoader verdict, grad accumulation,
PCIe rate), so crafted documents follow the real schema rather than a guess of it.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from provision.agent.bench.dataloader import verdict as loader_verdict
from provision.agent.bench.memory import grad_accumulation
from provision.agent.bench.sampler import summarize_gpu
from provision.agent.bench.transfer import theoretical_gbs
from provision.agent.nvidia import smi_xml

NVIDIA_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "nvidia"
GiB = 1 << 30


@functools.lru_cache(maxsize=1)
def _real_run() -> tuple[dict[str, Any], dict[str, Any]]:
    from provision.connection.local import LocalConnection
    from provision.remote.agent import Agent

    agent = Agent(LocalConnection())
    facts = agent.call("facts", {})
    bench = agent.call("bench", {"quick": True}, timeout=600)
    return facts, bench


def real_facts_and_bench() -> tuple[dict[str, Any], dict[str, Any]]:
    """(facts, bench) of this machine, measured once per process; callers get copies."""
    facts, bench = _real_run()
    return copy.deepcopy(facts), copy.deepcopy(bench)


# -- a GPU host, from real parsers and real agent functions ----------------------------------------


def h100_facts(free_bytes: int = 800 * GiB, network_data_dir: bool = False) -> dict[str, Any]:
    """Facts of a 1x H100 host: the GPU entry is the nvidia-smi XML parser's output on a real
    capture (tests/unit/fixtures/nvidia/h100-sxm-590.48.01.xml)."""
    parsed = smi_xml.parse((NVIDIA_FIXTURES / "h100-sxm-590.48.01.xml").read_text())
    fs = "nfs4" if network_data_dir else "ext4"
    return {
        "schema": 1,
        "hostname": "h100-box",
        "os": {"pretty_name": "Ubuntu 22.04.4 LTS", "id": "ubuntu"},
        "cpu": {
            "model": "Intel(R) Xeon(R) Platinum 8480+",
            "usable_cpus": 16,
            "effective_cpus": 16,
        },
        "nvidia": {
            "driver_version": parsed["driver_version"],
            "cuda_driver_version": parsed["cuda_version"],
            "gpu_count": len(parsed["gpus"]),
        },
        "gpus": parsed["gpus"],
        "data_dir": {
            "path": "/data",
            "exists": True,
            "mountpoint": "/data",
            "fs_type": fs,
            "network": network_data_dir,
            "free_bytes": free_bytes,
            "total_bytes": 1800 * GiB,
            "writable": True,
        },
        "disks": {
            "mounts": [
                {"mountpoint": "/", "fs_type": "overlay", "network": False},
                {"mountpoint": "/data", "fs_type": fs, "network": network_data_dir},
                {"mountpoint": "/mnt/shared", "fs_type": "nfs4", "network": True},
            ]
        },
    }


def _run(sps: float, batch: int, peak_mb: float) -> dict[str, Any]:
    return {
        "samples_per_s": sps,
        "step_ms": round(batch / sps * 1e3, 3),
        "repeats": 20,
        "peak_memory_mb": peak_mb,
    }


def h100_bench(
    *,
    fp32: float = 1210.0,
    bf16: float = 2890.0,
    loader_by_workers: dict[int, float] | None = None,
    loader_role: str = "local",
    max_batch: int = 768,
    link: tuple[int, int, int, int] = (5, 16, 5, 16),  # gen, width, max gen, max width
    pinned_h2d: float = 53.1,
    throttle_rows: int = 0,
    samples: int = 60,
    bf16_pct: float = 68.0,
) -> dict[str, Any]:
    """A GPU bench result as provision/agent/bench/run.py shapes it."""
    cores = 16
    loader_by_workers = loader_by_workers or {
        0: 410.0,
        1: 395.0,
        2: 780.0,
        4: 1510.0,
        8: 2950.0,
        16: 5200.0,
    }
    settings = [
        {
            "num_workers": w,
            "pin_memory": True,
            "persistent_workers": w > 0,
            "samples_per_s": sps,
            "first_batch_s": 0.2,
            "batches": 400,
            "seconds": 3.0,
        }
        for w, sps in sorted(loader_by_workers.items())
    ]
    candidates = [s for s in settings if s["num_workers"] > 0] or settings
    best = dict(max(candidates, key=lambda s: s["samples_per_s"]))
    train = max(fp32, bf16)
    per_worker = loader_by_workers.get(1)
    verdict = loader_verdict(
        best["samples_per_s"], train, per_worker, best["num_workers"], cores, loader_role
    )
    source = {
        "source": {"path": "/data/datasets/imagenet.lmdb", "format": "lmdb", "role": loader_role,
                   "name": "imagenet", "samples": 1281167},
        "settings": settings,
        "best": best,
        "per_worker_samples_per_s": per_worker,
        "variants": [],
        "status": "ok",
        "verdict": verdict,
    }  # fmt: skip
    gen, width, max_gen, max_width = link
    theo, theo_max = theoretical_gbs(gen, width), theoretical_gbs(max_gen, max_width)
    rows = []
    for i in range(samples):
        mask = 0x40 if i < throttle_rows else 0x4  # HW thermal slowdown, else the power cap
        sm = 1410 if i < throttle_rows else 1980
        rows.append((float(i), 99, 60000, sm, 2619, 84 if i < throttle_rows else 71, 640.0, mask))
    static = {"name": "NVIDIA H100 80GB HBM3", "max_sm_mhz": 1980, "power_limit_w": 700.0}
    return {
        "schema": 1,
        "quick": False,
        "host": {
            "python": "3.11.9",
            "executable": "/root/.provision/env/bin/python",
            "cores": cores,
            "torch": "2.5.1+cu124",
            "cuda": "12.4",
            "device": "cuda",
            "cudnn": 90100,
        },  # fmt: skip
        "sections": [
            "compute",
            "amp",
            "memory",
            "transfer",
            "dataloader",
            "storage",
            "network",
            "distributed",
        ],
        "compute": {
            "status": "ok",
            "reason": None,
            "device": "cuda",
            "per_gpu": [
                {
                    "index": 0,
                    "device": "cuda:0",
                    "name": "NVIDIA H100 80GB HBM3",
                    "capability": "9.0",
                    "memory_gb": 85.0,
                    "tflops": {
                        "fp32": 51.2,
                        "tf32": 378.0,
                        "fp16": 672.5,
                        "bf16": round(989.4 * bf16_pct / 100, 1),
                    },
                    "pct_of_peak": {"fp32": 76.4, "tf32": 76.4, "fp16": 68.0, "bf16": bf16_pct},
                    "peak_tflops": {"fp32": 67.0, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4},
                    "skipped": {},
                    "timing": {},
                }
            ],
            "seconds": 6.1,
        },
        "amp": {
            "status": "ok",
            "reason": None,
            "device": "cuda:0",
            "precisions": ["fp32", "fp16", "bf16"],
            "models": {
                "convnet": {
                    "model": {"arch": "resnet", "image_size": 224},
                    "batch": 64,
                    "unit": "images",
                    "runs": {
                        "fp32": _run(fp32, 64, 9100.0),
                        "fp16": dict(_run(bf16 * 0.97, 64, 5200.0), grad_scaler=True),
                        "bf16": _run(bf16, 64, 5100.0),
                    },
                    "best_amp_dtype": "bf16",
                    "speedup": round(bf16 / fp32, 3),
                    "best_samples_per_s": train,
                },
            },
            "speedup": round(bf16 / fp32, 3),
            "best_dtype": "bf16",
            "train_samples_per_s": train,
            "image_size": 224,
            "seconds": 20.0,
        },
        "memory": {
            "status": "ok",
            "reason": None,
            "device": "cuda:0",
            "dtype": "bf16",
            "target_batch": 1024,
            "models": {
                "convnet": {
                    "max_batch": max_batch,
                    "first_failing": max_batch + 64,
                    "bounded_by": "oom",
                    "exact": True,
                    "tried": [],
                    "error": None,
                    "unit": "images",
                    "per_sample_mb": 98.5,
                    "grad_accumulation": grad_accumulation(1024, max_batch),
                }
            },
            "seconds": 30.0,
        },
        "transfer": {
            "status": "ok",
            "reason": None,
            "size_mb": 256,
            "per_gpu": [
                {
                    "index": 0,
                    "h2d_gbs": {"pageable": 18.2, "pinned": pinned_h2d},
                    "d2h_gbs": {"pageable": 17.0, "pinned": pinned_h2d * 0.98},
                    "link": {
                        "gen": gen,
                        "width": width,
                        "max_gen": max_gen,
                        "max_width": max_width,
                        "source": "nvml after the copies",
                    },  # fmt: skip
                    "theoretical_gbs": theo,
                    "theoretical_max_gbs": theo_max,
                    "pct_of_theoretical": round(100.0 * pinned_h2d / theo_max, 1),
                    "link_below_max": gen < max_gen or width < max_width,
                }
            ],
            "seconds": 2.0,
        },
        "dataloader": {
            "status": "ok",
            "reason": None,
            "image_size": 224,
            "batch_size": 64,
            "cores": cores,
            "num_workers_tried": sorted(loader_by_workers),
            "sources": [source],
            "train_samples_per_s": train,
            "best_num_workers": best["num_workers"],
            "best_samples_per_s": best["samples_per_s"],
            "verdict": verdict,
            "primary": "imagenet",
            "best": best,
            "seconds": 40.0,
        },
        "storage": {
            "status": "ok",
            "reason": None,
            "dirs": [
                {
                    "path": "/data",
                    "role": "data",
                    "mount": "/data",
                    "fstype": "ext4",
                    "network_fs": False,
                    "total_gb": 1932.7,
                    "free_gb": 858.9,
                    "used_pct": 55.6,
                    "file_mb": 1024,
                    "seq_write_mb_s": 2100.0,
                    "seq_read": {"mb_s": 3150.0, "method": "O_DIRECT"},
                    "random_read": {"iops": 98000.0, "mb_s": 401.0, "method": "O_DIRECT"},
                    "status": "ok",
                },
                {
                    "path": "/mnt/shared",
                    "role": "network",
                    "mount": "/mnt/shared",
                    "fstype": "nfs4",
                    "network_fs": True,
                    "total_gb": 10000.0,
                    "free_gb": 4000.0,
                    "used_pct": 60.0,
                    "file_mb": 1024,
                    "seq_write_mb_s": 180.0,
                    "seq_read": {"mb_s": 210.0, "method": "O_DIRECT"},
                    "random_read": {"iops": 1900.0, "mb_s": 7.8, "method": "O_DIRECT"},
                    "status": "ok",
                },
            ],  # fmt: skip
            "seq_read_ratio_data_vs_network": 15.0,
            "random_iops_ratio_data_vs_network": 51.58,
            "seconds": 20.0,
        },
        "network": {"status": "skipped", "reason": "no index or mirror URL given", "seconds": 0.0},
        "distributed": {"status": "skipped", "reason": "1 GPU on this host", "seconds": 0.0},
        "under_load": {
            "status": "ok",
            "reason": None,
            "interval_s": 1.0,
            "samples": samples,
            "cpu": {
                "busy_pct_mean": 55.0,
                "busy_pct_max": 98.0,
                "iowait_pct_mean": 0.4,
                "load1_max": 14.2,
            },
            "gpu": {"status": "ok", "per_gpu": [summarize_gpu(0, rows, static)]},
            "by_section": {},
        },
        "wall_s": 180.0,
    }


def h100_compat(verdict: str = "OK", **extra: Any) -> dict[str, Any]:
    """`provision check`'s host result (HostCheck.to_dict) for the H100 host."""
    doc = {
        "plan": {"torch": "2.5.1", "variant": "cu124", "cuda": "12.4", "cudnn": "9.1.0.70",
                 "action": "keep", "mode": "full"},
        "reasons": [],
        "options": [],
        "verdict": verdict,
        "fix": None,
        "problems": [],
        "warnings": [],
        "python": "/root/.provision/env/bin/python",
        "host": {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}],
                 "driver": "590.48.01", "cuda_max": "13.1", "python": "3.11.9", "arch": "x86_64",
                 "torch": "2.5.1+cu124"},
        "verify": {"installed": True, "torch": {"version": "2.5.1+cu124", "cuda": "12.4", "cudnn": 90100}},
    }  # fmt: skip
    doc.update(extra)
    return doc


def h100_report(created: str | None = None, price: float | None = None, host: str = "h100-box",
                facts: dict[str, Any] | None = None, bench: dict[str, Any] | None = None,
                compat: dict[str, Any] | None = None, datasets: list[dict[str, Any]] | None = None) -> dict[str, Any]:  # fmt: skip
    from provision.report.document import build_report

    return build_report(
        host,
        facts=facts if facts is not None else h100_facts(),
        compat=compat if compat is not None else h100_compat(),
        install={
            "python": "/root/.provision/env/bin/python",
            "torch": "2.5.1+cu124",
            "managed": True,
        },
        datasets=datasets
        if datasets is not None
        else [
            {
                "name": "imagenet",
                "path": "/data/datasets/imagenet.lmdb",
                "format": "lmdb",
                "count": 1281167,
            }
        ],
        bench=bench if bench is not None else h100_bench(),
        price_per_hour=price,
        created=created,
    )
