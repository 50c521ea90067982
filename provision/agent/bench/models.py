"""The two training workloads: a ResNet-style convnet and a small transformer.

Defined here rather than taken from torchvision so the benchmark needs nothing but torch and
downloads nothing. Sizes depend on the device: on a GPU the convnet is ResNet-18-shaped at
224 px (comparable with published AMP speedups); on a CPU both shrink so a quick run stays short.
Import this module only after torch imported (common.import_torch).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        skip = x if self.shortcut is None else self.shortcut(x)
        return F.relu(out + skip, inplace=True)


class SmallResNet(nn.Module):
    """ResNet-18's shape (4 stages of basic blocks) with a configurable width and depth."""

    def __init__(self, width=64, blocks=(2, 2, 2, 2), classes=1000, image_size=224):
        super(SmallResNet, self).__init__()
        if image_size >= 128:  # the ImageNet stem: 7x7/2 conv + 3x3/2 max-pool
            self.stem = nn.Sequential(
                nn.Conv2d(3, width, 7, 2, 3, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(3, 2, 1),
            )
        else:  # small images (CIFAR-style stem)
            self.stem = nn.Sequential(
                nn.Conv2d(3, width, 3, 1, 1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(inplace=True),
            )
        layers, cin = [], width
        for stage, count in enumerate(blocks):
            cout = width * 2**stage
            for i in range(count):
                layers.append(BasicBlock(cin, cout, 2 if (stage > 0 and i == 0) else 1))
                cin = cout
        self.stages = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class TransformerBlock(nn.Module):
    """Pre-norm self-attention + MLP, the unit every GPT/ViT stacks."""

    def __init__(self, d_model, heads, mlp_ratio=4):
        super(TransformerBlock, self).__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, mlp_ratio * d_model),
            nn.GELU(),
            nn.Linear(mlp_ratio * d_model, d_model),
        )

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0: fused kernels
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            mask = torch.ones(t, t, device=x.device, dtype=torch.bool).triu(1)
            att = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    def __init__(self, vocab, d_model, heads, layers, seq_len):
        super(TinyTransformer, self).__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, seq_len, d_model))
        self.blocks = nn.Sequential(*[TransformerBlock(d_model, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        return self.head(self.ln(self.blocks(x)))


class MomentumSGD(object):
    """The update torch.optim.SGD(momentum=m) makes, for CPU runs: building any torch.optim
    optimizer imports torch._dynamo, 2 s on an idle 2-core CPU and 8-12 s on a busy one, more
    than the quick bench's whole training section. GPUs keep torch.optim (GradScaler wants it)."""

    def __init__(self, params, lr=0.01, momentum=0.0):
        self.params = [p for p in params if p.requires_grad]
        self.param_groups = [{"params": self.params, "lr": lr}]
        self.lr = lr
        self.momentum = momentum
        self.buffers = None

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self):
        pairs = [(p, p.grad) for p in self.params if p.grad is not None]
        if not pairs:
            return
        params = [p for p, _ in pairs]
        grads = [g for _, g in pairs]
        if self.momentum:
            if self.buffers is None:  # as torch: the first buffer is the gradient itself
                self.buffers = [g.clone() for g in grads]
            else:
                for k, g in enumerate(grads):  # (no zip(strict=): this runs on Python 3.8)
                    self.buffers[k].mul_(self.momentum).add_(g)
            grads = self.buffers
        for k, p in enumerate(params):
            p.add_(grads[k], alpha=-self.lr)


def make_optimizer(params, on_gpu, lr=0.01, momentum=0.0):
    if on_gpu:
        return torch.optim.SGD(params, lr=lr, momentum=momentum)
    return MomentumSGD(params, lr=lr, momentum=momentum)


class ModelSpec(object):
    """One workload: how to build the model and a batch, and what one sample is."""

    def __init__(self, name, build, make_batch, loss, describe, batch, unit="samples"):
        self.name = name
        self.build = build
        self.make_batch = make_batch
        self.loss = loss
        self.describe = describe
        self.batch = batch
        self.unit = unit


def convnet_spec(image_size, width, blocks, batch, classes=1000):
    def make_batch(n, device):
        x = torch.randn(n, 3, image_size, image_size, device=device)
        y = torch.randint(0, classes, (n,), device=device)
        return x, y

    return ModelSpec(
        "convnet",
        lambda: SmallResNet(width, blocks, classes, image_size),
        make_batch,
        lambda out, y: F.cross_entropy(out, y),
        {"arch": "resnet", "width": width, "blocks": list(blocks), "image_size": image_size},
        batch,
        unit="images",
    )


def transformer_spec(vocab, d_model, heads, layers, seq_len, batch):
    def make_batch(n, device):
        x = torch.randint(0, vocab, (n, seq_len), device=device)
        y = torch.randint(0, vocab, (n, seq_len), device=device)
        return x, y

    return ModelSpec(
        "transformer",
        lambda: TinyTransformer(vocab, d_model, heads, layers, seq_len),
        make_batch,
        lambda out, y: F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1)),
        {"d_model": d_model, "heads": heads, "layers": layers, "seq_len": seq_len, "vocab": vocab},
        batch,
        unit="sequences",
    )


def default_image_size(on_gpu, quick):
    return 224 if on_gpu else (32 if quick else 64)


def workloads(on_gpu, quick, image_size=None):
    """The convnet and transformer sized for this device; `image_size` matches the loader's."""
    size = image_size or default_image_size(on_gpu, quick)
    if on_gpu:
        return [
            convnet_spec(size, 64, (2, 2, 2, 2), batch=128),
            transformer_spec(8192, 1024, 16, 4 if not quick else 2, 512, batch=16),
        ]
    if quick:  # a 2-core CPU must finish the quick run in seconds: what it says at this size
        # (fp32 vs bf16 step time, memory per sample) is all a CPU can say at any size
        return [
            convnet_spec(size, 8, (1, 1, 1, 1), batch=16, classes=100),
            transformer_spec(1000, 64, 4, 1, 32, batch=8),
        ]
    return [
        convnet_spec(size, 16, (1, 1, 1, 1), batch=64, classes=100),
        transformer_spec(1000, 256, 4, 2, 128, batch=8),
    ]
