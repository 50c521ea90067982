"""The sitecustomize instrumentation with real torch, without touching the training script:
DataLoader wait vs step time, the loader's settings, autocast/GradScaler use; and that a
sitecustomize it shadows still runs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from provision.agent.train.summary import instrumentation

INSTRUMENT_DIR = Path(__file__).resolve().parents[2] / "provision" / "agent" / "train" / "instrument"


def _run(tmp_path: Path, script: str, extra_path: list[str] | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "instrument.jsonl"
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    env = dict(os.environ, PROVISION_TRAIN_INSTRUMENT=str(out),
               PYTHONPATH=os.pathsep.join([str(INSTRUMENT_DIR), *(extra_path or [])]))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, out


def test_starved_loader_amp_and_scaler_are_seen(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    data_dir = tmp_path / "samples"
    data_dir.mkdir()
    (data_dir / "a.bin").write_bytes(b"x")
    proc, out = _run(tmp_path, f"""
        import time, torch
        from torch.utils.data import DataLoader, Dataset

        class Slow(Dataset):
            def __init__(self):
                self.root = {str(data_dir)!r}
            def __len__(self):
                return 48
            def __getitem__(self, i):
                time.sleep(0.02)
                return torch.randn(8), 1

        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu")
        for epoch in range(2):
            for x, y in DataLoader(Slow(), batch_size=4, num_workers=0, pin_memory=False):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = model(x).float().sum()
                opt.zero_grad(); loss.backward(); opt.step()
        print("trained")
    """)
    assert proc.stdout.strip() == "trained"  # the job's own output is untouched
    inst = instrumentation(str(out))
    assert inst["present"] and inst["batches"] == 24  # 2 epochs x 12 batches, each fed a backward
    assert inst["data_wait_fraction"] > 0.5
    [first] = inst["loaders"]  # rebuilt each epoch at the same line: one loader, two epochs
    assert first["num_workers"] == 0 and first["batch_size"] == 4 and first["pin_memory"] is False
    assert first["dataset"] == "Slow" and first["paths"] == [str(data_dir)]
    assert first["epochs"] == 2 and first["role"] == "train" and first["site"].endswith("job.py:18")
    assert inst["amp"] == {"device_type": "cpu", "dtype": "bfloat16"}
    assert inst["scaler"] is True and inst["device"] == "cpu"
    assert [e["batches"] for e in inst["epochs"]] == [12, 12]


def test_a_shadowed_sitecustomize_still_runs_and_no_torch_is_fine(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITE = True\n")
    proc, out = _run(tmp_path, "import builtins\nprint(getattr(builtins, 'OTHER_SITE', False))\n", [str(other)])
    assert proc.stdout.strip() == "True"
    inst = instrumentation(str(out))
    assert inst["present"] and inst["batches"] is None and inst["data_wait_fraction"] is None


TRAIN_AND_EVAL = """
    import time, torch
    from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset

    class Slow(Dataset):
        def __len__(self):
            return 64
        def __getitem__(self, i):
            time.sleep(0.01)
            return torch.randn(8), 1

    class Stream(IterableDataset):
        def __iter__(self):
            for i in range(100):
                yield torch.randn(8), 0

    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train = DataLoader(Slow(), batch_size=8, num_workers=2, pin_memory=True, persistent_workers=True)
    evaluate = DataLoader(Stream(), batch_size=25)
    for epoch in range(3):
        for x, y in train:
            loss = model(x).sum()
            opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            for x, y in evaluate:
                model(x)
    print("done")
