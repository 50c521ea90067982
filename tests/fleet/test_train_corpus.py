"""`provision train` on real public training scripts, run unchanged (issue 22): the corpus in
tests/fleet/train_corpus/ (SOURCE.md: repositories, commits, licences), on rental-like fleet hosts
with real torch (CPU). Only command-line arguments, environment variables and tiny generated data
differ from what their READMEs show. Each script gets the diagnosis it must get: the right
training loader, truthful findings, the cause of a failure.

Also the container limit rentals are known for: a host whose /dev/shm is Docker's default 64 MiB
(the fleet's `smallshm` kind) kills a real DataLoader's workers with "Bus error", and the run is
explained with the fix.

Sizes are the smallest that still exercise each path (a few optimizer steps), and every torch
process gets OMP_NUM_THREADS=1: the cost is torch starting, a few seconds a run on a quiet machine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fleet import Fleet, FleetError, preflight

CORPUS = Path(__file__).resolve().parent / "train_corpus"
SCRIPTS = Path(__file__).resolve().parent / "train_scripts"
FRAMEWORKS = Path(__file__).resolve().parent / "train_frameworks"
PYTHON = "/root/miniconda3/bin/python"  # the conda kind's interpreter (has torch)
REPO = Path(__file__).resolve().parents[2]
ONE_THREAD = ["-e", "OMP_NUM_THREADS=1"]


class CorpusFleet:
    def __init__(self, fleet: Fleet, work: Path) -> None:
        self.fleet = fleet
        self.work = work
        (work / "ssh_config").write_text("")
        self.inventory = fleet.write_inventory(work / "hosts.ini")
        self.rows: list[str] = []  # the closing table: script x (loader, data wait, findings, verdict)

    def train(self, hosts: list[str], code: Path, *args: str, command: list[str],
              timeout: float = 420) -> tuple[int, dict[str, Any], str]:
        argv = [sys.executable, "-m", "provision", "train", *hosts, "-i", str(self.inventory),
                "--ssh-config", str(self.work / "ssh_config"), "--json", "--no-live", "--dir", str(code),
                "--python", PYTHON, "--out", str(self.work / "reports"), *ONE_THREAD, *args, "--", *command]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=self.work, timeout=timeout,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert proc.stdout.strip(), f"no JSON on stdout; stderr:\n{proc.stderr[-4000:]}"
        doc = json.loads(proc.stdout)
        self.rows.extend(_table_rows(code, command, proc.returncode, doc))
        return proc.returncode, doc, proc.stderr

    def frameworks(self) -> Path:
        """A fresh copy of the framework scripts (tests/fleet/train_frameworks) with their local data."""
        dest = self.work / f"code-frameworks-{len(list(self.work.iterdir()))}"
        shutil.copytree(FRAMEWORKS, dest)
        rng = random.Random(0)  # hf_trainer.py's character-level corpus
        words = ["to be", "or not", "the king", "my lord", "what is", "thy name"]
        (dest / "input.txt").write_text(" ".join(rng.choice(words) for _ in range(200)))
        return dest

    def copy(self, name: str) -> Path:
        """A fresh copy of a corpus folder (the tests add data beside the scripts, never into the repo)."""
        dest = self.work / f"code-{name}-{len(list(self.work.iterdir()))}"
        shutil.copytree(CORPUS / name, dest)
        return dest


@pytest.fixture(scope="module")
def cf(tmp_path_factory: pytest.TempPathFactory):
    reason = preflight()
    if reason:
        pytest.skip(f"SSH test fleet unavailable: {reason}")
    try:
        fleet = Fleet(2, kinds=["conda", {"conda", "smallshm"}]).start()
    except FleetError as exc:
        pytest.fail(f"could not start the corpus test fleet: {exc}", pytrace=False)
    corpus = None
    try:
        corpus = CorpusFleet(fleet, tmp_path_factory.mktemp("corpus"))
        yield corpus
    finally:
        fleet.stop()
        report = os.environ.get("TRAIN_CORPUS_REPORT")  # where to write the table (a run by hand)
        if report and corpus is not None:
            Path(report).write_text("\n".join([TABLE_HEAD, *corpus.rows]) + "\n")


TABLE_HEAD = ("| script | host | loader found | steps | data-wait share | findings | advice | verdict |\n"
              "|---|---|---|---|---|---|---|---|")


def _table_rows(code: Path, command: list[str], rc: int, doc: dict[str, Any]) -> list[str]:
    """One Markdown row per host of a run, from the run's own JSON (what a user would read)."""
    project = next((part[5:].rsplit("-", 1)[0] for part in code.parts if part.startswith("code-")), code.name)
    script = project + ": " + next((word for word in command if word.endswith(".py")), " ".join(command))
    rows = []
    for host, entry in sorted(doc.get("runs", {}).items()):
        prof = entry.get("profile") or {}
        try:
            loader = _report(entry)["train"]["summary"].get("loader") or {}
        except (KeyError, OSError, ValueError, TypeError):
            loader = {}
        site = loader.get("site", "")
        found = (f"{'/'.join(site.split('/')[-2:])}, batch {loader.get('batch_size')}, "
                 f"{loader.get('num_workers')} workers" if site else "none")
        wait = prof.get("data_wait_fraction")
        share = f"{100 * wait:.1f} %" if isinstance(wait, (int, float)) else "unknown"
        ids = ", ".join(f["id"] for f in entry.get("findings", [])) or "none"
        advice = next((f["recommendation"] for f in entry.get("findings", [])
                       if f["id"] in ("input_bound", "cuda_unavailable")), "")
        advice = advice.replace("|", "\\|")[:160]
        rows.append(f"| {script} | {host} | {found} | {prof.get('steps')} | {share} | {ids} | {advice} | "
                    f"{entry.get('state')}, exit {entry.get('exit_code')} (command {rc}) |")
    return rows


