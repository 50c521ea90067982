"""Pure pieces of the benchmark: formulas, search and verdict logic, parsers. No timing asserted."""

from __future__ import annotations

import pytest

from provision.agent.bench import (
    compute,
    dataloader,
    distributed,
    memory,
    network,
    nvml,
    run,
    sampler,
    storage,
    timing,
    transfer,
)


# -- formulas ----------------------------------------------------------------------------------
def test_busbw_follows_nccl_tests() -> None:
    assert distributed.busbw(100.0, 2) == pytest.approx(100.0)  # 2(n-1)/n = 1 for two ranks
    assert distributed.busbw(100.0, 8) == pytest.approx(175.0)
    assert distributed.busbw(100.0, 1) == 0.0
    assert distributed.algbw(1 << 30, 0.5) == pytest.approx(2 * (1 << 30))
    with pytest.raises(ValueError):
        distributed.busbw(1.0, 0)


def test_median() -> None:
    assert timing.median([3, 1, 2]) == 2
    assert timing.median([4, 1, 3, 2]) == 2.5
    assert timing.median([7.0]) == 7.0
    with pytest.raises(ValueError):
        timing.median([])


def test_tflops_and_pct_of_peak() -> None:
    assert compute.tflops(1000, 2e-3) == pytest.approx(1.0)
    pct = compute.pct_of_peak(
        {"fp32": 10.0, "fp16": 150.0, "bf16": None}, {"fp32": 20.0, "fp16": 300.0}
    )
    assert pct == {"fp32": 50.0, "tf32": None, "fp16": 50.0, "bf16": None}
    assert compute.pct_of_peak({"fp32": 1.0}, None)["fp32"] is None
    assert compute.peaks_for({"0": {"fp32": 1}}, 0) == {"fp32": 1}  # JSON keys are strings
    assert compute.peaks_for({1: {"fp32": 2}}, 1) == {"fp32": 2}
    assert compute.peaks_for(None, 0) is None


def test_pcie_theoretical_rates() -> None:
    assert transfer.theoretical_gbs(4, 16) == pytest.approx(31.5, abs=0.01)
    assert transfer.theoretical_gbs(3, 16) == pytest.approx(15.76, abs=0.01)
    assert transfer.theoretical_gbs(5, 8) == pytest.approx(31.5, abs=0.01)
    assert transfer.theoretical_gbs(None, 16) is None
    assert transfer.theoretical_gbs(9, 16) is None
    facts = {"pcie": {"0": {"gen_current": 1, "gen_max": 4, "width_current": 16, "width_max": 16}}}
    assert transfer.link_facts(facts, 0) == {"gen": 1, "max_gen": 4, "width": 16, "max_width": 16}
    assert transfer.link_facts({"pcie": {"0": {}}}, 0) is None
    merged = transfer.merge_link(
        {"gen": 4, "width": 16, "max_gen": None}, transfer.link_facts(facts, 0)
    )
    assert merged == {
        "gen": 4,
        "width": 16,
        "max_gen": 4,
        "max_width": 16,
        "source": "nvml after the copies",
    }
    assert transfer.merge_link(None, None) is None
    assert transfer.link_facts({"pcie": {"0": {"gen": 4, "width": 16}}}, 0) == {
        "gen": 4,
        "width": 16,
    }


# -- batch search --------------------------------------------------------------------------------
def fake_allocator(limit: int, exc: type[BaseException] = RuntimeError):
    calls: list[int] = []

    def try_batch(batch: int) -> None:
        calls.append(batch)
        if batch > limit:
            raise exc("CUDA out of memory. Tried to allocate 2.00 GiB")

    return try_batch, calls


@pytest.mark.parametrize("limit", [1, 7, 8, 100, 1000, 4095])
def test_search_finds_the_limit_within_resolution(limit: int) -> None:
    try_batch, calls = fake_allocator(limit)
    recovered: list[int] = []
    result = memory.search_max_batch(
        try_batch, start=8, cap=1 << 16, recover=lambda: recovered.append(1)
    )
    assert result.bounded_by == "oom" and result.exact
    assert result.max_batch <= limit
    assert limit - result.max_batch <= max(1, int(result.max_batch * 0.05))
    assert result.first_failing is not None and result.first_failing > limit
    assert len(recovered) == sum(1 for b in calls if b > limit)  # recovery after every OOM
    assert all(b in calls for b, r in result.tried if r == "ok")


