"""`provision choose` without --json: one screen, the recommendation first."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from provision.terminal import add_row, markup

_PARTS = (("weights_gb", "weights"), ("grads_gb", "grads"), ("optimizer_gb", "optimizer"),
          ("amp_weight_copies_gb", "fp16 weight copies"), ("saved_fixed_gb", "fixed saved tensors"),
          ("activations_gb", "activations"), ("cuda_context_gb", "CUDA context"),
          ("fragmentation_gb", "fragmentation"))


def _n(x: Any, fmt: str = "{:.3g}") -> str:
    return "—" if x is None else fmt.format(x)


def print_plan(doc: dict[str, Any], console: Console) -> None:
    m, req, rec = doc["model"], doc["request"], doc["recommendation"]
    mem = m["memory"]
    # a model's name comes from a downloaded config.json, offers from a file: text, never markup
    console.print(markup("[bold]Recommendation:[/] {}  {}", rec["offer"] or "—", rec["why"]))
    parts = " + ".join(f"{label} {mem[key]:.3g}" for key, label in _PARTS if (mem.get(key) or 0) >= 5e-4)
    source = f" (from {req['precision_from']})" if req.get("precision_from") else ""
    console.print(markup("[dim]{}[/]", (
        f"{m['name']}: {m['params'] / 1e6:.1f} M params, {m['flops_per_sample'] / 1e9:.3g} GFLOP/sample;"
        f" batch {req['batch']}, {req['precision']}{source}, {req['optimizer']}: {parts}"
        f" = {mem['total_gb']:.3g} GB ({mem['activations_gb_per_sample'] * 1024:.4g} MB/sample activations)")))
    rated = next((g["rates"] for g in doc["gpus"] if g.get("rates")), None)
    if rated and len(doc["gpus"]) == 1:
        console.print(markup("[dim]rates assumed (TFLOPS, dense): matmul {}; conv {}[/]", rated["matmul"], rated["conv"]))
    if doc["offers"]:
        t = Table(title="Offers, cheapest to finish first", title_justify="left", pad_edge=False)
        for col in ("rank", "offer", "GPU", "samples/s", "$/h", "hours", "cost", "note"):
            t.add_column(col, justify="right" if col in ("rank", "samples/s", "$/h", "hours", "cost") else "left")
        for o in doc["offers"][:20]:
            note = o.get("reason") or ""
            if o["id"] == rec.get("fastest") and o["id"] != rec.get("offer"):
                note = ("fastest; " + note).rstrip("; ")
            style = "bold green" if o["id"] == rec.get("offer") else ("dim" if not o["fits"] else None)
            add_row(t, _n(o["rank"], "{}"), str(o["id"]), f"{o['count']}× {o['gpu']}",
                      _n(o["predicted_samples_per_s"], "{:.4g}"), f"{o['price_per_hour']:g}",
                      _n(o["predicted_hours"]), _n(o["predicted_cost"], "${:.2f}"), note, style=style)
        if len(doc["offers"]) > 20:
            t.caption = f"{len(doc['offers']) - 20} more in --json"
        console.print(t)
        return
    t = Table(title="GPUs, fastest first", title_justify="left", pad_edge=False)
    for col in ("GPU", "GiB", "max batch", "samples/s", "matmul at", "note"):
        t.add_column(col, justify="left" if col in ("GPU", "matmul at", "note") else "right")
    rows = sorted(doc["gpus"], key=lambda g: -(g["predicted_samples_per_s"] or 0))
    for g in rows[:24]:
        add_row(t, g["gpu"], _n(g["memory_gb"], "{:.1f}"), str(g["max_batch"]),
                _n(g["predicted_samples_per_s"], "{:.4g}"), (g.get("rates") or {}).get("matmul", ""),
                g.get("reason") or "", style=None if g["fits"] else "dim")
    console.print(t)