def _ids(entry: dict[str, Any]) -> list[str]:
    return [f["id"] for f in entry["findings"]]


def _finding(entry: dict[str, Any], fid: str) -> dict[str, Any]:
    found = [f for f in entry["findings"] if f["id"] == fid]
    assert found, f"no {fid} in {json.dumps(entry['findings'], indent=1)[:4000]}"
    return found[0]


def _report(entry: dict[str, Any]) -> dict[str, Any]:
    return json.loads(Path(entry["report"]["json"]).read_text())


def test_mingpt_adder_train_and_eval_loaders_told_apart(cf: CorpusFleet) -> None:
    """minGPT's Trainer builds the training loader (workers, pin_memory, batch 8 here); adder.py's
    eval_split builds an evaluation loader (batch 100) at iteration 0. The profile is the
    training loader's; the eval loader is reported apart; its passes are not epochs."""
    code = cf.copy("minGPT")
    rc, doc, err = cf.train(["gpu1"], code, "-e", "PYTHONPATH=.", command=[
        "python", "projects/adder/adder.py", "--trainer.max_iters=6", "--trainer.num_workers=2",
        "--trainer.batch_size=8", "--data.ndigit=1", "--model.model_type=None", "--model.n_layer=1",
        "--model.n_head=1", "--model.n_embd=16", "--system.work_dir=out"])
    assert rc == 0, err[-4000:]
    entry = doc["runs"]["gpu1"]
    assert entry["state"] == "finished"
    prof = entry["profile"]
    assert prof["num_workers"] == 2 and prof["steps"] == 6, prof
    summary = _report(entry)["train"]["summary"]
    loader = summary["loader"]
    # the `DataLoader(` call spans lines 67-68; Pythons differ in which of them a frame reports
    assert re.search(r"/mingpt/trainer\.py:6[78]$", loader["site"]) and loader["batch_size"] == 8, loader
    assert loader["pin_memory"] is True and loader["dataset"] == "AdditionDataset"
    [ev] = [x for x in summary["loaders"] if x["role"] == "eval"]
    assert ev["site"].endswith("projects/adder/adder.py:151") and ev["batch_size"] == 100
    assert "epoch_slowing" not in _ids(entry)
    for f in entry["findings"]:  # advice never asks for what is already set
        assert "num_workers=2," not in f["recommendation"] and "pin_memory=True" not in f["recommendation"]