def test_search_stops_at_cap_and_on_time() -> None:
    try_batch, _ = fake_allocator(10**9)
    result = memory.search_max_batch(try_batch, start=8, cap=100)
    assert (result.max_batch, result.bounded_by) == (100, "cap")
    clock = iter([5.0, 5.0, 0.0] + [0.0] * 10)
    result = memory.search_max_batch(try_batch, start=8, time_left=lambda: next(clock))
    assert result.bounded_by == "time" and not result.exact
    assert result.max_batch == 16  # two tries fitted before time ran out


def test_search_budget_exceeded_counts_as_oom_and_real_errors_propagate() -> None:
    def budget(batch: int) -> None:
        if batch > 50:
            raise memory.BudgetExceeded("predicted to exceed the budget")

    result = memory.search_max_batch(budget, start=8)
    assert result.bounded_by == "budget" and 48 <= result.max_batch <= 50

    def broken(batch: int) -> None:
        raise ValueError("shape mismatch")

    with pytest.raises(ValueError):
        memory.search_max_batch(broken, start=8)

    def breaks_late(batch: int) -> None:
        if batch >= 64:
            raise ValueError("index overflow")

    late = memory.search_max_batch(breaks_late, start=8)
    assert late.bounded_by == "error" and late.max_batch == 32 and "index overflow" in late.error


def test_search_predicted_time_stops_before_overrunning() -> None:
    try_batch, calls = fake_allocator(10**9)
    result = memory.search_max_batch(
        try_batch, start=8, time_left=lambda: 10.0, predict_seconds=lambda b, t: b / 10.0
    )
    assert result.bounded_by == "time" and max(calls) <= 100


