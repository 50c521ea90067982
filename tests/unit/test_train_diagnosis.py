"""The findings of a run from its profile: each rule fires on the evidence it names, stays quiet
without it, and says what to change. Profiles are what provision/agent/train/summary.py returns."""

from __future__ import annotations

from typing import Any

import pytest

from provision.report.document import validate
from provision.train.diagnosis import diagnose_run, suggest_num_workers
from provision.train.report import PROFILE_KEYS, build_document, profile, run_entry


def summary(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "run": {"run_id": "r1", "state": "finished", "exit_code": 0, "seconds": 60.0, "workdir": "/w",
                "log": "/w/output.log", "instrument": True, "command": ["python", "t.py"]},
        "instrumented": True, "steps": 500, "data_wait_fraction": 0.05, "wait_s": 1.0, "step_s": 19.0,
        "loader": {"num_workers": 4, "batch_size": 32, "pin_memory": True},
        "cpu": {"busy_pct_mean": 50.0, "iowait_pct_mean": 0.0, "cores_workers_mean": 1.0, "cpus": 16},
        "gpu": {"source": None, "reason": "no NVIDIA GPU", "per_gpu": []},
        "io": {"dataset_paths": [], "network_open_share": {}, "nfs_read_mb_s_mean": {}},
        "amp": None, "device": "cpu", "epochs": [], "epoch_source": "instrumentation", "tail": [],
    }
    base.update(over)
    return base


def gpu(util: float, used: int = 70000, total: int = 81559, throttle: dict[str, int] | None = None) -> dict[str, Any]:
    return {"gpu": {"source": "nvml", "reason": None, "per_gpu": [{
        "index": 0, "samples": 100, "util_pct_mean": util, "memory_used_mb_max": used,
        "memory_total_mb": total, "throttle_reasons": throttle or {}}]}, "device": "cuda"}


FACTS_16 = {"cpu": {"usable_cpus": 16}}
FACTS_H100 = {"cpu": {"usable_cpus": 16}, "gpus": [{"compute_capability": "9.0"}]}


def ids(findings) -> list[str]:
    return [f.id for f in findings]


def test_starved_loader_is_input_bound_with_workers_from_the_cores() -> None:
    s = summary(data_wait_fraction=0.8, wait_s=40.0, step_s=10.0, loader={"num_workers": 0, "batch_size": 32})
    [found] = [f for f in diagnose_run(s, FACTS_16) if f.id == "input_bound"]
    assert found.severity == "critical" and "80%" in found.evidence and "num_workers=0" in found.evidence
    assert "num_workers=15" in found.recommendation


def test_workers_advice_prefers_the_bench_curve() -> None:
    bench = {"bench": {"dataloader": {"primary": "d", "sources": [{"source": {"name": "d"}, "settings": [
        {"num_workers": 0, "samples_per_s": 100.0}, {"num_workers": 6, "samples_per_s": 900.0},
        {"num_workers": 12, "samples_per_s": 700.0}]}]}}}
    s = summary(data_wait_fraction=0.4, loader={"num_workers": 2})
    [found] = [f for f in diagnose_run(s, FACTS_16, bench) if f.id == "input_bound"]
    assert found.severity == "warn" and "num_workers=6" in found.recommendation
    assert "curve" in found.recommendation


def test_enough_workers_already_says_make_samples_cheaper() -> None:
    s = summary(data_wait_fraction=0.6, loader={"num_workers": 15})
    [found] = [f for f in diagnose_run(s, FACTS_16) if f.id == "input_bound"]
    assert "more workers will not help" in found.recommendation


@pytest.mark.parametrize("share", [None, 0.0, 0.29])
def test_not_input_bound_below_the_threshold(share: float | None) -> None:
    assert "input_bound" not in ids(diagnose_run(summary(data_wait_fraction=share), FACTS_16))


def test_suggest_num_workers_from_cores() -> None:
    assert suggest_num_workers(2, 0, 0)[0] == 2  # at least 2
    assert suggest_num_workers(32, 4, 0)[0] == 7  # (32 - 4) / 4 per GPU process


