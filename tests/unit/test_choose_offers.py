"""Offers: a CSV with id,gpu,count,price_per_hour, or vast.ai's `search offers --raw` JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provision.choose import offers
from provision.errors import ConfigError

VAST = Path(__file__).parent / "data" / "vast_search_offers_raw.json"


def test_csv_with_the_required_header_and_optional_columns(tmp_path: Path) -> None:
    f = tmp_path / "o.csv"
    f.write_text("provider,id,gpu,count,price_per_hour,memory_gb,interconnect\n"
                 "runpod,a,RTX 4090,1,0.44,,\n"
                 "lambda, b ,A100-SXM4-80GB,8,14.32,80,nvlink\n\n", encoding="utf-8")
    got = offers.load(f)
    assert [(o.id, o.gpu, o.count, o.price_per_hour, o.memory_gb, o.link) for o in got] == [
        ("a", "RTX 4090", 1, 0.44, None, None), ("b", "A100-SXM4-80GB", 8, 14.32, 80.0, "nvlink")]
    assert got[1].where.endswith("o.csv:3")


@pytest.mark.parametrize(("text", "message"), [
    ("id,gpu,price_per_hour\na,T4,1\n", "lacks count"),
    ("id,gpu,count,price_per_hour\na,T4,two,1\n", "o.csv:2: count 'two' is not a number"),
    ("id,gpu,count,price_per_hour\na,T4,1,-1\n", "o.csv:2: price_per_hour must be a positive"),
    ("id,gpu,count,price_per_hour\na,T4,1.5,1\n", "whole number"),
    ("id,gpu,count,price_per_hour,interconnect\na,T4,1,1,infiniband\n", "nvlink or pcie"),
    ("id,gpu,count,price_per_hour\n", "no offers"),
])
def test_csv_errors_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "o.csv"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        offers.load(f)


def test_vast_raw_json() -> None:
    got = offers.load(VAST)
    raw = json.loads(VAST.read_text(encoding="utf-8"))
    assert len(got) == len(raw) == 10
    first = got[0]
    assert (first.id, first.gpu, first.count, first.price_per_hour) == ("14210001", "RTX 4090", 1, 0.39)
    assert first.memory_gb == pytest.approx(24564 / 1024)  # gpu_ram is MB
    assert first.link == "pcie" and first.link_gbs == 24.6
    eight = next(o for o in got if o.count == 8)
    assert eight.link == "nvlink" and eight.link_gbs == 187.0  # bw_nvlink > 0


def test_vast_json_wrapped_and_broken(tmp_path: Path) -> None:
    f = tmp_path / "v.json"
    f.write_text(json.dumps({"offers": [{"id": 1, "gpu_name": "A10", "num_gpus": 1, "dph_total": 0.3}]}))
    assert offers.load(f)[0].gpu == "A10"
    f.write_text(json.dumps([{"id": 1, "gpu_name": "A10", "num_gpus": 1}]))
    with pytest.raises(ConfigError, match=r"v.json\[0\]: lacks 'dph_total'"):
        offers.load(f)
    f.write_text("[{\"id\": 1,")
    with pytest.raises(ConfigError, match="v.json:1:.*not valid JSON"):
        offers.load(f)