def test_mingpt_chargpt_single_loader(cf: CorpusFleet) -> None:
    """minGPT's chargpt: one DataLoader (mingpt/trainer.py: 2 workers here, pin_memory, a
    RandomSampler of 1e10 samples), no evaluation loader. Its callback samples 500 characters
    and saves the model at iteration 0: no loader in that, so nothing but the training loader."""
    code = cf.copy("minGPT")
    rng = random.Random(0)  # chargpt reads input.txt; the callback's prompt "O God, O God!" must be in its vocabulary
    words = ["O God,", "O God!", "to be", "or not", "the king", "my lord", "what is", "thy name"]
    (code / "input.txt").write_text(" ".join(rng.choice(words) for _ in range(300)))
    rc, doc, err = cf.train(["gpu1"], code, "-e", "PYTHONPATH=.", command=[
        "python", "projects/chargpt/chargpt.py", "--trainer.max_iters=6", "--trainer.num_workers=2",
        "--trainer.batch_size=8", "--trainer.device=cpu", "--data.block_size=16",
        "--model.model_type=gpt-nano", "--system.work_dir=out"])
    assert rc == 0, err[-4000:]
    entry = doc["runs"]["gpu1"]
    assert entry["state"] == "finished" and entry["exit_code"] == 0
    prof = entry["profile"]
    assert prof["num_workers"] == 2 and prof["steps"] == 6, prof
    assert prof["data_wait_fraction"] is not None and 0 <= prof["data_wait_fraction"] <= 1, prof
    summary = _report(entry)["train"]["summary"]
    loader = summary["loader"]
    assert re.search(r"/mingpt/trainer\.py:6[78]$", loader["site"]), loader
    assert (loader["batch_size"], loader["num_workers"], loader["pin_memory"]) == (8, 2, True), loader
    assert loader["dataset"] == "CharDataset" and loader["iterable"] is False
    assert loader["dataset_len"] == 2284 - 16, loader  # len(text) - block_size
    assert [x["role"] for x in summary["loaders"]] == ["train"], summary["loaders"]
    assert summary["optimizer_steps"] == 6 and summary["backward_calls"] == 6
    ids = _ids(entry)
    assert not {"epoch_slowing", "failed", "data_wait_unknown", "straggler", "network_bound"} & set(ids), ids
    for f in entry["findings"]:  # advice never asks for what is already set
        assert "num_workers=2," not in f["recommendation"] and "pin_memory=True" not in f["recommendation"], f