def test_network_dataset_is_io_bound_and_says_stage() -> None:
    io = {"dataset_paths": [{"path": "/mnt/nfs/imgs", "mountpoint": "/mnt/nfs", "fs_type": "nfs4", "network": True}],
          "network_open_share": {}, "nfs_read_mb_s_mean": {"/mnt/nfs": 12.0}}
    found = diagnose_run(summary(io=io, data_wait_fraction=0.7), {"data_dir": {"path": "/root/autodl-tmp"}},
                         host="gpu1")
    [io_bound] = [f for f in found if f.id == "io_bound"]
    assert "/mnt/nfs/imgs" in io_bound.evidence and "nfs4" in io_bound.evidence
    assert "provision stage host:/mnt/nfs/imgs gpu1 --name imgs" in io_bound.recommendation
    assert "/root/autodl-tmp/datasets/imgs.lmdb" in io_bound.recommendation


def test_network_reads_that_keep_up_are_not_io_bound() -> None:
    io = {"dataset_paths": [], "network_open_share": {"/mnt/nfs (nfs4)": 1.0}, "nfs_read_mb_s_mean": {}}
    assert "io_bound" not in ids(diagnose_run(summary(io=io, data_wait_fraction=0.02), {}))


def test_cpu_host_says_why_gpu_rules_do_not_apply() -> None:
    found = diagnose_run(summary(), FACTS_16)
    [note] = [f for f in found if f.id == "gpu_rules_not_applied"]
    assert note.severity == "info" and "no NVIDIA GPU" in note.evidence
    for rule in ("gpu_idle", "no_amp", "throttling", "memory_headroom"):
        assert rule in note.evidence
        assert rule not in ids(found)


def test_gpu_rules() -> None:
    assert "gpu_idle" in ids(diagnose_run(summary(**gpu(3.0)), FACTS_H100))
    assert "gpu_underused" in ids(diagnose_run(summary(**gpu(40.0)), FACTS_H100))
    busy = diagnose_run(summary(**gpu(95.0)), FACTS_H100)
    assert not {"gpu_idle", "gpu_underused", "gpu_rules_not_applied"} & set(ids(busy))
    [amp] = [f for f in busy if f.id == "no_amp"]
    assert "bfloat16" in amp.recommendation
    with_amp = diagnose_run(summary(**gpu(95.0), amp={"dtype": "bfloat16"}), FACTS_H100)
    assert "no_amp" not in ids(with_amp)
    bench = {"bench": {"amp": {"speedup": 2.1, "best_dtype": "bf16"}}}
    [amp] = [f for f in diagnose_run(summary(**gpu(95.0)), FACTS_H100, bench) if f.id == "no_amp"]
    assert "2.10x" in amp.evidence
    hot = diagnose_run(summary(**gpu(95.0, throttle={"hw_thermal_slowdown": 30})), FACTS_H100)
    assert "throttling" in ids(hot)
    room = [f for f in diagnose_run(summary(**gpu(95.0, used=20000)), FACTS_H100) if f.id == "memory_headroom"]
    assert room and "batch_size=32" in room[0].recommendation


def test_epoch_slowing() -> None:
    slow = [{"epoch": i, "seconds": t} for i, t in enumerate([10, 10.5, 11, 13, 15, 16], 1)]
    assert "epoch_slowing" in ids(diagnose_run(summary(epochs=slow), FACTS_16))
    steady = [{"epoch": i, "seconds": 10 + (i % 2) * 0.3} for i in range(1, 7)]
    assert "epoch_slowing" not in ids(diagnose_run(summary(epochs=steady), FACTS_16))


def test_failed_run_shows_exit_code_and_last_lines() -> None:
    s = summary(run={"run_id": "r", "state": "failed", "exit_code": 3, "log": "/l"},
                tail=[f"line {i}" for i in range(30)] + ["Traceback: boom"])
    [found] = [f for f in diagnose_run(s, FACTS_16) if f.id == "failed"]
    assert found.severity == "critical" and "exit code 3" in found.title
    assert "Traceback: boom" in found.evidence and "line 29" in found.evidence and "line 5" not in found.evidence


