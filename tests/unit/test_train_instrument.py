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
    assert inst["present"] and inst["batches"] == 22  # 2 epochs x 12 batches, the first of each apart
    assert inst["data_wait_fraction"] > 0.5
    [first, second] = inst["loaders"]
    assert first["num_workers"] == 0 and first["batch_size"] == 4 and first["pin_memory"] is False
    assert first["dataset"] == "Slow" and first["paths"] == [str(data_dir)]
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