def test_llama2c_iterable_dataset_train_and_eval_loaders(cf: CorpusFleet) -> None:
    """llama2.c: PretokDataset is an IterableDataset without __len__, endless; Task.iter_batches
    builds a DataLoader for training and again for each split at each evaluation -- every one at
    the same line (tinystories.py:244). The training loader is told apart from the evaluation
    ones (no step ever followed their batches); steps are the optimizer steps; no length is invented."""
    # its tinystories.py imports these at the top (never called here); the conda hosts' python
    # imports what this one's torch sits beside
    missing = [m for m in ("requests", "sentencepiece", "tqdm") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"llama2.c's tinystories.py imports {', '.join(missing)}: pip install -e '.[test]'")
    code = cf.copy("llama2.c")
    shards = code / "data" / "tok64"  # vocab_source=custom, vocab_size=64: pretokenized uint16 shards
    shards.mkdir(parents=True)
    rng = random.Random(0)
    for n in range(3):  # shard 0 is the val split, the rest train
        (shards / f"data{n:02d}.bin").write_bytes(
            b"".join(rng.randrange(64).to_bytes(2, "little") for _ in range(32 * 12)))
    rc, doc, err = cf.train(["gpu1"], code, command=[
        "python", "train.py", "--vocab_source=custom", "--vocab_size=64", "--device=cpu", "--compile=False",
        "--dtype=float32", "--dim=16", "--n_layers=1", "--n_heads=2", "--n_kv_heads=2", "--multiple_of=16",
        "--max_seq_len=32", "--batch_size=4", "--gradient_accumulation_steps=1", "--eval_interval=2",
        "--eval_iters=2", "--max_iters=4", "--out_dir=out"])
    assert rc == 0, err[-4000:]
    entry = doc["runs"]["gpu1"]
    assert entry["state"] == "finished" and entry["exit_code"] == 0
    prof = entry["profile"]
    # iterations 0..max_iters: 5 optimizer steps, one batch each (no gradient accumulation)
    assert prof["steps"] == 5 and prof["num_workers"] == 0, prof
    summary = _report(entry)["train"]["summary"]
    assert summary["optimizer_steps"] == 5 and summary["backward_calls"] == 5, summary
    loader = summary["loader"]
    assert loader["site"].endswith("/tinystories.py:244") and loader["role"] == "train", loader
    assert (loader["batch_size"], loader["num_workers"], loader["pin_memory"]) == (4, 0, True), loader
    assert loader["dataset"] == "PretokDataset" and loader["iterable"] is True and loader["dataset_len"] is None
    # one iterator, 6 batches: the first (its wait is start-up, not timed) went to the evaluation
    # at iteration 0 before any step; the 5 others each fed a step
    assert (loader["epochs"], loader["batches"], loader["train_batches"]) == (1, 5, 5), loader
    assert prof["data_wait_fraction"] is not None and 0 <= prof["data_wait_fraction"] <= 1, prof
    # evaluations at iterations 0, 2 and 4, each reading eval_iters=2 batches of the train and the
    # val split: 6 loaders made at the same line, one evaluation loader; none fed a step
    [ev] = [x for x in summary["loaders"] if x["role"] == "eval"]
    assert ev["site"] == loader["site"] and ev["iterable"] is True and ev["dataset_len"] is None, ev
    assert (ev["epochs"], ev["batches"], ev["train_batches"]) == (6, 6, 0), ev
    assert len(summary["loaders"]) == 2, summary["loaders"]
    ids = _ids(entry)
    assert not {"epoch_slowing", "failed", "data_wait_unknown", "straggler", "network_bound"} & set(ids), ids
    for f in entry["findings"]:
        assert "pin_memory=True" not in f["recommendation"], f


def test_nanogpt_without_a_dataloader(cf: CorpusFleet) -> None:
    """nanoGPT makes its batches from np.memmap: no DataLoader, so no data-wait share; its
    optimizer steps are counted; no advice about --no-instrument, which was not given."""
    code = cf.copy("nanoGPT")
    data = code / "data" / "tiny"
    data.mkdir(parents=True)
    rng = random.Random(0)
    for split, n in (("train", 4000), ("val", 1000)):  # uint16 tokens, nanoGPT's .bin format
        (data / f"{split}.bin").write_bytes(b"".join(rng.randrange(65).to_bytes(2, "little") for _ in range(n)))
    (data / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 65}))
    rc, doc, err = cf.train(["gpu1"], code, command=[
        "python", "train.py", "--dataset=tiny", "--device=cpu", "--compile=False", "--dtype=float32",
        "--eval_interval=2", "--eval_iters=1", "--log_interval=1", "--block_size=16", "--batch_size=2",
        "--n_layer=1", "--n_head=2", "--n_embd=16", "--max_iters=4", "--lr_decay_iters=4", "--dropout=0.0",
        "--gradient_accumulation_steps=1", "--out_dir=out", "--always_save_checkpoint=False"])
    assert rc == 0, err[-4000:]
    entry = doc["runs"]["gpu1"]
    # iterations 0..max_iters: 5 optimizer steps
    assert entry["profile"]["data_wait_fraction"] is None and entry["profile"]["steps"] == 5, entry["profile"]
    unknown = _finding(entry, "data_wait_unknown")
    assert "never iterated a torch DataLoader (5 optimizer steps" in unknown["evidence"]
    assert "--no-instrument" not in unknown["evidence"] + unknown["recommendation"]
    assert "input_bound" not in _ids(entry)


