"""What keeps the quick bench short on a small CPU: threads fitted to the cores other work leaves
free, an optimizer that does not import torch._dynamo, and the quick workloads' sizes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from provision.agent.bench import common

torch = pytest.importorskip("torch")


def _stat(path: Path, busy: int, idle: int) -> None:
    # cpu user nice system idle iowait irq softirq steal
    path.write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0\n")


def test_busy_cores_from_two_reads_of_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    _stat(stat, 1000, 1000)

    def sleep(_s: float) -> None:  # between the reads, other work ran 75% of the time
        _stat(stat, 1000 + 300, 1000 + 100)

    busy = common.busy_cores(0.1, str(stat), sleep=sleep)
    import os

    assert busy == pytest.approx(0.75 * (os.cpu_count() or 1))
    assert common.busy_cores(0.1, str(tmp_path / "missing"), sleep=lambda s: None) is None


@pytest.mark.parametrize(
    ("cores", "busy", "threads"),
    [(2, None, 2), (2, 0.2, 2), (2, 1.0, 1), (2, 1.9, 1), (8, 3.2, 5), (4, 7.5, 1)],
)
def test_threads_for_cpu(cores: int, busy: float | None, threads: int) -> None:
    assert common.threads_for_cpu(cores, busy) == threads


def test_momentum_sgd_makes_torch_sgds_updates() -> None:
    from provision.agent.bench.models import MomentumSGD

    torch.manual_seed(0)
    a, b = torch.nn.Linear(6, 3), torch.nn.Linear(6, 3)
    b.load_state_dict(a.state_dict())
    reference = torch.optim.SGD(a.parameters(), lr=0.05, momentum=0.9)
    ours = MomentumSGD(b.parameters(), lr=0.05, momentum=0.9)
    for _ in range(6):
        x = torch.randn(16, 6)
        for model, opt in ((a, reference), (b, ours)):
            opt.zero_grad(set_to_none=True)
            model(x).pow(2).mean().backward()
            opt.step()
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6)


def test_quick_cpu_workloads_are_the_small_ones() -> None:
    from provision.agent.bench.models import workloads

    quick = {s.name: s for s in workloads(False, True)}
    full = {s.name: s for s in workloads(False, False)}
    assert quick["convnet"].describe["width"] < full["convnet"].describe["width"]
    assert quick["convnet"].batch < full["convnet"].batch
    assert quick["transformer"].describe["d_model"] < full["transformer"].describe["d_model"]


_NO_DYNAMO = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from provision.agent.bench import amp, memory
import torch
if torch.cuda.is_available():
    print(json.dumps({"skip": True}))
    raise SystemExit
a = amp.measure({}, True)
m = memory.measure({}, True, a)
print(json.dumps({"dynamo": "torch._dynamo" in sys.modules, "amp": sorted(a["models"]),
                  "memory_dtype": m["dtype"], "speedup": a["speedup"]}))
"""


def test_quick_cpu_training_sections_never_import_dynamo() -> None:
    """torch.optim imports torch._dynamo on first use (seconds on a small CPU)."""
    import json

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", _NO_DYNAMO, str(root)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if out.get("skip"):
        pytest.skip("a GPU host: the GPU path uses torch.optim on purpose")
    assert out["dynamo"] is False
    assert out["amp"] == ["convnet", "transformer"]
    # memory trains in what AMP found fastest: fp32 where bf16 is slower (emulated) here
    assert out["memory_dtype"] == ("fp32" if out["speedup"] < 1 else "bf16")
