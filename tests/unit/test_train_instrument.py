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


def test_batch_size_from_the_batch_sampler_or_the_iterable_dataset(tmp_path: Path) -> None:
    """Issue 31: accelerate and the HF Trainer hand the DataLoader a BatchSampler (its own
    batch_size is None); an iterable dataset may batch itself (batch_size=None on the loader)."""
    pytest.importorskip("torch")
    proc, out = _run(tmp_path, """
        import torch
        from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, TensorDataset

        class Shard(BatchSampler):  # a sampler wrapping the user's one, as accelerate's BatchSamplerShard does
            def __init__(self, inner):
                self.batch_sampler = inner
            def __iter__(self):
                return iter(self.batch_sampler)
            def __len__(self):
                return len(self.batch_sampler)

        class Batches(IterableDataset):  # yields whole batches of 5, says nothing about it
            def __iter__(self):
                for _ in range(4):
                    yield torch.randn(5, 8)

        class Sized(IterableDataset):  # batches itself and says so
            batch_size = 3
            def __iter__(self):
                for _ in range(4):
                    yield torch.randn(3, 8)

        data = TensorDataset(torch.randn(40, 8))
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for loader in (DataLoader(data, batch_sampler=BatchSampler(RandomSampler(data), 4, False)),
                       DataLoader(data, batch_sampler=Shard(BatchSampler(RandomSampler(data), 6, False))),
                       DataLoader(Batches(), batch_size=None),
                       DataLoader(Sized(), batch_size=None)):
            for batch in loader:
                x = batch[0] if isinstance(batch, (list, tuple)) else batch
                opt.zero_grad(); model(x).sum().backward(); opt.step()
        print("done")
    """)
    assert proc.stdout.strip() == "done"
    inst = instrumentation(str(out))
    sizes = [r["batch_size"] for r in sorted(inst["loaders"], key=lambda r: r["site"])]
    assert sizes == [4, 6, 5, 3], inst["loaders"]
    assert [r["batch_size_from"] for r in sorted(inst["loaders"], key=lambda r: r["site"])] == [
        "loader", "loader", "first batch", "loader"]


PREFETCH = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    class PrefetchLoader:  # timm's shape: asks for batch k+1 before it yields batch k
        def __init__(self, loader):
            self.loader = loader
        def __iter__(self):
            first, prev = True, None
            for batch in self.loader:
                if not first:
                    yield prev
                first, prev = False, batch
            if prev is not None:
                yield prev

    loader = PrefetchLoader(DataLoader(TensorDataset(torch.randn(48, 8)), batch_size=4))
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    evaluate = DataLoader(TensorDataset(torch.randn(8, 8)), batch_size=4)
    for epoch in range(2):
        for (x,) in loader:
            opt.zero_grad(); model(x).sum().backward(); opt.step()
        with torch.no_grad():
            for (x,) in evaluate:
                model(x)
    print("done")
"""


def test_steps_are_counted_at_the_step_behind_a_one_batch_ahead_wrapper(tmp_path: Path) -> None:
    """Issue 31: timm's PrefetchLoader (and accelerate's, Lightning's fetchers) read one batch
    ahead: counted at __next__, the last batch of each epoch was lost (22 of 24)."""
    pytest.importorskip("torch")
    proc, out = _run(tmp_path, PREFETCH)
    assert proc.stdout.strip() == "done"
    inst = instrumentation(str(out))
    assert inst["opt_steps"] == 24 and inst["batches"] == 24, inst
    by_role = {r["role"]: r for r in inst["loaders"]}
    assert by_role["train"]["train_batches"] == 24 and by_role["eval"]["train_batches"] == 0, inst["loaders"]


def test_a_gan_step_with_two_backward_passes_is_one_step(tmp_path: Path) -> None:
    """Counting at the step never counts more steps than batches: dcgan's three backward passes
    and two optimizer steps per batch are one training step."""
    pytest.importorskip("torch")
    proc, out = _run(tmp_path, """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        d, g = torch.nn.Linear(8, 1), torch.nn.Linear(4, 8)
        opt_d, opt_g = torch.optim.SGD(d.parameters(), lr=0.1), torch.optim.SGD(g.parameters(), lr=0.1)
        for (real,) in DataLoader(TensorDataset(torch.randn(40, 8)), batch_size=4):
            opt_d.zero_grad()
            d(real).mean().backward()
            fake = g(torch.randn(4, 4))
            d(fake.detach()).mean().backward()
            opt_d.step()
            opt_g.zero_grad(); (-d(fake).mean()).backward(); opt_g.step()
        print("done")
    """)
    inst = instrumentation(str(out))
    assert inst["batches"] == 10 and inst["backward"] == 30 and inst["opt_steps"] == 20, inst


def test_no_provision_frame_in_the_users_traceback_nor_warnings(tmp_path: Path) -> None:
    """Issue 31: the wrappers around DataLoader iteration and GradScaler are provision's, not the
    user's: a dataset's error shows the user's and torch's frames only, and torch's
    `stacklevel=2` warning names the user's line."""
    pytest.importorskip("torch")
    out = tmp_path / "instrument.jsonl"
    (tmp_path / "job.py").write_text(textwrap.dedent("""
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Broken(Dataset):
            def __len__(self):
                return 4
            def __getitem__(self, i):
                raise KeyError("sample %d is missing" % i)

        scaler = torch.amp.GradScaler("cuda")  # no CUDA here: torch warns, and disables it
        for x in DataLoader(Broken(), batch_size=2):
            pass
    """))
    env = dict(os.environ, PROVISION_TRAIN_INSTRUMENT=str(out), PYTHONPATH=str(INSTRUMENT_DIR),
               CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "job.py"], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 1 and "KeyError: 'sample 0 is missing'" in proc.stderr, proc.stderr[-3000:]
    assert 'job.py", line 12, in <module>' in proc.stderr and "__getitem__" in proc.stderr, proc.stderr
    assert "sitecustomize" not in proc.stderr, proc.stderr
    assert "job.py:11: UserWarning" in proc.stderr and "GradScaler" in proc.stderr, proc.stderr
    assert instrumentation(str(out))["scaler"] is False  # disabled: not counted as in use
