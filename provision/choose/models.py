"""MODEL as the user writes it → a model to measure: a known name, an HF config.json, or
`module:callable`. Everything is built on the meta device (shapes only, no memory, no download).
"""

from __future__ import annotations

import difflib
import importlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from provision.choose import architectures as arch
from provision.errors import ConfigError

IMAGE = "images"
TOKENS = "sequences"


@dataclass
class ModelSpec:
    """A model and how to feed it one batch: `inputs(batch)` makes meta tensors."""

    name: str
    build: Callable[[], nn.Module]
    unit: str  # images | sequences
    image_size: int | None = None
    seq_len: int | None = None
    vocab: int | None = None
    lm: bool = False  # causal LM: cross-entropy over the vocabulary at every position

    def inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        if self.unit == IMAGE:
            return (torch.empty(batch, 3, self.image_size or 224, self.image_size or 224, device="meta"),)
        return (torch.zeros(batch, self.seq_len or 128, dtype=torch.long, device="meta"),)

    def loss(self, out: Any, batch: int) -> torch.Tensor:
        if isinstance(out, (tuple, list)):
            out = out[0]
        if isinstance(out, dict):
            out = next(iter(out.values()))
        if not isinstance(out, torch.Tensor):
            raise ConfigError(f"model {self.name}: forward returned {type(out).__name__}, not a tensor")
        if out.dim() >= 2 and out.is_floating_point():
            # classification / LM: cross-entropy over the last dimension (its softmax is saved)
            logits = out.reshape(-1, out.shape[-1])
            target = torch.zeros(logits.shape[0], dtype=torch.long, device=out.device)
            return F.cross_entropy(logits, target)
        return out.float().mean()

    def describe(self) -> str:
        if self.unit == IMAGE:
            return f"{self.name} @ {self.image_size}px"
        return f"{self.name} @ seq {self.seq_len}"


def resolve(model: str, seq_len: int | None = None, image_size: int | None = None) -> ModelSpec:
    """The MODEL argument of `provision choose`; ConfigError says what was wrong and the choices."""
    text = model.strip()
    key = text.lower()
    if key in arch.KNOWN:
        return _known(key, seq_len, image_size)
    path = Path(text).expanduser()
    if text.endswith(".json") or path.is_file() or path.is_dir():
        return from_config(path, seq_len, image_size)
    if ":" in text:
        return _from_callable(text, seq_len, image_size)
    near = difflib.get_close_matches(key, arch.KNOWN, n=3, cutoff=0.4)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    raise ConfigError(
        f"--model {model!r}: not a known architecture{hint}, a config.json path, or module:callable;"
        f" known: {', '.join(arch.KNOWN)}")


def _known(key: str, seq_len: int | None, image_size: int | None) -> ModelSpec:
    if key in arch.RESNETS:
        layers, bottleneck = arch.RESNETS[key]
        return ModelSpec(key, lambda: arch.ResNet(layers, bottleneck), IMAGE, image_size=image_size or 224)
    if key in arch.VITS:
        c = arch.VITS[key]
        if image_size:
            c = arch.VitConfig(image_size, c.patch, c.hidden, c.layers, c.heads, c.ffn, c.classes)
        return ModelSpec(key, lambda: arch.Vit(c), IMAGE, image_size=c.image_size)
    if key in arch.BERTS:
        return _bert(key, arch.BERTS[key], seq_len)
    if key in arch.GPT2S:
        return _gpt2(key, arch.GPT2S[key], seq_len)
    return _llama(key, arch.LLAMAS[key], seq_len)


def _check_len(name: str, seq_len: int, most: int) -> int:
    if seq_len > most:
        raise ConfigError(f"--seq-len {seq_len}: {name} has {most} positions at most")
    return seq_len


def _bert(name: str, c: arch.BertConfig, seq_len: int | None) -> ModelSpec:
    length = _check_len(name, seq_len or min(512, c.max_positions), c.max_positions)
    return ModelSpec(name, lambda: arch.Bert(c), TOKENS, seq_len=length, vocab=c.vocab)


def _gpt2(name: str, c: arch.Gpt2Config, seq_len: int | None) -> ModelSpec:
    length = _check_len(name, seq_len or c.max_positions, c.max_positions)
    return ModelSpec(name, lambda: arch.Gpt2(c), TOKENS, seq_len=length, vocab=c.vocab, lm=True)


