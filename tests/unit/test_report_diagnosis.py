"""Each diagnosis rule fires on a document showing its problem, with evidence and a concrete
recommendation, and stays quiet on a healthy one. Documents: a GPU host built with the agent's
own parsers and functions (report_support), varied one measurement at a time; and the REAL
quick bench of this CPU machine."""

from __future__ import annotations

from typing import Any

import pytest
from report_support import (
    GiB,
    h100_bench,
    h100_compat,
    h100_facts,
    h100_report,
    real_facts_and_bench,
)

from provision.bench import diagnosis as bench_dx
from provision.report import diagnosis as dx
from provision.report.document import build_report


def findings(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {f["id"]: f for f in doc["diagnosis"]}


def test_healthy_gpu_host_has_only_advice():
    """The default H100 host: fast loader, full link, no throttling, plenty of disk."""
    found = findings(h100_report())
    assert set(found) == {"amp_unused", "num_workers", "vram_headroom"}
    assert {f["severity"] for f in found.values()} <= {"warn", "info"}


# -- compatibility -------------------------------------------------------------------------------


def test_compat_broken_is_critical_with_the_check_problems_and_fix():
    compat = h100_compat(
        "BROKEN",
        problems=["GPU 0 (NVIDIA H100 80GB HBM3, sm_90): this torch build has no kernels for it"],
        fix="provision install h100-box",
    )
    f = findings(h100_report(compat=compat))["compat_mismatch"]
    assert f["severity"] == "critical"
    assert "no kernels for it" in f["evidence"] and "provision check: BROKEN" in f["evidence"]
    assert f["recommendation"] == "provision install h100-box"


def test_compat_warn_is_a_warning():
    compat = h100_compat("WARN", warnings=["torch 2.4.1 works; the request asks for 2.5.1+cu124"])
    assert findings(h100_report(compat=compat))["compat_mismatch"]["severity"] == "warn"


def test_torch_built_for_a_newer_cuda_major_than_the_driver():
    facts = h100_facts()
    facts["nvidia"]["cuda_driver_version"] = "12.2"
    bench = h100_bench()
    bench["host"]["cuda"] = "13.0"
    f = findings(h100_report(facts=facts, bench=bench, compat={}))["compat_mismatch"]
    assert f["severity"] == "critical"
    assert "built for CUDA 13.0 but the driver supports CUDA 12.2" in f["evidence"]
    assert "provision install h100-box" in f["recommendation"]


def test_minor_version_compat_is_a_warning():
    facts = h100_facts()
    facts["nvidia"]["cuda_driver_version"] = "12.2"
    f = findings(h100_report(facts=facts, compat={}))["compat_mismatch"]  # torch cu124
    assert f["severity"] == "warn" and "minor-version compatibility" in f["evidence"]


def test_a_different_cudnn_than_the_build_ships():
    compat = h100_compat()
    compat["verify"]["torch"]["cudnn"] = 8902  # torch.backends.cudnn.version() of 8.9.2
    f = findings(h100_report(compat=compat))["compat_mismatch"]
    assert "cuDNN 8.9.2 is loaded but this torch build ships cuDNN 9.1.0.70" in f["evidence"]


def test_gpus_present_but_torch_on_the_cpu():
    bench = h100_bench()
    bench["host"].update(device="cpu", cuda=None, torch="2.5.1+cpu")
    f = findings(h100_report(bench=bench, compat={}))["compat_mismatch"]
    assert f["severity"] == "critical"
    assert "1 NVIDIA GPU(s) in the facts" in f["evidence"] and "2.5.1+cpu" in f["evidence"]


def test_matched_stack_has_no_compat_finding():
    assert "compat_mismatch" not in findings(h100_report())


@pytest.mark.parametrize(
    "value, text", [(90100, "9.1.0"), (8902, "8.9.2"), ("9.1.0.70", "9.1.0.70"), (None, None)]
)
def test_cudnn_text(value, text):
    assert dx.cudnn_text(value) == text


# -- data loading --------------------------------------------------------------------------------


def test_loader_that_cannot_feed_the_gpu_says_how_many_workers():
    # 16 cores; one worker decodes 250/s; training wants 2890/s -> the agent's own verdict says
    # 14 workers are needed (ceil(1.2 * 2890 / 250))
    bench = h100_bench(loader_by_workers={0: 300.0, 1: 250.0, 2: 480.0, 4: 900.0, 8: 1100.0})
    f = findings(h100_report(bench=bench))["loader_bottleneck"]
    assert f["severity"] == "critical"  # 1100 / 2890 = 0.38 < 0.5
    assert "best loader 1100 samples/s (num_workers=8" in f["evidence"]
    assert "training 2890 samples/s" in f["evidence"] and "bottleneck" in f["evidence"]
    assert f["recommendation"].startswith("raise num_workers to 14")
    assert "num_workers=14, pin_memory=True, persistent_workers=True" in f["recommendation"]
    assert f["title"] == "The DataLoader cannot feed the GPU"
    assert "num_workers" not in findings(h100_report(bench=bench))  # said once, with more


def test_loader_on_the_network_copy_says_stage_to_ssd():
    bench = h100_bench(loader_by_workers={1: 900.0, 2: 1700.0, 4: 2600.0}, loader_role="network")
    f = findings(h100_report(bench=bench))["loader_bottleneck"]
    assert f["severity"] == "warn"  # 2600 / 2890 = 0.9
    assert "provision stage SRC h100-box" in f["recommendation"]


def test_cpu_bound_loader_with_no_cores_left_says_decode_elsewhere():
    bench = h100_bench(loader_by_workers={1: 60.0, 2: 120.0, 4: 240.0, 8: 480.0, 16: 950.0})
    f = findings(h100_report(bench=bench))["loader_bottleneck"]
    assert "decoding is CPU-bound at 16 cores" in f["recommendation"]
    assert "DALI" in f["recommendation"]


def test_loader_fast_enough_has_no_bottleneck():
    assert "loader_bottleneck" not in findings(h100_report())  # 5200 vs 2890: 1.8x


def test_num_workers_advice_needs_a_real_gain():
    flat = h100_bench(loader_by_workers={0: 5000.0, 1: 2600.0, 2: 5100.0})
    assert "num_workers" not in findings(h100_report(bench=flat))  # 5100 < 1.3 x 5000
    f = findings(h100_report())["num_workers"]
    assert f["title"] == "Use DataLoader num_workers=16"
    assert "0: 410, 1: 395, 2: 780, 4: 1510, 8: 2950, 16: 5200" in f["evidence"]


def test_dataset_path_on_an_nfs_mount():
    # fs_type as `provision bench` fills it in (the data dir's): the path's mount decides
    datasets = [
        {"name": "imagenet", "path": "/mnt/shared/imagenet", "format": "folder", "fs_type": "ext4"}
    ]
    f = findings(h100_report(datasets=datasets))["dataset_on_network_disk"]
    assert "/mnt/shared/imagenet is on nfs4" in f["evidence"]
    assert "sequential read 210 MB/s there vs 3150 MB/s on the local disk" in f["evidence"]
    assert "98000 IOPS" in f["evidence"]
    assert "provision stage SRC h100-box" in f["recommendation"]
    assert "800 GiB free on /data" in f["recommendation"]


def test_data_dir_itself_on_network_storage():
    f = findings(h100_report(facts=h100_facts(network_data_dir=True), datasets=[]))
    assert "the data dir /data is on nfs4" in f["dataset_on_network_disk"]["evidence"]


def test_dataset_staged_locally_is_not_on_the_network():
    assert "dataset_on_network_disk" not in findings(h100_report())


# -- GPU use -------------------------------------------------------------------------------------


def test_amp_speedup_recommends_bf16_autocast():
    f = findings(h100_report())["amp_unused"]
    assert f["title"] == "Mixed precision trains 2.39x faster here"
    assert "1210 -> 2890 samples/s" in f["evidence"]
    assert (
        f["recommendation"]
        == "train with torch.autocast('cuda', dtype=torch.bfloat16) (no GradScaler needed)"
    )


def test_fp16_best_needs_a_grad_scaler():
    bench = h100_bench()
    bench["amp"]["best_dtype"] = "fp16"
    assert (
        "GradScaler('cuda')" in findings(h100_report(bench=bench))["amp_unused"]["recommendation"]
    )


def test_small_amp_gain_is_not_worth_a_finding():
    assert "amp_unused" not in findings(h100_report(bench=h100_bench(fp32=1000.0, bf16=1100.0)))


def test_vram_headroom_gives_batch_and_accumulation():
    f = findings(h100_report())["vram_headroom"]
    assert f["title"] == "Batch size: up to 768 per step (convnet)"
    assert "the next size ran out of memory" in f["evidence"]
    assert "a target batch of 1024 needs 2 accumulation steps of 512" in f["evidence"]
    assert "peaked at 9100 of 81559 MiB" in f["evidence"]  # facts' memory.total_mib
    assert (
        "for an effective batch of 1024: 2 gradient-accumulation steps of 512"
        in f["recommendation"]
    )


def test_vram_headroom_when_the_target_fits():
    f = findings(h100_report(bench=h100_bench(max_batch=2048)))["vram_headroom"]
    assert "the target batch of 1024 fits without gradient accumulation" in f["recommendation"]


def test_no_vram_finding_without_a_memory_search():
    bench = h100_bench()
    bench["memory"] = {"status": "skipped", "reason": "not requested (sections)"}
    assert "vram_headroom" not in findings(h100_report(bench=bench))


def test_pcie_link_trained_down_under_load():
    f = findings(h100_report(bench=h100_bench(link=(4, 16, 5, 16), pinned_h2d=25.0)))[
        "pcie_below_max"
    ]
    assert "GPU 0: gen4 x16 of gen5 x16 right after the copies" in f["evidence"]
    assert "pinned H2D 25.0 GB/s = 40% of the link's 63.01 GB/s" in f["evidence"]


def test_pcie_slow_copies_on_a_full_link():
    f = findings(h100_report(bench=h100_bench(pinned_h2d=20.0)))["pcie_below_max"]
    assert "gen" not in f["evidence"].split("pinned")[0]  # the link itself is at its max
    assert "= 32% of" in f["evidence"]


def test_pcie_narrow_link_from_facts_when_no_copy_ran():
    facts = h100_facts()
    facts["gpus"][0]["pcie"].update(width_current=8)
    bench = h100_bench()
    bench["transfer"] = {"status": "skipped", "reason": "not requested (sections)"}
    f = findings(h100_report(facts=facts, bench=bench))["pcie_below_max"]
    assert "GPU 0: link width x8 of x16 (facts)" in f["evidence"]


def test_idle_generation_drop_in_facts_is_not_a_finding():
    facts = h100_facts()
    facts["gpus"][0]["pcie"].update(gen_current=1)  # power saving while idle
    bench = h100_bench()
    bench["transfer"] = {"status": "skipped", "reason": "not requested (sections)"}
    assert "pcie_below_max" not in findings(h100_report(facts=facts, bench=bench))


def test_thermal_throttling_under_load_is_critical():
    f = findings(h100_report(bench=h100_bench(throttle_rows=12, samples=60)))["throttling"]
    assert f["severity"] == "critical"
    assert "GPU 0: hw_thermal_slowdown in 12/60 samples (max 84 C" in f["evidence"]
    assert "SM clock down to 1410 of 1980 MHz" in f["evidence"]


def test_power_cap_and_blips_are_not_throttling():
    assert "throttling" not in findings(h100_report())  # sw_power_cap in every sample
    assert "throttling" not in findings(h100_report(bench=h100_bench(throttle_rows=2, samples=60)))


def test_low_fraction_of_the_dense_peak():
    f = findings(h100_report(bench=h100_bench(bf16_pct=25.0)))["low_matmul_peak"]
    assert f["title"] == "GPU 0 reaches 25% of its dense peak"
    assert "989.4 TFLOPS" in f["evidence"]
    assert "low_matmul_peak" not in findings(h100_report())


# -- disk ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "free, severity",
    [(800 * GiB, None), (80 * GiB, "warn"), (5 * GiB, "warn"), (GiB // 2, "critical")],
)
def test_disk_nearly_full(free, severity):
    f = findings(h100_report(facts=h100_facts(free_bytes=free))).get("disk_nearly_full")
    if severity is None:
        assert f is None
    else:
        assert f["severity"] == severity
        assert f["evidence"].startswith(f"/data: {free / GiB:.1f} GiB free of 1800 GiB")


def test_a_small_disk_that_is_all_free_is_not_nearly_full():
    facts = h100_facts()
    facts["data_dir"].update(free_bytes=20 * GiB, total_bytes=20 * GiB)
    small = [{"name": "mini", "path": "/data/datasets/mini.lmdb", "format": "lmdb", "bytes": GiB}]
    assert "disk_nearly_full" not in findings(h100_report(facts=facts, datasets=small))
    # 4 % free of that disk is nearly full, whatever the GiB
    facts["data_dir"].update(free_bytes=GiB * 8 // 10)
    f = findings(h100_report(facts=facts, datasets=[]))["disk_nearly_full"]
    assert f["severity"] == "critical" and "(4%)" in f["title"]


def test_what_is_about_to_be_written_decides_too():
    facts = h100_facts()
    facts["data_dir"].update(free_bytes=200 * GiB, total_bytes=1000 * GiB)  # 20 % free
    big = [{"name": "imagenet", "path": "/data/datasets/imagenet.lmdb", "format": "lmdb", "bytes": 300 * GiB}]
    f = findings(h100_report(facts=facts, datasets=big))["disk_nearly_full"]
    assert f["severity"] == "critical"
    assert "the staged datasets take 300.0 GiB" in f["evidence"]
    fits = [dict(big[0], bytes=50 * GiB)]
    assert "disk_nearly_full" not in findings(h100_report(facts=facts, datasets=fits))


def test_disk_from_the_bench_storage_when_facts_are_missing():
    bench = h100_bench()
    bench["storage"]["dirs"][0].update(free_gb=3.0, total_gb=500.0)
    f = findings(build_report("h", bench=bench))["disk_nearly_full"]
    assert "/data: 2.8 GiB free" in f["evidence"]


# -- robustness and order ------------------------------------------------------------------------


def test_critical_findings_come_first():
    bench = h100_bench(throttle_rows=30, loader_by_workers={1: 100.0, 2: 200.0})
    severities = [f["severity"] for f in h100_report(bench=bench)["diagnosis"]]
    assert severities == sorted(severities, key=["critical", "warn", "info"].index)
    assert severities[0] == "critical"


def test_a_malformed_section_does_not_hide_the_others():
    bench = h100_bench(throttle_rows=30)
    bench["dataloader"] = {"status": "ok", "sources": "garbage", "best_samples_per_s": "x"}
    bench["memory"]["models"] = []
    doc = {"host": "h", "facts": h100_facts(free_bytes=GiB // 4), "bench": bench, "datasets": []}
    found = {f.id for f in dx.diagnose(doc)}  # (build_report would refuse the document)
    assert {"throttling", "disk_nearly_full", "amp_unused"} <= found


# -- the real CPU run ----------------------------------------------------------------------------


@pytest.mark.slow
def test_real_cpu_bench_findings_are_consistent_with_its_numbers():
    pytest.importorskip("torch")
    facts, bench = real_facts_and_bench()
    doc = build_report("localhost", facts=facts, bench=bench, install={"python": "python3"})
    found = findings(doc)
    # no GPU on this machine: nothing GPU-specific may fire
    assert not {"pcie_below_max", "throttling", "low_matmul_peak", "compat_mismatch"} & set(found)
    speedup = bench["amp"]["speedup"]
    assert ("amp_unused" in found) == (speedup >= bench_dx.AMP_WORTH_IT)
    if "amp_unused" in found:
        assert f"{speedup:.2f}x" in found["amp_unused"]["evidence"]
        assert (
            "torch.autocast('cpu', dtype=torch.bfloat16)" in found["amp_unused"]["recommendation"]
        )
    loader, train = bench["dataloader"]["best_samples_per_s"], bench["amp"]["train_samples_per_s"]
    assert ("loader_bottleneck" in found) == (loader < bench_dx.LOADER_MARGIN * train)
    max_batch = bench["memory"]["models"]["convnet"]["max_batch"]
    assert ("vram_headroom" in found) == bool(max_batch)


def test_workers_whose_batches_do_not_fit_in_dev_shm_are_flagged():
    """Docker's default 64 MB /dev/shm: 16 workers x 2 prefetched batches of 64 224px images."""
    small = h100_bench()
    small["dataloader"]["shm_mb"] = 64
    f = findings(h100_report(bench=small))["loader_shm"]
    assert f["title"] == "num_workers=16 will not fit in /dev/shm (64 MB)"
    assert "16 workers x prefetch_factor 2 x 9.2 MB" in f["evidence"] and "294 MB" in f["evidence"]
    assert "--shm-size" in f["recommendation"] and "set_sharing_strategy('file_system')" in f["recommendation"]
    roomy = h100_bench()
    roomy["dataloader"]["shm_mb"] = 16384
    assert "loader_shm" not in findings(h100_report(bench=roomy))