def test_is_oom() -> None:
    assert memory.is_oom(RuntimeError("CUDA out of memory. Tried to allocate"))
    assert memory.is_oom(RuntimeError("CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"))
    assert memory.is_oom(memory.BudgetExceeded("x")) and memory.is_oom(MemoryError())
    assert not memory.is_oom(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


def test_grad_accumulation() -> None:
    assert memory.grad_accumulation(256, 100) == {
        "target_batch": 256,
        "micro_batch": 86,
        "steps": 3,
        "effective_batch": 258,
    }
    assert memory.grad_accumulation(256, 512)["steps"] == 1
    assert memory.grad_accumulation(256, 0) is None


def test_linear_fit() -> None:
    intercept, slope = memory.linear_fit([(8, 108.0), (16, 116.0), (32, 132.0)])
    assert intercept == pytest.approx(100.0) and slope == pytest.approx(1.0)
    assert memory.linear_fit([(10, 50.0)]) == (0.0, 5.0)  # one point: proportional
    assert memory.linear_fit([]) is None


# -- data loading ----------------------------------------------------------------------------------
def test_worker_counts_go_up_to_the_cores() -> None:
    assert dataloader.worker_counts(1) == [0, 1]
    assert dataloader.worker_counts(2) == [0, 1, 2]
    assert dataloader.worker_counts(6) == [0, 1, 2, 4, 6]
    assert dataloader.worker_counts(16) == [0, 1, 2, 4, 8, 16]


def test_verdict_levels_and_advice() -> None:
    ok = dataloader.verdict(1300.0, 1000.0, per_worker_sps=400.0, best_workers=4, cores=8)
    assert ok["verdict"] == "ok" and ok["ratio"] == 1.3
    marginal = dataloader.verdict(1050.0, 1000.0, per_worker_sps=300.0, best_workers=4, cores=8)
    assert marginal["verdict"] == "marginal"
    slow = dataloader.verdict(600.0, 1000.0, per_worker_sps=200.0, best_workers=2, cores=8)
    assert slow["verdict"] == "bottleneck" and slow["workers_needed"] == 6
    assert "raise num_workers to 6" in slow["recommendation"]
    cpu_bound = dataloader.verdict(600.0, 5000.0, per_worker_sps=200.0, best_workers=8, cores=8)
    assert cpu_bound["verdict"] == "bottleneck" and "CPU-bound" in cpu_bound["recommendation"]
    net = dataloader.verdict(600.0, 1000.0, 200.0, 2, 8, role="network")
    assert "stage the dataset to the local SSD" in net["recommendation"]
    assert dataloader.verdict(600.0, None)["verdict"] == "unknown"


def test_normalize_sources_names_the_bad_entry() -> None:
    assert dataloader.normalize_sources(["/data/x.lmdb"])[0] == {
        "path": "/data/x.lmdb",
        "format": None,
        "role": "local",
        "name": "x.lmdb",
    }
    with pytest.raises(ValueError, match=r"datasets\[1\]"):
        dataloader.normalize_sources(["/a", {"format": "lmdb"}])


# -- parsers ---------------------------------------------------------------------------------------
def test_cpu_percent_from_proc_stat(tmp_path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3\n")
    before = sampler.read_proc_stat(str(stat))
    stat.write_text("cpu  150 0 150 750 150 0 0 0 0 0\n")
    after = sampler.read_proc_stat(str(stat))
    assert before == (200, 100, 1000)
    assert sampler.cpu_percent(before, after) == (50.0, 25.0)
    assert sampler.cpu_percent(None, after) == (None, None)


def test_throttle_reasons_decode_and_summary() -> None:
    assert nvml.decode_throttle(0x1 | 0x4 | 0x40) == [
        "gpu_idle",
        "sw_power_cap",
        "hw_thermal_slowdown",
    ]
    rows = [
        (0.0, 90, 1000, 1400, 9000, 70, 300.0, 0x0),
        (0.5, 100, 1200, 1200, 9000, 85, 350.0, 0x4),
        (1.0, None, None, None, None, None, None, None),
    ]
    s = sampler.summarize_gpu(0, rows, {"name": "X", "max_sm_mhz": 1980, "power_limit_w": 350.0})
    assert s["util_pct_mean"] == 95.0 and s["sm_mhz_min"] == 1200 and s["temperature_c_max"] == 85
    assert s["throttle_reasons"] == {"sw_power_cap": 1} and s["throttled"] == ["sw_power_cap"]


def test_mount_of_picks_the_longest_prefix(tmp_path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/vda / ext4 rw 0 0\n"
        "nas:/export /root/autodl-fs nfs4 rw 0 0\n"
        "/dev/nvme0n1 /root/autodl-tmp xfs rw 0 0\n"
    )
    assert storage.mount_of("/root/autodl-fs/data", str(mounts))[:2] == ("/root/autodl-fs", "nfs4")
    assert storage.mount_of("/root/autodl-tmp", str(mounts))[:2] == ("/root/autodl-tmp", "xfs")
    assert storage.mount_of("/root/autodl-fsx", str(mounts))[:2] == ("/", "ext4")


def test_redact_hides_credentials() -> None:
    assert (
        network.redact("https://user:s3cret@mirror.example/simple/")
        == "https://***@mirror.example/simple/"
    )
    assert network.redact("https://pypi.org/simple/") == "https://pypi.org/simple/"
    with pytest.raises(ValueError, match="expected http"):
        network.probe("ftp://user:pw@host/x", 1, 1.0)


def test_request_sections_are_validated_and_ordered() -> None:
    assert run.validate({}) == list(run.SECTIONS)
    assert run.validate({"sections": ["storage", "compute"]}) == ["compute", "storage"]
    assert run.validate({"sections": "amp,memory"}) == ["amp", "memory"]
    with pytest.raises(ValueError, match="unknown gpu_burn"):
        run.validate({"sections": ["gpu_burn"]})


def test_run_section_isolates_failures() -> None:
    def boom() -> dict:
        raise RuntimeError("disk on fire")

    def skip() -> dict:
        raise run.Skip("no GPU")

    failed = run.run_section(boom)
    assert failed["status"] == "error" and failed["reason"] == "RuntimeError: disk on fire"
    assert run.run_section(skip)["status"] == "skipped"
    ok = run.run_section(lambda: {"x": 1})
    assert list(ok)[:2] == ["status", "reason"] and ok["status"] == "ok" and ok["x"] == 1


def test_cpu_summary_separates_other_load() -> None:
    rows = [(0.0, 100.0, 0.0, 3.0, 1.0), (0.5, 60.0, 5.0, 2.0, 1.2), (1.0, None, None, None, None)]
    s = sampler.summarize_cpu(rows, cpus=2)
    assert s["busy_pct_max"] == 100.0 and s["iowait_pct_mean"] == 2.5 and s["load1_max"] == 3.0
    assert s["others_busy_pct_mean"] == 25.0  # (100 - 50) and max(0, 60 - 60), averaged
