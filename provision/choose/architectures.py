"""The known architectures, written here in plain torch from their published configurations.

Built on the meta device by the caller: nothing is allocated or downloaded, so a 13B model costs
nothing to build. The layers follow the reference implementations closely enough that the graph
(FLOPs, saved tensors, bytes moved) matches: attention is written out as matmul → softmax →
matmul (what an eager HF model runs; flash attention would save less memory, so memory
predictions err on the safe side). Heads: ResNet/ViT classify 1000 classes, BERT has a 2-logit
span head (SQuAD fine-tuning), GPT-2 and Llama are causal LMs with their vocabulary head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

# ---------------------------------------------------------------- ResNet (He et al. 2015, v1.5)


class _Basic(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.c1, self.b1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.c2, self.b2 = nn.Conv2d(width, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = _downsample(cin, cout, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.c1, self.b1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.c2, self.b2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.c3, self.b3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = _downsample(cin, cout, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.b1(self.c1(x)))
        y = F.relu(self.b2(self.c2(y)))
        y = self.b3(self.c3(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


def _downsample(cin: int, cout: int, stride: int) -> nn.Module | None:
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    def __init__(self, layers: tuple[int, ...], bottleneck: bool, classes: int = 1000) -> None:
        super().__init__()
        block = _Bottleneck if bottleneck else _Basic
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks: list[nn.Module] = []
        cin = 64
        for i, count in enumerate(layers):
            width = 64 * 2**i
            for j in range(count):
                blocks.append(block(cin, width, 2 if (j == 0 and i > 0) else 1))
                cin = width * block.expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# ---------------------------------------------------------------- transformers


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """(B, H, L, D) each: the eager attention an HF model runs (scores saved for backward)."""
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        length = q.shape[-2]
        mask = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.matmul(F.softmax(scores, dim=-1), v)


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    b, length, d = x.shape
    return x.view(b, length, heads, d // heads).transpose(1, 2)


def _merge(x: torch.Tensor) -> torch.Tensor:
    b, h, length, d = x.shape
    return x.transpose(1, 2).reshape(b, length, h * d)


class _EncoderBlock(nn.Module):
    """BERT (post-LN, GELU) or ViT (pre-LN) encoder layer."""

    def __init__(self, d: int, heads: int, ffn: int, pre_norm: bool, eps: float) -> None:
        super().__init__()
        self.heads, self.pre_norm = heads, pre_norm
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=eps), nn.LayerNorm(d, eps=eps)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def _attn(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        out = _attend(_heads(q, self.heads), _heads(k, self.heads), _heads(v, self.heads), False)
        return F.dropout(self.proj(_merge(out)), 0.1, self.training)

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(self.fc2(F.gelu(self.fc1(x))), 0.1, self.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            x = x + self._attn(self.ln1(x))
            return x + self._mlp(self.ln2(x))
        x = self.ln1(x + self._attn(x))
        return self.ln2(x + self._mlp(x))


@dataclass(frozen=True)
class BertConfig:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int = 30522
    max_positions: int = 512
    type_vocab: int = 2


class Bert(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(c.vocab, c.hidden)
        self.pos = nn.Embedding(c.max_positions, c.hidden)
        self.segment = nn.Embedding(c.type_vocab, c.hidden)
        self.ln = nn.LayerNorm(c.hidden, eps=1e-12)
        self.layers = nn.ModuleList(
            _EncoderBlock(c.hidden, c.heads, c.ffn, False, 1e-12) for _ in range(c.layers))
        self.span = nn.Linear(c.hidden, 2)  # start/end logits

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.word(tokens) + self.pos(pos)[None] + self.segment(torch.zeros_like(tokens))
        x = F.dropout(self.ln(x), 0.1, self.training)
        for layer in self.layers:
            x = layer(x)
        return self.span(x)


@dataclass(frozen=True)
class VitConfig:
    image_size: int = 224
    patch: int = 16
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    ffn: int = 3072
    classes: int = 1000


class Vit(nn.Module):
    def __init__(self, c: VitConfig) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, c.hidden, c.patch, c.patch)
        tokens = (c.image_size // c.patch) ** 2 + 1
        self.cls = nn.Parameter(torch.zeros(1, 1, c.hidden))
        self.pos = nn.Parameter(torch.zeros(1, tokens, c.hidden))
        self.layers = nn.ModuleList(
            _EncoderBlock(c.hidden, c.heads, c.ffn, True, 1e-6) for _ in range(c.layers))
        self.ln = nn.LayerNorm(c.hidden, eps=1e-6)
        self.head = nn.Linear(c.hidden, c.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos[:, : x.shape[1] + 1]
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln(x[:, 0]))


@dataclass(frozen=True)
class Gpt2Config:
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    vocab: int = 50257
    max_positions: int = 1024


class _Gpt2Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.c_attn(self.ln1(x)).chunk(3, dim=-1)
        a = _attend(_heads(q, self.heads), _heads(k, self.heads), _heads(v, self.heads), True)
        x = x + F.dropout(self.c_proj(_merge(a)), 0.1, self.training)
        return x + F.dropout(self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh")), 0.1, self.training)


class Gpt2(nn.Module):
    def __init__(self, c: Gpt2Config) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(c.vocab, c.hidden), nn.Embedding(c.max_positions, c.hidden)
        self.blocks = nn.ModuleList(_Gpt2Block(c.hidden, c.heads) for _ in range(c.layers))
        self.ln_f = nn.LayerNorm(c.hidden)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = F.dropout(self.wte(tokens) + self.wpe(pos)[None], 0.1, self.training)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # the LM head is tied to the embedding


@dataclass(frozen=True)
class LlamaConfig:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int = 32000
    max_positions: int = 4096
    tied: bool = False


class _RmsNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class _LlamaBlock(nn.Module):
    def __init__(self, c: LlamaConfig) -> None:
        super().__init__()
        d, head = c.hidden, c.hidden // c.heads
        self.heads, self.kv_heads = c.heads, c.kv_heads
        self.n1, self.n2 = _RmsNorm(d), _RmsNorm(d)
        self.q = nn.Linear(d, c.heads * head, bias=False)
        self.k = nn.Linear(d, c.kv_heads * head, bias=False)
        self.v = nn.Linear(d, c.kv_heads * head, bias=False)
        self.o = nn.Linear(c.heads * head, d, bias=False)
        self.gate = nn.Linear(d, c.intermediate, bias=False)
        self.up = nn.Linear(d, c.intermediate, bias=False)
        self.down = nn.Linear(c.intermediate, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = self.n1(x)
        q = _rotate(_heads(self.q(h), self.heads), cos, sin)
        k = _rotate(_heads(self.k(h), self.kv_heads), cos, sin)
        v = _heads(self.v(h), self.kv_heads)
        if self.kv_heads != self.heads:  # grouped-query attention: each K/V head serves a group
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        x = x + self.o(_merge(_attend(q, k, v, True)))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, c: LlamaConfig) -> None:
        super().__init__()
        self.head_dim = c.hidden // c.heads
        self.embed = nn.Embedding(c.vocab, c.hidden)
        self.blocks = nn.ModuleList(_LlamaBlock(c) for _ in range(c.layers))
        self.norm = _RmsNorm(c.hidden)
        self.lm_head = None if c.tied else nn.Linear(c.hidden, c.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2, device=tokens.device).float() / self.head_dim))
        angles = torch.outer(torch.arange(length, device=tokens.device).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos()[None, None], angles.sin()[None, None]
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin)
        x = self.norm(x)
        return self.lm_head(x) if self.lm_head is not None else F.linear(x, self.embed.weight)


# ---------------------------------------------------------------- the published configurations

RESNETS = {"resnet18": ((2, 2, 2, 2), False), "resnet34": ((3, 4, 6, 3), False),
           "resnet50": ((3, 4, 6, 3), True), "resnet101": ((3, 4, 23, 3), True),
           "resnet152": ((3, 8, 36, 3), True)}
BERTS = {"bert-base": BertConfig(768, 12, 12, 3072), "bert-large": BertConfig(1024, 24, 16, 4096)}
VITS = {"vit-b16": VitConfig(), "vit-l16": VitConfig(hidden=1024, layers=24, heads=16, ffn=4096)}
GPT2S = {"gpt2": Gpt2Config(), "gpt2-medium": Gpt2Config(1024, 24, 16),
         "gpt2-large": Gpt2Config(1280, 36, 20), "gpt2-xl": Gpt2Config(1600, 48, 25)}
LLAMAS = {"llama-2-7b": LlamaConfig(4096, 11008, 32, 32, 32),
          "llama-2-13b": LlamaConfig(5120, 13824, 40, 40, 40)}
KNOWN = sorted([*RESNETS, *BERTS, *VITS, *GPT2S, *LLAMAS])
