"""`nvidia-smi -q -x` parsing against real-format outputs of several GPUs and drivers."""

from pathlib import Path

import pytest

from provision.agent.nvidia import smi_xml
from provision.agent.nvidia.gpu_model import new_gpu

FIXTURES = Path(__file__).parent / "fixtures" / "nvidia"


def parse(name):
    return smi_xml.parse((FIXTURES / name).read_text())


def test_h100_driver_590_event_reasons_new_ecc_layout_and_processes():
    log = parse("h100-sxm-590.48.01.xml")
    assert (log["driver_version"], log["cuda_version"], log["attached_gpus"]) == (
        "590.48.01",
        "13.1",
        1,
    )
    (gpu,) = log["gpus"]
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["pci_bus_id"] == "00000000:00:09.0"
    assert gpu["architecture"] == "Hopper"
    assert gpu["compute_capability"] == "9.0"  # not in the XML: from the name table
    assert gpu["memory"] == {
        "total_mib": 81559,
        "used_mib": 19818,
        "free_mib": 61263,
        "reserved_mib": 479,
    }
    assert gpu["utilization"] == {"gpu_pct": 100.0, "memory_pct": 11.0}
    # 590 has no <power_draw>; the average is the reading, the limit is current_power_limit.
    assert gpu["power"] == {
        "draw_w": 629.45,
        "limit_w": 700.0,
        "default_limit_w": 700.0,
        "max_limit_w": 700.0,
    }
    # T.Limit thresholds are offsets (-2 C, -8 C): only the margin may be reported.
    assert gpu["temperature"]["gpu_c"] == 59 and gpu["temperature"]["margin_c"] == 26
    assert gpu["temperature"]["slowdown_c"] is None and gpu["temperature"]["shutdown_c"] is None
    assert gpu["pcie"] == {
        "gen_current": 5,
        "gen_max": 5,
        "width_current": 16,
        "width_max": 16,
        "replay_counter": 9,
    }
    assert gpu["ecc"]["enabled"] is True
    assert gpu["ecc"]["volatile"] == {"corrected": 0, "uncorrected": 0}
    assert gpu["remapped_rows"] == {
        "correctable": 0,
        "uncorrectable": 0,
        "pending": False,
        "failure": False,
    }
    assert gpu["retired_pages"] == {
        "single_bit": None,
        "double_bit": None,
        "pending": None,
    }  # N/A on Hopper
    assert gpu["clock_event_reasons"] == []
    assert gpu["mig"] == {"enabled": False, "pending_enabled": False, "devices": None}
    assert gpu["clocks"]["sm_mhz"] == 1980 and gpu["clocks"]["max_memory_mhz"] == 2619
    assert [p["pid"] for p in gpu["processes"]] == [11327, 11328, 11345]
    assert gpu["processes"][2] == {
        "pid": 11345,
        "name": "./gpu_burn",
        "type": "C",
        "used_mib": 15690,
    }
    assert gpu["errors"] == []


def test_rtx4090_driver_535_consumer_card_with_na_fields():
    (gpu,) = parse("rtx4090-535.86.05.xml")["gpus"]
    assert gpu["compute_capability"] == "8.9"
    assert gpu["ecc"]["enabled"] is False
    assert gpu["ecc"]["volatile"] == {"corrected": None, "uncorrected": None}  # N/A, not 0
    assert gpu["temperature"]["memory_c"] is None
    assert gpu["clock_event_reasons"] == ["gpu_idle"]  # value split over two lines in the file too
    assert gpu["pcie"]["gen_current"] == 1 and gpu["pcie"]["gen_max"] == 3
    assert gpu["power"]["draw_w"] == 26.84 and gpu["power"]["limit_w"] == 450.0
    assert gpu["mig"]["enabled"] is None
    assert gpu["fan_pct"] == 0.0
    assert gpu["processes"] == []