def test_json_entry_and_report_document_shapes() -> None:
    s = summary(amp={"dtype": "bfloat16"})
    findings = diagnose_run(s, FACTS_16)
    entry = run_entry(s["run"], s, findings, None)
    assert set(entry) == {"run_id", "state", "exit_code", "seconds", "workdir", "log", "profile", "findings", "report"}
    assert tuple(entry["profile"]) == PROFILE_KEYS
    assert entry["profile"]["amp"] == "bfloat16"
    assert profile(summary(instrumented=False))["amp"] is None
    assert profile(summary())["amp"] is False
    doc = build_document("gpu1", s["run"], s, findings, FACTS_16)
    validate(doc)
    assert doc["train"]["profile"] == entry["profile"]


# -- issue 22: the training loader, settings already in effect, why a run died ----------------------

TRAIN_LOADER = {"site": "/w/main.py:88", "num_workers": 2, "batch_size": 32, "pin_memory": True,
                "persistent_workers": True, "prefetch_factor": 2, "role": "train", "batch_bytes": 400_000}
EVAL_LOADER = {"site": "/w/main.py:91", "num_workers": 0, "batch_size": 100, "pin_memory": False,
               "persistent_workers": False, "role": "eval"}


def test_input_bound_advice_names_only_settings_not_in_effect_and_the_eval_loader_apart() -> None:
    s = summary(data_wait_fraction=0.6, loader=TRAIN_LOADER, loaders=[TRAIN_LOADER, EVAL_LOADER])
    [found] = [f for f in diagnose_run(s, FACTS_H100 | {"gpus": [{"compute_capability": "9.0"}]}) if f.id == "input_bound"]
    assert "num_workers=2" in found.evidence and "the training loader is main.py:88" in found.evidence
    assert "evaluation loader(s) at main.py:91" in found.evidence  # relative to the project (issue 31)
    assert "num_workers=15" in found.recommendation and "(main.py:88)" in found.recommendation
    assert "pin_memory" not in found.recommendation and "persistent_workers" not in found.recommendation
    bare = dict(TRAIN_LOADER, pin_memory=False, persistent_workers=False)
    [found] = [f for f in diagnose_run(summary(data_wait_fraction=0.6, loader=bare), FACTS_16) if f.id == "input_bound"]
    assert "persistent_workers=True" in found.recommendation
    assert "pin_memory" not in found.recommendation  # a CPU host: pinning feeds no GPU


def test_epochs_of_zero_seconds_are_not_slowing() -> None:
    evals = [{"epoch": i, "seconds": t} for i, t in enumerate([0.01, 0.02, 0.03, 0.05, 0.06, 0.08], 1)]
    assert "epoch_slowing" not in ids(diagnose_run(summary(epochs=evals), FACTS_16))


def test_data_wait_unknown_mentions_no_instrument_only_when_it_was_given() -> None:
    [off] = [f for f in diagnose_run(summary(data_wait_fraction=None, run={"state": "finished", "instrument": False}),
                                     FACTS_16) if f.id == "data_wait_unknown"]
    assert "--no-instrument" in off.evidence and "without --no-instrument" in off.recommendation
    [plain] = [f for f in diagnose_run(summary(data_wait_fraction=None, optimizer_steps=50), FACTS_16)
               if f.id == "data_wait_unknown"]
    assert "--no-instrument" not in plain.evidence + plain.recommendation
    assert "never iterated a torch DataLoader (50 optimizer steps" in plain.evidence


def failed(tail: list[str], **over: Any) -> dict[str, Any]:
    return summary(run={"run_id": "r", "state": "failed", "exit_code": 1, "log": "/l", "instrument": True},
                   failure_lines=tail, **over)


CUDA_TRACE = [
    "Traceback (most recent call last):",
    '  File "/w/runs/r/code/multigpu_torchrun.py", line 108, in <module>',
    "    main(args.save_every, args.total_epochs, args.batch_size)",
    '  File "/w/runs/r/code/multigpu_torchrun.py", line 95, in main',
    "    ddp_setup()",
    '  File "/w/runs/r/code/multigpu_torchrun.py", line 14, in ddp_setup',
    '    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))',
    '  File "/opt/conda/lib/python3.11/site-packages/torch/cuda/__init__.py", line 567, in set_device',
    "    torch._C._cuda_setDevice(device)",
    "AssertionError: Torch not compiled with CUDA enabled",
]


