"""Ranking: the recommendation is the truly cheapest to finish of the offers that fit (brute
force over the offers' own predictions), accumulation when only a smaller batch fits,
multi-GPU scaling, calibration from provision's own measurements."""

from __future__ import annotations

import random

import pytest

from provision.choose import calibrate, catalogue, graph, models, plan, speed
from provision.choose.offers import Offer

NAMES = ["RTX 4090", "A100-SXM4-80GB", "H100 SXM", "T4", "A10", "L4", "RTX 3090", "Tesla V100-SXM2-16GB",
         "RTX 6000Ada", "NVIDIA A100 80GB PCIe"]


@pytest.fixture(scope="module")
def bert() -> tuple[models.ModelSpec, graph.Profile]:
    spec = models.resolve("bert-base", seq_len=128)
    return spec, graph.measure(spec)


def test_the_recommended_offer_is_the_cheapest_to_finish_among_those_that_fit(bert) -> None:
    spec, profile = bert
    rng = random.Random(24)
    for trial in range(8):
        offers = [Offer(f"o{i}", rng.choice(NAMES), rng.choice([1, 1, 2, 4, 8]), round(rng.uniform(0.1, 30), 2))
                  for i in range(12)]
        req = plan.Request(batch=rng.choice([32, 256, 4096]), precision="amp", optimizer="adamw",
                           samples=1_000_000, epochs=rng.choice([1, 3]))
        doc = plan.build(spec, profile, req, [], offers)
        fit = [o for o in doc["offers"] if o["fits"]]
        assert fit, trial
        costs = {o["id"]: req.total_samples() / o["predicted_samples_per_s"] / 3600 * o["price_per_hour"] for o in fit}
        assert doc["recommendation"]["offer"] == min(costs, key=costs.get)
        assert [o["rank"] for o in fit] == list(range(1, len(fit) + 1))
        assert all(o["rank"] is None for o in doc["offers"] if not o["fits"])
        fastest = max(fit, key=lambda o: o["predicted_samples_per_s"])
        assert doc["recommendation"]["fastest"] == fastest["id"]
        for o in fit:
            assert o["predicted_cost"] == pytest.approx(costs[o["id"]], rel=1e-3)


def test_offers_that_do_not_fit_say_why(bert) -> None:
    spec = models.resolve("llama-2-7b", seq_len=256)
    profile = graph.measure(spec)
    offers = [Offer("big", "H100 SXM", 1, 2.5), Offer("x", "Voodoo 5", 1, 0.1)]
    doc = plan.build(spec, profile, plan.Request(batch=8, steps=100), [], offers)
    reasons = {o["id"]: o["reason"] for o in doc["offers"]}
    assert "model states alone need" in reasons["big"]
    assert "unknown GPU 'Voodoo 5'" in reasons["x"]
    assert doc["recommendation"]["offer"] is None and "no offer fits" in doc["recommendation"]["why"]


def test_gradient_accumulation_when_only_a_smaller_batch_fits(bert) -> None:
    spec, profile = bert
    t4 = catalogue.require("T4")
    doc = plan.build(spec, profile, plan.Request(batch=2048, precision="amp", optimizer="adamw"), [t4], [])
    g = doc["gpus"][0]
    assert g["fits"] and g["micro_batch"] <= g["max_batch"] < 2048
    assert g["accumulation_steps"] == -(-2048 // g["max_batch"])  # as few steps as fit ...
    assert g["micro_batch"] * g["accumulation_steps"] >= 2048 > (g["micro_batch"] - 1) * g["accumulation_steps"]
    assert "accumulation steps" in g["reason"]


def test_multi_gpu_scales_below_linear_and_nvlink_beats_pcie(bert) -> None:
    _, profile = bert
    a100 = catalogue.require("A100-SXM4-80GB")
    one = speed.step(profile, a100, "amp", "adamw", 256, 256)
    pcie = speed.step(profile, a100, "amp", "adamw", 256 * 8, 256, count=8, link="pcie", link_gbs=10)
    nvlink = speed.step(profile, a100, "amp", "adamw", 256 * 8, 256, count=8, link="nvlink", link_gbs=200)
    assert one.samples_per_s < pcie.samples_per_s < nvlink.samples_per_s <= 8 * one.samples_per_s
    assert "pcie" in pcie.scaling and "nvlink" in nvlink.scaling


def test_bf16_needs_compute_capability_8(bert) -> None:
    spec, profile = bert
    doc = plan.build(spec, profile, plan.Request(batch=32, precision="bf16"), [catalogue.require("T4")], [])
    assert not doc["gpus"][0]["fits"] and "no bf16" in doc["gpus"][0]["reason"]


def test_calibration_from_measured_reports_changes_the_prediction_and_says_so(bert) -> None:
    spec, profile = bert
    a10 = catalogue.require("A10")
    reports = [{"prediction": {"gpu": a10.name, "checks": [{"ratio": 0.5}, {"ratio": 0.7}, {"ratio": 0.6}]}},
               {"prediction": {"gpu": "NVIDIA L4", "checks": [{"ratio": "bad"}]}}, {"bench": {}}]
    cal = calibrate.factors_from(reports)
    assert cal.factors == {a10.name: (0.6, 3)}
    plain = plan.build(spec, profile, plan.Request(batch=32), [a10], [])["gpus"][0]
    tuned = plan.build(spec, profile, plan.Request(batch=32), [a10], [], cal)["gpus"][0]
    assert tuned["predicted_samples_per_s"] == pytest.approx(0.6 * plain["predicted_samples_per_s"], rel=1e-3)
    assert "calibrated by 3" in tuned["basis"] and "datasheet" in plain["basis"]