def _llama(name: str, c: arch.LlamaConfig, seq_len: int | None) -> ModelSpec:
    length = _check_len(name, seq_len or min(2048, c.max_positions), c.max_positions)
    return ModelSpec(name, lambda: arch.Llama(c), TOKENS, seq_len=length, vocab=c.vocab, lm=True)


def from_config(path: Path, seq_len: int | None = None, image_size: int | None = None) -> ModelSpec:
    """An HF config.json (or a folder holding one): llama/mistral/qwen2, gpt2, bert/roberta, vit."""
    file = path / "config.json" if path.is_dir() else path
    try:
        cfg = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"--model {file}: no such file") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{file}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{file}: not a JSON object")
    kind = str(cfg.get("model_type") or "").lower()
    name = str(cfg.get("_name_or_path") or file.parent.name or file.stem) or kind

    def need(key: str, *alts: str) -> int:
        for k in (key, *alts):
            if isinstance(cfg.get(k), int) and not isinstance(cfg.get(k), bool):
                return int(cfg[k])
        raise ConfigError(f"{file}: {kind} config lacks {key!r} (an integer)")

    if kind in ("llama", "mistral", "qwen2", "qwen3", "gemma"):
        heads = need("num_attention_heads")
        c = arch.LlamaConfig(need("hidden_size"), need("intermediate_size"), need("num_hidden_layers"),
                             heads, int(cfg.get("num_key_value_heads") or heads), need("vocab_size"),
                             int(cfg.get("max_position_embeddings") or 4096),
                             bool(cfg.get("tie_word_embeddings", False)))
        return _llama(name, c, seq_len)
    if kind == "gpt2":
        c2 = arch.Gpt2Config(need("n_embd"), need("n_layer"), need("n_head"), need("vocab_size"),
                             need("n_positions", "n_ctx"))
        return _gpt2(name, c2, seq_len)
    if kind in ("bert", "roberta"):
        hidden = need("hidden_size")
        cb = arch.BertConfig(hidden, need("num_hidden_layers"), need("num_attention_heads"),
                             int(cfg.get("intermediate_size") or 4 * hidden), need("vocab_size"),
                             int(cfg.get("max_position_embeddings") or 512), int(cfg.get("type_vocab_size") or 2))
        return _bert(name, cb, seq_len)
    if kind == "vit":
        hidden = need("hidden_size")
        cv = arch.VitConfig(image_size or int(cfg.get("image_size") or 224), int(cfg.get("patch_size") or 16),
                            hidden, need("num_hidden_layers"), need("num_attention_heads"),
                            int(cfg.get("intermediate_size") or 4 * hidden),
                            len(cfg.get("id2label") or {}) or 1000)
        return ModelSpec(name, lambda: arch.Vit(cv), IMAGE, image_size=cv.image_size)
    raise ConfigError(f"{file}: model_type {kind or '(none)'!r} is not one provision builds"
                      " (llama, mistral, qwen2, gpt2, bert, roberta, vit); give module:callable instead")


def _from_callable(text: str, seq_len: int | None, image_size: int | None) -> ModelSpec:
    """`pkg.module:make` → make() called under the meta device. Inputs: images (--image-size,
    default 224) unless --seq-len is given (token ids); a model may say otherwise with an
    `example_unit` attribute ("images"/"sequences")."""
    module_name, _, attr = text.partition(":")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # the user's own modules, as `python -m` would find them
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--model {text}: cannot import {module_name!r} ({exc})") from None
    factory = module
    for part in attr.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise ConfigError(f"--model {text}: {module_name} has no {attr!r}")
    if not callable(factory):
        raise ConfigError(f"--model {text}: {attr} is not callable")

    def build() -> nn.Module:
        made = factory()
        if not isinstance(made, nn.Module):
            raise ConfigError(f"--model {text}: returned {type(made).__name__}, not a torch nn.Module")
        return made

    with torch.device("meta"):
        probe = build()
    unit = getattr(probe, "example_unit", None) or (TOKENS if seq_len else IMAGE)
    if unit == TOKENS:
        return ModelSpec(text, build, TOKENS, seq_len=seq_len or 128)
    return ModelSpec(text, build, IMAGE, image_size=image_size or 224)
