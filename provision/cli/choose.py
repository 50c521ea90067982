"""`provision choose --model MODEL ...`: before renting, which offer fits and finishes cheapest."""

from __future__ import annotations

import argparse

from provision.errors import ConfigError

describe = "before renting: predict memory, speed and cost of a model on each GPU offer, cheapest to finish first"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, metavar="MODEL",
                        help="known architecture (resnet50, bert-base, gpt2, llama-2-7b, ...), an HF config.json,"
                             " or module:callable returning an nn.Module")
    parser.add_argument("--batch", type=_positive, help="global batch per optimizer step (default 32 images, 8 sequences)")
    parser.add_argument("--seq-len", type=_positive, metavar="L", help="sequence length (text models)")
    parser.add_argument("--image-size", type=_positive, metavar="S", help="image side in pixels (vision models)")
    parser.add_argument("--precision", choices=["fp32", "tf32", "amp", "bf16"], default=None,
                        help="what the job trains in (default: read from --script, else amp); tf32 = fp32 tensors"
                             " with TF32 matmuls (NVIDIA's containers, set_float32_matmul_precision('high'))")
    parser.add_argument("--script", metavar="FILE",
                        help="the training script: its precision settings (autocast, TF32) are read, not run")
    parser.add_argument("--optimizer", choices=["adam", "adamw", "sgd"], default="adamw")
    parser.add_argument("--gpu", action="append", default=[], metavar="NAME",
                        help="consider only this GPU (repeatable; names as nvidia-smi or providers write them)")
    parser.add_argument("--offers", action="append", default=[], metavar="FILE",
                        help="offers: CSV (id,gpu,count,price_per_hour) or `vastai search offers --raw` JSON; repeatable")
    parser.add_argument("--samples", type=_positive, metavar="N", help="samples per epoch (with --epochs)")
    parser.add_argument("--epochs", type=_positive, metavar="E")
    parser.add_argument("--steps", type=_positive, metavar="N", help="optimizer steps (instead of --samples/--epochs)")


def run(args: argparse.Namespace) -> int:
    try:
        import torch  # noqa: F401 - the model is built and traced on its meta device
    except ImportError:
        raise ConfigError("provision choose needs torch on this machine (any CPU build will do:"
                          " pip install torch --index-url https://download.pytorch.org/whl/cpu)") from None
    from provision.choose import calibrate, catalogue, graph, models, offers, plan
    from provision.cli.common import emit_json, get_console

    if args.steps and (args.samples or args.epochs):
        raise ConfigError("give --steps, or --samples with --epochs, not both")
    if args.epochs and not args.samples:
        raise ConfigError("--epochs needs --samples (samples per epoch)")
    spec = models.resolve(args.model, seq_len=args.seq_len, image_size=args.image_size)
    batch = args.batch or (32 if spec.unit == models.IMAGE else 8)
    chosen, source = _precision(args)
    req = plan.Request(batch, chosen, args.optimizer, args.samples, args.epochs, args.steps, source)
    wanted = [catalogue.require(name) for name in args.gpu]
    loaded = [o for path in args.offers for o in offers.load(path)]
    if wanted:
        names = {g.name for g in wanted}
        loaded = [o for o in loaded if (s := catalogue.lookup(o.gpu, o.memory_gb)) is not None and s.name in names]
    gpus = wanted or _offer_gpus(loaded) or catalogue.default_gpus()
    profile = graph.measure(spec)
    doc = plan.build(spec, profile, req, gpus, loaded, calibrate.from_history())
    calibrate.remember(doc)
    if args.json:
        emit_json(doc)
    else:
        from provision.choose.render import print_plan

        print_plan(doc, get_console())
    return 0


def _precision(args: argparse.Namespace) -> tuple[str, str | None]:
    """--precision as given; else what --script sets (PyTorch's fp32 when it sets nothing); else amp."""
    if args.precision:
        return args.precision, None
    if not args.script:
        return "amp", None
    from pathlib import Path

    from provision.choose import precision

    path = Path(args.script).expanduser()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"--script {args.script}: cannot read it ({exc.strerror or exc})") from None
    found = precision.detect(text, where=path.name)
    if found is None:
        return "fp32", f"{path.name} sets no autocast or TF32: PyTorch's default fp32"
    return found.precision, found.evidence


def _offer_gpus(loaded: list) -> list:
    from provision.choose import catalogue

    seen: dict[str, object] = {}
    for o in loaded:
        spec = catalogue.lookup(o.gpu, o.memory_gb)
        if spec is not None and catalogue.usable(spec):
            seen.setdefault(spec.name, spec)
    return list(seen.values())