def test_word_language_model_failing_gets_its_traceback_and_no_invented_cause(cf: CorpusFleet) -> None:
    code = cf.copy("pytorch-examples")
    rc, doc, err = cf.train(["gpu1"], code / "word_language_model", command=[
        "python", "main.py", "--data", "./no-such-corpus", "--epochs", "1"])
    assert rc == 1, err[-4000:]
    entry = doc["runs"]["gpu1"]
    assert entry["state"] == "failed" and entry["exit_code"] == 1
    failed = _finding(entry, "failed")
    assert "data.py" in failed["evidence"] and "AssertionError" in failed["evidence"]
    assert not {"cuda_unavailable", "shm_exhausted", "too_many_open_files", "data_wait_unknown"} & set(_ids(entry))


def test_cuda_only_script_on_a_cpu_host_is_named(cf: CorpusFleet) -> None:
    code = cf.copy("pytorch-examples")
    rc, doc, err = cf.train(["gpu1"], code / "distributed" / "ddp-tutorial-series", command=[
        "python", "single_gpu.py", "2", "1", "--batch_size", "8"])
    assert rc == 1, err[-4000:]
    entry = doc["runs"]["gpu1"]
    cuda = _finding(entry, "cuda_unavailable")
    assert cuda["title"] == "The script needs CUDA but this host has no GPU"
    assert "single_gpu.py:17: self.model = model.to(gpu_id)" in cuda["evidence"], cuda


def test_torchrun_job_cuda_only_on_two_cpu_hosts(cf: CorpusFleet) -> None:
    """pytorch/examples' DDP tutorial under `--distributed` (torchrun on each host): it calls
    torch.cuda.set_device first. Each host is told why; each rank failed on its own, or was
    stopped by provision when the first failed — never a straggler."""
    code = cf.copy("pytorch-examples")
    rc, doc, err = cf.train(["gpu1", "gpu2"], code / "distributed" / "ddp-tutorial-series", "--distributed",
                            "--no-allreduce", command=["python", "multigpu_torchrun.py", "2", "1"])
    assert rc == 1, err[-4000:]
    assert "gpu1: data dir /root/autodl-tmp" in err and "gpu2: data dir /root/autodl-tmp" in err
    assert "(the others:" not in err  # the same layout on both
    ranks = [f for f in doc["distributed"]["findings"] if f["id"] == "rank_failed"]
    assert ranks and "straggler" not in [f["id"] for f in doc["distributed"]["findings"]]
    first = ranks[0]["title"].split("/")[0].split(" ")[0]  # "gpu1/rank0 failed (exit code 1)"
    cuda = _finding(doc["runs"][first], "cuda_unavailable")  # the first to fail: the real cause
    assert "multigpu_torchrun.py:14: torch.cuda.set_device(" in cuda["evidence"], cuda
    stopped = [h for h, e in doc["runs"].items() if e["state"] == "stopped"]
    if stopped:
        assert f"provision stopped the run on {', '.join(sorted(stopped))}" in ranks[0]["evidence"], ranks
    for later in ranks[1:]:  # each other host: on its own (the same error), or its link to the first broke
        assert ("failed on its own" in later["evidence"]
                or "its connection to the failed rank broke" in later["evidence"]), later
    assert not any("the others" in why for why in doc["distributed"]["layout"]["differs"].values())


