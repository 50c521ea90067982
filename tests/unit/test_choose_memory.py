"""Memory from the model's own graph: parameter counts, states by optimizer and precision,
activations measured from saved tensors, the standard fit cases."""

from __future__ import annotations

import pytest

from provision.choose import catalogue, graph, memory, models


@pytest.fixture(scope="module")
def gpt2() -> graph.Profile:
    return graph.measure(models.resolve("gpt2", seq_len=1024))


@pytest.fixture(scope="module")
def llama7b() -> graph.Profile:
    return graph.measure(models.resolve("llama-2-7b", seq_len=512))


@pytest.mark.parametrize(("name", "params"), [
    ("resnet18", 11_689_512),  # torchvision's counts
    ("gpt2", 124_439_808),  # HF gpt2 (LM head tied)
    ("llama-2-7b", 6_738_415_616),  # Meta's 6.74B
])
def test_parameter_counts_match_the_published_models(name: str, params: int) -> None:
    import torch

    with torch.device("meta"):
        model = models.resolve(name).build()
    assert sum(p.numel() for p in model.parameters()) == params


def test_a_7b_model_with_adamw_does_not_fit_one_80gb_card(llama7b: graph.Profile) -> None:
    a100 = catalogue.require("A100-SXM4-80GB")
    for precision in memory.PRECISIONS:
        mem = memory.estimate(llama7b, precision, "adamw")
        assert mem.max_batch(float(a100.vram_gb)) == 0, precision
        assert mem.total_gb(1) > 80
    # the states alone: 16 bytes per parameter under AMP (fp32 master, grads, two Adam moments)
    mem = memory.estimate(llama7b, "amp", "adamw")
    assert mem.weights_gb + mem.grads_gb + mem.optimizer_gb == pytest.approx(6_738_415_616 * 16 / 2**30, rel=1e-6)


def test_gpt2_small_batch_8_seq_1024_with_amp_fits_24gb(gpt2: graph.Profile) -> None:
    mem = memory.estimate(gpt2, "amp", "adamw")
    assert mem.total_gb(8) <= 24
    assert mem.max_batch(24) >= 8
    # ... and the activations are the bulk of it: measured, not a constant
    assert mem.activations_gb_per_sample * 8 > mem.weights_gb + mem.grads_gb + mem.optimizer_gb
    assert memory.estimate(gpt2, "fp32", "adamw").total_gb(32) > 24  # fp32 at 4× the batch does not


def test_activations_come_from_the_graph_and_scale_with_sequence_length(gpt2: graph.Profile) -> None:
    short = graph.measure(models.resolve("gpt2", seq_len=256))
    ratio = gpt2.saved_fp_bytes_per_sample / short.saved_fp_bytes_per_sample
    assert 4 < ratio < 16  # linear parts ×4, the attention scores ×16
    assert gpt2.flops_per_sample() > 3.9 * short.flops_per_sample()


def test_optimizer_states_by_optimizer_and_precision(gpt2: graph.Profile) -> None:
    adam = memory.estimate(gpt2, "fp32", "adam")
    sgd = memory.estimate(gpt2, "fp32", "sgd")
    bf16 = memory.estimate(gpt2, "bf16", "adamw")
    assert adam.optimizer_gb == pytest.approx(2 * sgd.optimizer_gb)
    assert bf16.weights_gb == pytest.approx(adam.weights_gb / 2)
    assert bf16.activations_gb_per_sample == pytest.approx(adam.activations_gb_per_sample / 2, rel=0.05)