def test_a_cuda_only_call_on_a_cpu_host_is_named_as_the_cause() -> None:
    found = diagnose_run(failed([f"[rank0]:{line}" for line in CUDA_TRACE]), FACTS_16)
    [cuda] = [f for f in found if f.id == "cuda_unavailable"]
    assert cuda.title == "The script needs CUDA but this host has no GPU"
    assert "multigpu_torchrun.py:14: torch.cuda.set_device(" in cuda.evidence
    assert "Torch not compiled with CUDA enabled" in cuda.evidence
    assert "torch.cuda.is_available()" in cuda.recommendation
    assert "cuda_unavailable" not in ids(diagnose_run(failed(["ValueError: bad"]), FACTS_16))
    newer = CUDA_TRACE[:-1] + ["RuntimeError: Cannot access accelerator device when none is available."]
    assert "cuda_unavailable" in ids(diagnose_run(failed(newer), FACTS_16))  # torch 2.9+
    cpu_build = CUDA_TRACE[:-1] + ["AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'"]
    [cuda] = [f for f in diagnose_run(failed(cpu_build), FACTS_16) if f.id == "cuda_unavailable"]
    assert "multigpu_torchrun.py:14: torch.cuda.set_device(" in cuda.evidence  # a CPU-only torch build


def test_bus_error_and_too_many_open_files_are_explained_with_the_fix() -> None:
    bus = failed(["RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible "
                  "that dataloader's workers are out of shared memory."],
                 shm={"path": "/dev/shm", "size_bytes": 64 << 20, "free_bytes": 1 << 20})
    [f] = [f for f in diagnose_run(bus, FACTS_16) if f.id == "shm_exhausted"]
    assert "pid 4242" in f.evidence and "/dev/shm is 64 MiB" in f.evidence
    assert "--shm-size" in f.recommendation and "set_sharing_strategy('file_system')" in f.recommendation
    newer = failed(["RuntimeError: unable to allocate shared memory(shm) for file </torch_22646_3790617201_0>: "
                    "No space left on device (28)"])
    assert "shm_exhausted" in ids(diagnose_run(newer, FACTS_16))  # torch 2.x reserves the space: no SIGBUS
    files = failed(["OSError: [Errno 24] Too many open files"])
    [f] = [f for f in diagnose_run(files, {"memory": {"open_files": {"soft": 1024, "hard": 4096}}})
           if f.id == "too_many_open_files"]
    assert "ulimit -n): 1024" in f.evidence and "ulimit -n 65536" in f.recommendation


def test_loader_whose_batches_in_flight_do_not_fit_in_dev_shm() -> None:
    big = dict(TRAIN_LOADER, num_workers=8, batch_bytes=8 << 20)  # 8 x 2 x 8 MiB = 128 MiB
    s = summary(loader=big, loaders=[big], shm={"path": "/dev/shm", "size_bytes": 64 << 20, "free_bytes": 64 << 20})
    [f] = [f for f in diagnose_run(s, FACTS_16) if f.id == "shm_too_small"]
    assert f.severity == "warn" and "num_workers=8 x prefetch_factor=2 x 8 MiB per batch = 128 MiB" in f.evidence
    roomy = summary(loader=big, loaders=[big], shm={"path": "/dev/shm", "size_bytes": 8 << 30, "free_bytes": 8 << 30})
    assert "shm_too_small" not in ids(diagnose_run(roomy, FACTS_16))


def test_report_lists_each_loader_with_its_role() -> None:
    from provision.train.render import render_html, render_markdown

    train = dict(TRAIN_LOADER, dataset="Slow", dataset_len=640, epochs=3, batches=57, train_batches=60,
                 wait_s=3.0, step_s=1.0)
    ev = dict(EVAL_LOADER, dataset="Stream", iterable=True, dataset_len=None, epochs=3, batches=9, train_batches=0)
    s = summary(loader=train, loaders=[train, ev])
    doc = build_document("gpu1", s["run"], s, diagnose_run(s, FACTS_16), FACTS_16)
    md = render_markdown([doc])
    # sites relative to the shipped project (workdir /w; issue 31)
    assert "| train | main.py:88 | 32 | 2 | True | True | Slow | 640 | 3 | 57 | 60 | 75% |" in md
    assert "| eval | main.py:91 | 100 | 0 | False | False | Stream (iterable) | — | 3 | 9 | 0 | — |" in md
    assert "| training loader | main.py:88 |" in md
    assert "<th>created at</th>" in render_html([doc])


