"""Put it together: the model's memory and speed on each GPU, each offer's time and cost to
finish the job, the ranking and the recommendation — the `provision choose --json` document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provision.choose import catalogue, memory, speed
from provision.choose.graph import Profile
from provision.choose.models import ModelSpec
from provision.choose.offers import Offer
from provision.compat.loader import GpuSpec

SCHEMA = "provision.choose/v1"


@dataclass(frozen=True)
class Request:
    batch: int
    precision: str = "amp"
    optimizer: str = "adamw"
    samples: int | None = None  # samples per epoch
    epochs: int | None = None
    steps: int | None = None
    precision_from: str | None = None  # where the precision was read (a script line), if not given

    def total_samples(self) -> int | None:
        if self.steps:
            return self.steps * self.batch
        if self.samples:
            return self.samples * (self.epochs or 1)
        return None


@dataclass
class Calibration:
    """Measured ÷ predicted per catalogue GPU name, from provision's own reports (calibrate.py)."""

    factors: dict[str, tuple[float, int]] = field(default_factory=dict)

    def apply(self, gpu: str, predicted: float) -> tuple[float, str]:
        if gpu in self.factors:
            factor, n = self.factors[gpu]
            return predicted * factor, (f"roofline × {factor:.2f}, calibrated by {n} provision"
                                        f" measurement{'s' if n != 1 else ''} on this GPU")
        return predicted, "roofline from the datasheet (no provision measurement of this GPU yet)"


def _r(x: float | None, digits: int = 4) -> float | None:
    if x is None:
        return None
    return float(f"{x:.{digits}g}")


def gpu_entry(profile: Profile, mem: memory.Memory, gpu: GpuSpec, req: Request, cal: Calibration,
              memory_gb: float | None = None, count: int = 1, link: str | None = None,
              link_gbs: float | None = None) -> dict[str, Any]:
    """One GPU (or `count` of them): fit, max batch, speed. `reason` says why it does not fit."""
    have = float(memory_gb or gpu.memory_gib or 0)  # the driver's MiB (catalogue), not the marketing GB
    most = mem.max_batch(have)
    entry: dict[str, Any] = {"gpu": gpu.name, "memory_gb": _r(have), "fits": False, "max_batch": most,
                             "predicted_samples_per_s": None, "basis": None, "micro_batch": None,
                             "accumulation_steps": None, "reason": None, "rates": None}
    if most < 1:
        entry["reason"] = (f"model states alone need {mem.total_gb(0):.1f} GB of {have:.1f} GB"
                           f" ({req.precision}, {req.optimizer})")
        return entry
    try:
        entry["rates"] = speed.rates(gpu, req.precision)
        s = speed.step(profile, gpu, req.precision, req.optimizer, req.batch, most, count, link, link_gbs)
    except speed.Unsupported as exc:
        entry["reason"] = str(exc)
        return entry
    rate, basis = cal.apply(gpu.name, s.samples_per_s)
    entry.update(fits=True, predicted_samples_per_s=_r(rate), basis=basis, micro_batch=s.micro_batch,
                 accumulation_steps=s.accumulation, scaling=s.scaling or None)
    if s.accumulation > 1:
        entry["reason"] = (f"batch {req.batch} does not fit at once: {s.micro_batch} per GPU"
                           f" × {s.accumulation} accumulation steps")
    return entry


def offer_entry(profile: Profile, mem: memory.Memory, offer: Offer, req: Request,
                cal: Calibration) -> dict[str, Any]:
    base = {"id": offer.id, "gpu": offer.gpu, "count": offer.count, "price_per_hour": offer.price_per_hour,
            "fits": False, "predicted_samples_per_s": None, "predicted_hours": None, "predicted_cost": None,
            "rank": None, "catalogue_gpu": None, "cost_per_million_samples": None}
    spec = catalogue.lookup(offer.gpu, offer.memory_gb)
    if spec is None or not catalogue.usable(spec):
        near = catalogue.suggest(offer.gpu)
        base["reason"] = f"unknown GPU {offer.gpu!r}" + (f" (nearest known: {', '.join(near)})" if near else "")
        return base
    g = gpu_entry(profile, mem, spec, req, cal, offer.memory_gb, offer.count, offer.link, offer.link_gbs)
    base.update(catalogue_gpu=spec.name, fits=g["fits"], reason=g["reason"], micro_batch=g["micro_batch"],
                accumulation_steps=g["accumulation_steps"], max_batch=g["max_batch"],
                scaling=g.get("scaling"), basis=g["basis"], rates=g["rates"])
    rate = g["predicted_samples_per_s"]
    if rate:
        base["predicted_samples_per_s"] = rate
        base["cost_per_million_samples"] = _r(offer.price_per_hour * 1e6 / 3600 / rate)
        total = req.total_samples()
        if total:
            hours = total / rate / 3600
            base["predicted_hours"] = _r(hours)
            base["predicted_cost"] = _r(hours * offer.price_per_hour)
    return base


