"""GPU names as people and providers write them → one catalogue row; unknown → nearest names."""

from __future__ import annotations

import pytest

from provision.choose import catalogue
from provision.errors import ConfigError


@pytest.mark.parametrize(("written", "row"), [
    ("A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe"),
    ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-16GB"),
    ("RTX 4090", "NVIDIA GeForce RTX 4090"),
    ("rtx4090", None),  # no separator at all: too far from any model word
    ("RTX 6000Ada", "NVIDIA RTX 6000 Ada Generation"),
    ("H100 SXM", "NVIDIA H100 80GB HBM3"),
    ("h100 pcie", "NVIDIA H100 PCIe"),
    ("A10", "NVIDIA A10"),
    ("L4", "NVIDIA L4"),
    ("T4", "Tesla T4"),
    ("nvidia  geforce rtx 3090", "NVIDIA GeForce RTX 3090"),
    ("Q RTX 8000", "Quadro RTX 8000"),
    ("RTX 3080Ti", "NVIDIA GeForce RTX 3080 Ti"),
])
def test_names_people_write(written: str, row: str | None) -> None:
    spec = catalogue.lookup(written)
    assert (spec.name if spec else None) == row


def test_memory_picks_the_sku_when_the_name_does_not_say() -> None:
    assert catalogue.lookup("A100 SXM4", memory_gb=80).name == "NVIDIA A100-SXM4-80GB"
    assert catalogue.lookup("A100 SXM4", memory_gb=40).name == "NVIDIA A100-SXM4-40GB"
    assert catalogue.lookup("Tesla V100", memory_gb=32).vram_gb == 32


def test_an_unknown_name_is_an_error_listing_the_nearest_known() -> None:
    with pytest.raises(ConfigError) as err:
        catalogue.require("RTX 4900")
    assert "RTX 4900" in str(err.value) and "nearest known" in str(err.value)
    assert "4090" in str(err.value)


def test_every_default_gpu_has_what_a_prediction_needs() -> None:
    gpus = catalogue.default_gpus()
    assert len(gpus) > 30
    assert all(g.vram_gb and g.bw_gbs and g.fp32 for g in gpus)