RUN_CODE = "/root/autodl-tmp/runs/20250101-120000-ab12/code"
TIMM_TRACE = [
    "Traceback (most recent call last):",
    f'  File "{RUN_CODE}/train.py", line 1239, in <module>',
    "    main()",
    f'  File "{RUN_CODE}/train.py", line 452, in main',
    "    device = utils.init_distributed_device(args)",
    '  File "/opt/conda/lib/python3.11/site-packages/timm/utils/distributed.py", line 90, in init_distributed_device',
    "    result = init_distributed_device_so(",
    '  File "/opt/conda/lib/python3.11/site-packages/timm/utils/distributed.py", line 162, in init_distributed_device_so',
    "    assert torch.cuda.is_available(), f'CUDA is not available but {device} was specified.'",
    "AssertionError: CUDA is not available but cuda was specified.",
]


def test_a_cuda_failure_is_known_by_what_happened_not_by_its_message() -> None:
    """Issue 31: timm's own assert on a host without a GPU is cuda_unavailable, named by the
    user's line (relative to the shipped project) and timm's flag; the same words on a GPU host
    (a real CUDA error there) or an unrelated failure on a CPU host are not."""
    run = {"run_id": "r", "state": "failed", "exit_code": 1, "log": "/l", "workdir": RUN_CODE}
    s = summary(run=run, failure_lines=TIMM_TRACE)
    [cuda] = [f for f in diagnose_run(s, FACTS_16) if f.id == "cuda_unavailable"]
    assert "the call at train.py:452: device = utils.init_distributed_device(args)" in cuda.evidence, cuda
    assert "CUDA is not available but cuda was specified." in cuda.evidence and "/root/autodl-tmp" not in cuda.evidence
    assert "timm" in cuda.recommendation and "--device cpu" in cuda.recommendation
    hf = [line.replace("timm/utils/distributed.py", "transformers/training_args.py") for line in TIMM_TRACE]
    [cuda] = [f for f in diagnose_run(summary(run=run, failure_lines=hf), FACTS_16) if f.id == "cuda_unavailable"]
    assert "use_cpu=True" in cuda.recommendation
    lightning = [  # Trainer(accelerator="gpu") under a CPU-only torch: no "CUDA" anywhere in it
        "Traceback (most recent call last):",
        f'  File "{RUN_CODE}/fit.py", line 60, in main',
        "    trainer = L.Trainer(accelerator=args.accelerator, devices=1)",
        f'  File "{SITE_PACKAGES}/lightning/pytorch/trainer/connectors/accelerator_connector.py", line 341, '
        "in _choose_gpu_accelerator_backend",
        '    raise MisconfigurationException("No supported gpu backend found!")',
        "lightning.fabric.utilities.exceptions.MisconfigurationException: No supported gpu backend found!"]
    [cuda] = [f for f in diagnose_run(summary(run=run, failure_lines=lightning), FACTS_16)
              if f.id == "cuda_unavailable"]
    assert "fit.py:60: trainer = L.Trainer(" in cuda.evidence and "Trainer(accelerator='cpu')" in cuda.recommendation
    oom = TIMM_TRACE[:-1] + ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    assert "cuda_unavailable" not in ids(diagnose_run(summary(run=run, failure_lines=oom), FACTS_H100))
    other = TIMM_TRACE[:5] + ["KeyError: 'label'"]
    assert "cuda_unavailable" not in ids(diagnose_run(summary(run=run, failure_lines=other), FACTS_16))


def _advice(loader: dict[str, Any]) -> str:
    s = summary(data_wait_fraction=0.8, wait_s=40.0, step_s=10.0, loader=loader,
                run={"run_id": "r", "state": "finished", "exit_code": 0, "workdir": RUN_CODE})
    [found] = [f for f in diagnose_run(s, FACTS_16) if f.id == "input_bound"]
    return found.recommendation


