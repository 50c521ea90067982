"""The precision a training job runs at, read where `train` sees it: the script and its environment.

`choose` predicts one of PRECISIONS. fp32 and tf32 store the same bytes; they differ in what
fp32 matmuls run on: IEEE FP32 on CUDA cores (PyTorch's default) or TF32 tensor cores, which a job
gets from `torch.set_float32_matmul_precision("high" | "medium")`,
`torch.backends.cuda.matmul.allow_tf32 = True`, Hugging Face's `TrainingArguments(tf32=True)`, or
NVIDIA's PyTorch containers (`TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1` in the image's environment).
Autocast wins over TF32 (its matmuls are 16-bit): bf16 autocast / `bf16=True` → bf16, other
autocast, a GradScaler or `fp16=True` → amp. The script is parsed, never run.

Interface for the train side: `detect(script_text, env, where)` → `Found(precision, evidence)` or
None; `provision choose --precision tf32` / `--script FILE` and `plan.Request(precision=...)`.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

PRECISIONS = ("fp32", "tf32", "amp", "bf16")
TF32_ENV = "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"
_RANK = {"fp32": 0, "tf32": 1, "amp": 2, "bf16": 3}  # the stronger setting decides what matmuls run in


@dataclass(frozen=True)
class Found:
    precision: str
    evidence: str  # "train.py:12 torch.set_float32_matmul_precision('high')", or the env variable


def _name(node: ast.AST) -> str:
    """Dotted name of a call's function or an assignment target (`torch.backends.cuda.matmul.allow_tf32`)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _from_call(call: ast.Call) -> str | None:
    name = _name(call.func)
    last = name.rsplit(".", 1)[-1]
    if last == "set_float32_matmul_precision" and call.args:
        arg = call.args[0]
        if isinstance(arg, ast.Constant) and arg.value in ("high", "medium"):
            return "tf32"
    if last == "autocast":
        dtypes = [k.value for k in call.keywords if k.arg == "dtype"] + list(call.args[1:2])
        return "bf16" if any(_name(d).endswith("bfloat16") for d in dtypes) else "amp"
    if last == "GradScaler":
        return "amp"
    for k in call.keywords:  # Lightning's Trainer(precision="bf16-mixed" | "16-mixed" | 16)
        if k.arg == "precision" and isinstance(k.value, ast.Constant):
            text = str(k.value.value)
            if text.startswith("bf16"):
                return "bf16"
            if text.startswith("16"):
                return "amp"
    flags = {k.arg: k.value for k in call.keywords if k.arg in ("tf32", "bf16", "fp16")}
    for flag, precision in (("bf16", "bf16"), ("fp16", "amp"), ("tf32", "tf32")):
        if _is_true(flags.get(flag)):
            return precision
    return None


def from_script(source: str, where: str = "script") -> Found | None:
    """The strongest precision setting in a Python script's text; None when it sets none (or
    does not parse: then nothing is claimed)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    best: Found | None = None
    for node in ast.walk(tree):
        found = None
        if isinstance(node, ast.Call):
            found = _from_call(node)
        elif isinstance(node, ast.Assign) and _is_true(node.value):
            if any(_name(t).endswith("matmul.allow_tf32") for t in node.targets):
                found = "tf32"
        if found and (best is None or _RANK[found] > _RANK[best.precision]):
            line = ast.get_source_segment(source, node) or ""
            best = Found(found, f"{where}:{node.lineno} {' '.join(line.split())[:80]}")
    return best


def from_env(env: Mapping[str, str]) -> Found | None:
    """NVIDIA's containers turn fp32 matmuls into TF32 for every script they run."""
    if str(env.get(TF32_ENV, "")).strip() == "1":
        return Found("tf32", f"{TF32_ENV}=1 in the job's environment")
    return None


def detect(source: str | None, env: Mapping[str, str] | None = None, where: str = "script") -> Found | None:
    """The job's precision from its script and environment (the stronger of the two), or None."""
    found = [f for f in (from_script(source, where) if source else None, from_env(env or {})) if f]
    return max(found, key=lambda f: _RANK[f.precision]) if found else None