"""


def test_train_and_eval_loaders_are_told_apart(tmp_path: Path) -> None:
    """The eval loader (made last, iterated last) must not become the profile: the training
    loader is the one whose batches fed backward/optimizer steps."""
    pytest.importorskip("torch")
    proc, out = _run(tmp_path, TRAIN_AND_EVAL)
    assert proc.stdout.strip() == "done"
    inst = instrumentation(str(out))
    by_role = {r["role"]: r for r in inst["loaders"]}
    assert len(inst["loaders"]) == 2 and set(by_role) == {"train", "eval"}
    train, ev = by_role["train"], by_role["eval"]
    lines = textwrap.dedent(TRAIN_AND_EVAL).splitlines()
    made = [n for n, line in enumerate(lines, 1) if "= DataLoader(" in line]
    assert train["site"].endswith(f"job.py:{made[0]}") and ev["site"].endswith(f"job.py:{made[1]}")
    assert (train["batch_size"], train["num_workers"], train["pin_memory"], train["persistent_workers"]) == (8, 2, True, True)
    assert train["dataset"] == "Slow" and train["dataset_len"] == 64 and train["iterable"] is False
    assert train["epochs"] == 3 and train["train_batches"] == 24  # persistent workers: 3 epochs still
    assert ev["batch_size"] == 25 and ev["iterable"] is True and ev["dataset_len"] is None
    assert ev["train_batches"] == 0 and ev["epochs"] == 3
    assert ev["batch_bytes"] == 25 * 8 * 4 + 25 * 8  # float32 x and int64 y of the first batch
    assert inst["train_loader"]["site"] == train["site"]
    assert inst["batches"] == 24 and inst["opt_steps"] == 24 and inst["backward"] == 24
    assert [e["batches"] for e in inst["epochs"]] == [8, 8, 8]  # the training loader's epochs only
    assert inst["dist"] is None and inst["collectives"] == 0


# One function makes every loader (llama2.c's Task.iter_batches): the training iterator stays
# open while each evaluation makes two more at the same line and reads 3 batches of each.
ONE_SITE = """
    import time, torch
    from torch.utils.data import DataLoader, IterableDataset

    class Stream(IterableDataset):  # endless, no __len__
        opened = 0
        def __init__(self, split):
            self.split = split
        def __iter__(self):
            Stream.opened += 1
            if Stream.opened == 1:  # the training loader's first batch is slow (start-up)
                time.sleep(0.2)
            while True:
                yield torch.randn(8), 1

    def batches(split):
        for x, y in DataLoader(Stream(split), batch_size=4, pin_memory=True):
            yield x, y

    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def evaluate():
        with torch.no_grad():
            for split in ("train", "val"):
                it = batches(split)
                for _ in range(3):
                    model(next(it)[0])

    train = batches("train")
    x, y = next(train)
    for step in range(6):
        if step % 2 == 0:
            evaluate()
        loss = model(x).sum()
        x, y = next(train)  # prefetched before backward, as llama2.c does
        opt.zero_grad(); loss.backward(); opt.step()
    print("done")
"""


def test_loaders_made_at_one_line_for_training_and_evaluation_are_told_apart(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    proc, out = _run(tmp_path, ONE_SITE)
    assert proc.stdout.strip() == "done"
    inst = instrumentation(str(out))
    by_role = {r["role"]: r for r in inst["loaders"]}
    assert len(inst["loaders"]) == 2 and set(by_role) == {"train", "eval"}, inst["loaders"]
    train, ev = by_role["train"], by_role["eval"]
    made = [n for n, line in enumerate(textwrap.dedent(ONE_SITE).splitlines(), 1) if "DataLoader(Stream" in line]
    assert train["site"] == ev["site"] and train["site"].endswith(f"job.py:{made[0]}")
    assert train["dataset"] == "Stream" and train["iterable"] is True and train["dataset_len"] is None
    # the training iterator: one epoch, 7 batches (the first one's wait is start-up, not timed)
    assert (train["epochs"], train["train_batches"], train["batches"]) == (1, 6, 6), train
    # 3 evaluations x 2 splits, 3 batches each (2 timed): none fed a step
    assert (ev["epochs"], ev["train_batches"], ev["batches"]) == (6, 0, 12), ev
    assert inst["train_loader"] is train and inst["batches"] == 6 and inst["opt_steps"] == 6
    # each loader's own first batch: the training one's start-up is not the evaluation one's
    assert inst["first_batch_wait_s"] == train["first_batch_wait_s"] >= 0.2 > ev["first_batch_wait_s"], inst["loaders"]