def test_torchrun_job_without_a_process_group_has_no_multi_host_findings(cf: CorpusFleet) -> None:
    """pytorch/examples' distributed/ddp/example.py exits at once on hosts without 2 GPUs: a
    torchrun job that never made a process group. No straggler, no network_bound."""
    code = cf.copy("pytorch-examples")
    rc, doc, err = cf.train(["gpu1", "gpu2"], code / "distributed" / "ddp", "--distributed", "--no-allreduce",
                            command=["python", "example.py"])
    assert rc == 0, err[-4000:]
    assert {e["state"] for e in doc["runs"].values()} == {"finished"}
    assert "Unable to locate sufficient 2 gpus" in err
    ids = [f["id"] for f in doc["distributed"]["findings"]]
    assert "straggler" not in ids and "network_bound" not in ids


def test_small_dev_shm_kills_the_workers_and_the_fix_is_said(cf: CorpusFleet) -> None:
    """gpu2's /dev/shm is 64 MiB: 2 workers x 2 prefetched 32 MiB batches do not fit. The run
    dies of it (SIGBUS in the worker, or ENOSPC where torch reserves the space first) and both the
    cause and the sizes are said."""
    shm = cf.fleet.host("gpu2")
    assert shm is not None
    rc, doc, err = cf.train(["gpu2"], SCRIPTS, command=["python", "shm.py"])
    assert rc == 1, err[-4000:]
    entry = doc["runs"]["gpu2"]
    bus = _finding(entry, "shm_exhausted")
    # older torch: the worker dies of SIGBUS; newer reserves the space and raises ENOSPC
    assert ("Bus error" in bus["evidence"] or "unable to allocate shared memory(shm)" in bus["evidence"]), bus
    assert "/dev/shm is 64 MiB" in bus["evidence"], bus
    assert "128 MiB; /dev/shm is 64 MiB" in _finding(entry, "shm_too_small")["evidence"]
    assert "--shm-size" in bus["recommendation"] and "set_sharing_strategy('file_system')" in bus["recommendation"]
    # the same job where /dev/shm has room trains
    rc, doc, err = cf.train(["gpu1"], SCRIPTS, command=["python", "shm.py"])
    assert rc == 0, err[-4000:]
    assert "shm_exhausted" not in _ids(doc["runs"]["gpu1"])


# -- frameworks (issue 31): loaders that the HF Trainer, accelerate and Lightning build --------------
# tests/fleet/train_frameworks/: scripts written the way each framework's docs show, run unchanged;
# each sample costs 0.1 s (a slow decode), so the single-process loader is the bottleneck on any host
# and the advice must be that framework's own knob, at the user's line, relative to the project.
SLOW = "0.1"