def _cost_key(o: dict[str, Any]) -> tuple[float, float]:
    return (o["price_per_hour"] / o["predicted_samples_per_s"], -o["predicted_samples_per_s"])


def rank(offers: list[dict[str, Any]]) -> None:
    """Rank the offers that fit by cost to finish (= price per sample: every offer does the same
    job), the faster first on a tie; the rest get rank None."""
    fitting = sorted((o for o in offers if o["fits"]), key=_cost_key)
    for i, o in enumerate(fitting, start=1):
        o["rank"] = i


def recommend(offers: list[dict[str, Any]], gpus: list[dict[str, Any]], req: Request) -> dict[str, Any]:
    fitting = [o for o in offers if o["fits"]]
    if fitting:
        best = min(fitting, key=_cost_key)
        fastest = max(fitting, key=lambda o: o["predicted_samples_per_s"])
        cost = (f"${best['predicted_cost']:.2f} in {best['predicted_hours']:.3g} h" if best["predicted_cost"]
                else f"${best['cost_per_million_samples']:.3g} per million samples")
        why = (f"cheapest to finish of the {len(fitting)} offers that fit: {best['count']}× {best['gpu']},"
               f" {best['predicted_samples_per_s']:.4g} samples/s at ${best['price_per_hour']:g}/h → {cost}")
        if fastest is not best:
            why += (f"; fastest is {fastest['id']} ({fastest['count']}× {fastest['gpu']},"
                    f" {fastest['predicted_samples_per_s']:.4g} samples/s at ${fastest['price_per_hour']:g}/h)")
        return {"offer": best["id"], "why": why, "fastest": fastest["id"]}
    if offers:
        return {"offer": None, "why": "no offer fits: " + "; ".join(
            f"{o['id']}: {o.get('reason') or 'does not fit'}" for o in offers[:5]), "fastest": None}
    fit = [g for g in gpus if g["fits"]]
    if not fit:
        return {"offer": None, "why": "no GPU listed fits this model at this precision and optimizer",
                "fastest": None}
    top = max(fit, key=lambda g: g["predicted_samples_per_s"])
    return {"offer": None, "fastest": None,
            "why": f"no --offers given (give a CSV or vast.ai JSON to rank by cost); fastest GPU that"
                   f" fits: {top['gpu']} at {top['predicted_samples_per_s']:.4g} samples/s"}


def build(spec: ModelSpec, profile: Profile, req: Request, gpus: list[GpuSpec], offers: list[Offer],
          cal: Calibration | None = None) -> dict[str, Any]:
    """The `provision choose --json` document (docs/choose.md lists every key)."""
    cal = cal or Calibration()
    mem = memory.estimate(profile, req.precision, req.optimizer)
    gpu_rows = [gpu_entry(profile, mem, g, req, cal) for g in gpus]
    offer_rows = [offer_entry(profile, mem, o, req, cal) for o in offers]
    rank(offer_rows)
    offer_rows.sort(key=lambda o: (o["rank"] is None, o["rank"] or 0))
    half = req.precision in ("amp", "bf16")
    parts = {k: _r(v) for k, v in mem.breakdown(req.batch).items()}
    return {
        "schema": SCHEMA,
        "model": {
            "name": spec.describe(), "params": profile.params,
            "flops_per_sample": _r(profile.flops_per_sample()),
            "bytes_per_sample": _r(profile.bytes_per_sample(half)),
            "memory": {**parts, "activations_gb_per_sample": _r(mem.activations_gb_per_sample)},
        },
        "request": {"batch": req.batch, "precision": req.precision, "precision_from": req.precision_from,
                    "optimizer": req.optimizer,
                    "unit": spec.unit, "seq_len": spec.seq_len, "image_size": spec.image_size,
                    "total_samples": req.total_samples()},
        "gpus": gpu_rows,
        "offers": offer_rows,
        "recommendation": recommend(offer_rows, gpu_rows, req),
    }
