"""`provision choose` as scripts call it: `python -m provision choose ... --json` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

VAST = Path(__file__).parent / "data" / "vast_search_offers_raw.json"
ROOT = Path(__file__).resolve().parents[2]


def _choose(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(cwd or ROOT)]))
    return subprocess.run([sys.executable, "-m", "provision", "choose", *args], capture_output=True, text=True,
                          timeout=600, env=env, cwd=cwd or ROOT)


def test_json_document_shape() -> None:
    r = _choose("--model", "resnet18", "--image-size", "64", "--batch", "128", "--precision", "amp",
                "--optimizer", "sgd", "--offers", str(VAST), "--samples", "50000", "--epochs", "3", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) >= {"model", "gpus", "offers", "recommendation"}
    assert set(doc["model"]) >= {"name", "params", "flops_per_sample", "memory"}
    assert set(doc["model"]["memory"]) >= {"weights_gb", "grads_gb", "optimizer_gb", "activations_gb_per_sample",
                                           "total_gb"}
    for g in doc["gpus"]:
        assert set(g) >= {"gpu", "memory_gb", "fits", "max_batch", "predicted_samples_per_s", "basis"}
    assert len(doc["offers"]) == 10
    for o in doc["offers"]:
        assert set(o) >= {"id", "gpu", "count", "price_per_hour", "fits", "predicted_samples_per_s",
                          "predicted_hours", "predicted_cost", "rank"}
    assert set(doc["recommendation"]) >= {"offer", "why"}
    best = next(o for o in doc["offers"] if o["rank"] == 1)
    assert doc["recommendation"]["offer"] == best["id"]
    assert best["predicted_hours"] == round(150000 / best["predicted_samples_per_s"] / 3600, 6) or \
        abs(best["predicted_hours"] - 150000 / best["predicted_samples_per_s"] / 3600) < 1e-3 * best["predicted_hours"]


def test_table_without_json_and_errors(tmp_path: Path) -> None:
    r = _choose("--model", "resnet18", "--image-size", "64", "--gpu", "T4", "--gpu", "RTX 4090")
    assert r.returncode == 0, r.stderr
    assert "Recommendation" in r.stdout + r.stderr and "RTX 4090" in r.stdout + r.stderr
    bad = _choose("--model", "resnet18", "--gpu", "RTX 4900")
    assert bad.returncode == 2 and "nearest known" in bad.stderr
    bad = _choose("--model", "resnet51")
    assert bad.returncode == 2 and "resnet50" in bad.stderr


def test_hf_config_and_module_callable(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 256, "intermediate_size": 688,
                               "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                               "vocab_size": 1000, "max_position_embeddings": 512}))
    r = _choose("--model", str(cfg), "--seq-len", "128", "--gpu", "L4", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    # embed + 2 × (q 256² + k,v 2×256×128 + o 256² + 3×256×688 + 2 norms) + norm + head
    layer = 256 * 256 * 2 + 2 * 256 * 128 + 3 * 256 * 688 + 2 * 256
    assert doc["model"]["params"] == 1000 * 256 * 2 + 2 * layer + 256
    (tmp_path / "mymodel.py").write_text(
        "import torch\n"
        "def make():\n"
        "    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),"
        " torch.nn.LazyLinear(10) if False else torch.nn.Linear(8 * 30 * 30, 10))\n")
    r = _choose("--model", "mymodel:make", "--image-size", "32", "--gpu", "A10", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["model"]["params"] == 3 * 8 * 9 + 8 + 8 * 30 * 30 * 10 + 10
    assert doc["gpus"][0]["fits"]