def _needs(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the framework corpus needs {', '.join(missing)}: pip install -e '.[test]'")


def _user_terms(text: str) -> None:
    assert "/root/autodl-tmp" not in text and "site-packages" not in text, text


def test_hf_trainer_loader_steps_and_its_own_knob(cf: CorpusFleet) -> None:
    """The HF Trainer builds the loader (transformers/trainer.py), accelerate rebuilds it with a
    BatchSampler (DataLoaderShard, one batch ahead): batch 4 from the sampler, 6 steps of
    max_steps=6, and the advice is TrainingArguments' dataloader_num_workers, from hf_trainer.py."""
    _needs("transformers", "accelerate")
    code = cf.frameworks()
    rc, doc, err = cf.train(["gpu1"], code, command=[
        "python", "hf_trainer.py", "--output_dir", "out", "--max_steps", "6", "--per_device_train_batch_size", "4",
        "--report_to", "none", "--save_strategy", "no", "--use_cpu", "--sample_delay", SLOW])
    assert rc == 0, err[-4000:]
    entry = doc["runs"]["gpu1"]
    assert entry["profile"]["steps"] == 6, entry["profile"]
    loader = _report(entry)["train"]["summary"]["loader"]
    assert re.search(r"/accelerate/data_loader\.py:\d+$", loader["site"]), loader
    assert re.search(r"/transformers/trainer\.py:\d+$", loader["origin"] or ""), loader
    assert loader["batch_size"] == 4 and loader["num_workers"] == 0, loader
    bound = _finding(entry, "input_bound")
    assert "TrainingArguments(dataloader_num_workers=" in bound["recommendation"], bound
    assert re.search(r"called from hf_trainer\.py:\d+\)", bound["recommendation"]), bound
    _user_terms(bound["recommendation"])
    assert _finding(entry, "gpu_rules_not_applied")["evidence"].startswith("no GPU here")


def test_accelerate_loop_loader_steps_and_the_line_given_to_prepare(cf: CorpusFleet) -> None:
    """accelerator.prepare() rebuilds the user's two loaders at one line of its own: told apart by
    the user's lines; 2 epochs x 6 batches = 12 steps (read one batch ahead); the advice names the
    DataLoader passed to prepare()."""
    _needs("accelerate")
    code = cf.frameworks()
    rc, doc, err = cf.train(["gpu1"], code, command=[
        "python", "accelerate_loop.py", "--cpu", "--epochs", "2", "--batch-size", "4", "--sample-delay", SLOW])
    assert rc == 0, err[-4000:]
    entry = doc["runs"]["gpu1"]
    assert entry["profile"]["steps"] == 12, entry["profile"]
    summary = _report(entry)["train"]["summary"]
    loader = summary["loader"]
    assert loader["origin"].endswith("/accelerate_loop.py:32") and loader["batch_size"] == 4, loader
    [ev] = [x for x in summary["loaders"] if x["role"] == "eval"]
    assert ev["origin"].endswith("/accelerate_loop.py:33") and ev["batch_size"] == 8, ev
    bound = _finding(entry, "input_bound")
    assert "the DataLoader you pass to accelerator.prepare() (accelerate_loop.py:32)" in bound["recommendation"], bound
    _user_terms(bound["recommendation"])


def test_lightning_datamodule_loader_steps_and_its_knob(cf: CorpusFleet) -> None:
    """Lightning asks the DataModule for its loaders (and wraps DataLoader.__init__ itself): the
    site is the user's train_dataloader() line; its fetcher reads one batch ahead: 12 steps."""
    _needs("lightning")
    code = cf.frameworks()
    rc, doc, err = cf.train(["gpu1"], code, command=[
        "python", "lightning_fit.py", "--accelerator", "cpu", "--epochs", "2", "--sample-delay", SLOW])
    assert rc == 0, err[-4000:]
    entry = doc["runs"]["gpu1"]
    assert entry["profile"]["steps"] == 12, entry["profile"]
    summary = _report(entry)["train"]["summary"]
    assert summary["loader"]["site"].endswith("/lightning_fit.py:31"), summary["loader"]
    [ev] = [x for x in summary["loaders"] if x["role"] == "eval"]
    assert ev["site"].endswith("/lightning_fit.py:34") and ev["batch_size"] == 8, ev
    bound = _finding(entry, "input_bound")
    assert "LightningDataModule" in bound["recommendation"] and "(lightning_fit.py:31;" in bound["recommendation"]
    _user_terms(bound["recommendation"])
    assert "sitecustomize" not in err  # Lightning's warnings name Lightning's lines, not provision's


def test_lightning_asked_for_a_gpu_on_a_cpu_host(cf: CorpusFleet) -> None:
    """`Trainer(accelerator='gpu')` on a host without one: Lightning's own MisconfigurationException
    (no torch CUDA message in it) is cuda_unavailable, at the user's line, with Lightning's knob."""
    _needs("lightning")
    code = cf.frameworks()
    rc, doc, err = cf.train(["gpu1"], code, command=["python", "lightning_fit.py", "--accelerator", "gpu"])
    assert rc == 1, err[-4000:]
    cuda = _finding(doc["runs"]["gpu1"], "cuda_unavailable")
    assert re.search(r"the call at lightning_fit\.py:\d+: trainer = L\.Trainer\(", cuda["evidence"]), cuda
    assert "Trainer(accelerator='cpu')" in cuda["recommendation"], cuda
    _user_terms(cuda["evidence"] + cuda["recommendation"])