SITE_PACKAGES = "/opt/conda/lib/python3.11/site-packages"


def test_advice_names_the_loader_relative_to_the_project_and_a_frameworks_own_knob() -> None:
    """Issue 31: `main.py:269`, not the host's run copy; for a loader a known framework built,
    that framework's knob, never a site-packages file."""
    plain = _advice({"num_workers": 0, "site": f"{RUN_CODE}/main.py:269", "persistent_workers": False})
    assert "the training loader (main.py:269): DataLoader(num_workers=15, persistent_workers=True" in plain, plain
    assert "/root/autodl-tmp" not in plain
    timm = _advice({"num_workers": 1, "site": f"{SITE_PACKAGES}/timm/data/loader.py:385",
                    "frames": [f"{SITE_PACKAGES}/timm/data/loader.py:402", f"{RUN_CODE}/train.py:771",
                               f"{RUN_CODE}/train.py:1239"]})
    assert "`-j 15` / `--workers 15`" in timm and "train.py:771" in timm, timm
    assert "site-packages" not in timm
    hf = _advice({"num_workers": 0, "site": f"{SITE_PACKAGES}/accelerate/data_loader.py:1170",
                  "origin": f"{SITE_PACKAGES}/transformers/trainer.py:1050", "persistent_workers": False,
                  "frames": [f"{SITE_PACKAGES}/accelerate/accelerator.py:1500",
                             f"{SITE_PACKAGES}/transformers/trainer.py:2300", f"{RUN_CODE}/run_clm.py:650"]})
    assert "TrainingArguments(dataloader_num_workers=15)" in hf and "run_clm.py:650" in hf, hf
    assert "dataloader_persistent_workers=True" in hf and "site-packages" not in hf
    acc = _advice({"num_workers": 0, "site": f"{SITE_PACKAGES}/accelerate/data_loader.py:1170",
                   "origin": f"{RUN_CODE}/nlp_example.py:115",
                   "frames": [f"{SITE_PACKAGES}/accelerate/accelerator.py:1500", f"{RUN_CODE}/nlp_example.py:140"]})
    assert "accelerator.prepare() (nlp_example.py:115)" in acc, acc
    pl = _advice({"num_workers": 0, "site": f"{RUN_CODE}/model.py:40",
                  "frames": [f"{SITE_PACKAGES}/lightning/pytorch/core/hooks.py:10", f"{RUN_CODE}/fit.py:9"]})
    assert "LightningDataModule" in pl and "model.py:40" in pl, pl
    tv = _advice({"num_workers": 4, "site": f"{RUN_CODE}/references/classification/train.py:230"})
    assert "`-j 15`" in tv and "references/classification/train.py:230" in tv, tv


def test_cores_of_the_workers_are_averaged_over_the_time_they_existed(tmp_path) -> None:
    """Issue 31: 9 samples before the loader started its one worker, one after: the worker used
    a whole core, not 0.1 of one."""
    import json

    from provision.agent.train.summary import summarize

    rows = [{"t": i, "cpu": 50.0, "cores_main": 1.0, "cores_workers": 0.0, "procs": 1} for i in range(9)]
    rows.append({"t": 9, "cpu": 100.0, "cores_main": 0.1, "cores_workers": 1.0, "procs": 2})
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "state.json").write_text(json.dumps({"run_id": "r", "state": "finished"}))
    assert summarize(str(tmp_path))["cpu"]["cores_workers_mean"] == 1.0


def test_a_host_without_an_nvidia_driver_says_no_gpu_here(monkeypatch) -> None:
    """Issue 31: on a GPU-less host the reason is that, not a missing pynvml."""
    import os

    from provision.agent.train import gpu

    real = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda p: False if "nvidia" in str(p) else real(p))
    reason = gpu.no_gpu_reason("pynvml (nvidia-ml-py) is not installed")
    assert reason.startswith("no GPU here") and "pynvml" not in reason
    monkeypatch.setattr(os.path, "exists", lambda p: True if p == "/dev/nvidiactl" else real(p))
    assert "pynvml (nvidia-ml-py) is not installed" in gpu.no_gpu_reason("pynvml (nvidia-ml-py) is not installed")