def test_a100_mig_driver_510_throttle_reasons_and_na_utilization():
    (gpu,) = parse("a100-sxm4-mig-510.47.03.xml")["gpus"]
    assert gpu["mig"] == {"enabled": True, "pending_enabled": True, "devices": 2}
    assert gpu["utilization"] == {"gpu_pct": None, "memory_pct": None}  # not reported under MIG
    assert gpu["clock_event_reasons"] == []  # <clocks_throttle_reasons>, all Not Active
    assert gpu["remapped_rows"]["pending"] is None  # <remapped_rows>N/A</remapped_rows>
    assert gpu["ecc"]["volatile"] == {"corrected": None, "uncorrected": None}
    assert gpu["ecc"]["aggregate"] == {"corrected": 0, "uncorrected": 0}
    # pre-535 absolute thresholds are read as such
    t = gpu["temperature"]
    assert (t["slowdown_c"], t["shutdown_c"], t["max_operating_c"], t["margin_c"]) == (
        89,
        92,
        85,
        None,
    )
    assert gpu["power"]["limit_w"] == 400.0 and gpu["persistence_mode"] is False


def test_driver_580_fragment_power_falls_back_to_instant_and_padded_values():
    (gpu,) = parse("rtx-pro-6000-580-fragment.xml")["gpus"]
    assert gpu["power"]["draw_w"] == 66.84
    assert gpu["fan_pct"] == 40.0 and gpu["temperature"]["gpu_c"] == 37.0
    assert gpu["compute_capability"] == "12.0"
    assert gpu["pci_bus_id"] == "00000000:01:00.0"  # from the gpu id attribute


def test_eight_v100s_driver_460_old_ecc_layout_in_index_order():
    log = parse("v100s-8gpu-460.73.01.xml")
    gpus = log["gpus"]
    assert log["driver_version"] == "460.73.01" and len(gpus) == 8 == log["attached_gpus"]
    assert [g["index"] for g in gpus] == list(range(8))
    assert gpus[7]["pci_bus_id"] == "00000000:00:14.0"
    assert len({g["uuid"] for g in gpus}) == 8
    assert gpus[3]["clock_event_reasons"] == ["hw_slowdown", "hw_thermal_slowdown"]
    assert gpus[4]["clock_event_reasons"] == ["sw_power_cap"]
    assert gpus[5]["ecc"]["volatile"] == {"corrected": 0, "uncorrected": 1}
    assert gpus[5]["ecc"]["aggregate"] == {"corrected": 3, "uncorrected": 1}
    assert gpus[5]["retired_pages"] == {"single_bit": 0, "double_bit": 1, "pending": True}
    assert gpus[6]["pcie"]["width_current"] == 8
    assert gpus[0]["processes"][0]["used_mib"] == 31685
    assert all(g["compute_capability"] == "7.0" for g in gpus)


def test_every_source_record_has_the_same_keys():
    expected = new_gpu("x").keys()
    for name in ("h100-sxm-590.48.01.xml", "rtx4090-535.86.05.xml", "a100-sxm4-mig-510.47.03.xml"):
        for gpu in parse(name)["gpus"]:
            assert gpu.keys() == expected


def test_gpu_lost_values_become_errors():
    text = (FIXTURES / "rtx4090-535.86.05.xml").read_text()
    text = text.replace("<gpu_temp>40 C</gpu_temp>", "<gpu_temp>GPU is lost</gpu_temp>")
    (gpu,) = smi_xml.parse(text)["gpus"]
    assert gpu["temperature"]["gpu_c"] is None
    assert gpu["errors"] == ["gpu_temp: GPU is lost"]


@pytest.mark.parametrize(
    "output",
    [
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n",
        '<?xml version="1.0" ?>\n<nvidia_smi_log><gpu id="1"><product_name>x</gpu>',
    ],
)
def test_not_xml_is_a_clear_error(output):
    with pytest.raises(smi_xml.SmiXmlError) as info:
        smi_xml.parse(output)
    assert "nvidia" in str(info.value).lower()
