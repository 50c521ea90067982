"""`nvidia-smi --query-gpu` CSV parsing and field fallback, on real-format rows."""

from pathlib import Path

from provision.agent.nvidia import gpu_model, smi_csv

FIXTURES = Path(__file__).parent / "fixtures" / "nvidia"


def load(name):
    lines = (FIXTURES / name).read_text().splitlines()
    fields = (
        next(line for line in lines if line.startswith("# fields:"))
        .split(":", 1)[1]
        .strip()
        .split(",")
    )
    body = "\n".join(line for line in lines if not line.startswith("#"))
    return smi_csv.parse(body, fields)


def test_h100_590_row():
    result = load("h100-590.48.01.csv")
    assert result["driver_version"] == "590.48.01" and result["errors"] == []
    (gpu,) = result["gpus"]
    assert gpu["index"] == 0 and gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["compute_capability"] == "9.0"
    assert gpu["memory"] == {
        "total_mib": 81559,
        "used_mib": 0,
        "free_mib": 81081,
        "reserved_mib": 479,
    }
    assert gpu["temperature"]["gpu_c"] == 41 and gpu["temperature"]["memory_c"] == 48
    assert gpu["power"]["draw_w"] == 69.85  # power.draw wins over power.draw.instant
    assert gpu["clock_event_reasons"] == ["gpu_idle"]  # 0x...1
    assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}
    assert gpu["remapped_rows"] == {
        "correctable": 0,
        "uncorrectable": 0,
        "pending": False,
        "failure": False,
    }
    assert gpu["ecc"]["enabled"] is True and gpu["ecc"]["volatile"]["uncorrected"] == 0
    assert gpu["mig"]["enabled"] is False and gpu["fan_pct"] is None


def test_465_driver_row_with_bare_na_and_throttle_field():
    (gpu,) = load("rtx2080super-465.27.csv")["gpus"]
    assert gpu["temperature"]["memory_c"] is None  # bare "N/A", not "[N/A]"
    assert gpu["compute_capability"] == "7.5"  # not queryable on 465: from the name
    assert gpu["clock_event_reasons"] == ["gpu_idle"]  # via clocks_throttle_reasons.active
    assert gpu["ecc"]["enabled"] is None
    assert gpu["power"]["max_limit_w"] == 350.0
    assert gpu["remapped_rows"]["pending"] is None  # field not asked at all
    assert gpu["fan_pct"] == 38.0 and gpu["persistence_mode"] is False


def test_mig_a100_and_consumer_rows():
    (a100,) = load("a100-sxm4-mig-510.47.03.csv")["gpus"]
    assert a100["mig"]["enabled"] is True and a100["utilization"]["gpu_pct"] is None
    assert a100["clock_event_reasons"] == []
    (rtx,) = load("rtx4090-535.86.05.csv")["gpus"]
    assert rtx["ecc"]["enabled"] is False and rtx["ecc"]["aggregate"]["uncorrected"] is None


def test_lost_gpu_line_becomes_an_error_not_a_gpu():
    result = load("a100x4-570.86.15-lost-gpu.csv")
    assert [g["index"] for g in result["gpus"]] == [0, 1, 3]
    assert result["errors"] == [{"pci_bus_id": "0000:47:00.0", "error": "Unknown Error"}]
    assert result["gpus"][2]["clock_event_reasons"] == ["sw_power_cap"]
    assert result["gpus"][1]["power"]["draw_w"] == 348.5


def test_gpu_lost_value_in_a_row_is_recorded():
    fields = ["index", "name", "temperature.gpu"]
    (gpu,) = smi_csv.parse("0, NVIDIA A100-SXM4-80GB, [GPU is lost]\n", fields)["gpus"]
    assert gpu["temperature"]["gpu_c"] is None
    assert gpu["errors"] == ["temperature.gpu: [GPU is lost]"]


def test_rejected_field_is_swapped_for_its_old_name_or_dropped():
    message = 'Field "clocks_event_reasons.active" is not a valid field to query.\n\n'
    assert smi_csv.invalid_field(message) == "clocks_event_reasons.active"
    assert smi_csv.invalid_field("0, NVIDIA H100, 81559\n") is None
    fields = ["index", "compute_cap", "clocks_event_reasons.active"]
    assert smi_csv.next_fields(fields, "clocks_event_reasons.active") == [
        "index",
        "compute_cap",
        "clocks_throttle_reasons.active",
    ]
    assert smi_csv.next_fields(fields, "compute_cap") == ["index", "clocks_event_reasons.active"]


def test_processes_by_uuid():
    text = (
        "GPU-5e1a7c2d-90b4-4c8e-a1f3-6d2b8e9f0a17, 11327, /root/tools/memhog, 2566\n"
        "GPU-5e1a7c2d-90b4-4c8e-a1f3-6d2b8e9f0a17, 11345, ./gpu_burn, 15690\n"
        "GPU-50205d95-57b6-f541-2bcb-86c09afed564, 38310, python, [Not Supported]\n"
    )
    by_uuid = smi_csv.parse_processes(text)
    assert [p["pid"] for p in by_uuid["GPU-5e1a7c2d-90b4-4c8e-a1f3-6d2b8e9f0a17"]] == [11327, 11345]
    assert by_uuid["GPU-50205d95-57b6-f541-2bcb-86c09afed564"][0]["used_mib"] is None


def test_value_helpers():
    assert gpu_model.number("66.92 W") == 66.92
    assert gpu_model.integer("16x") == 16
    assert gpu_model.number("[Requested functionality has been deprecated]") is None
    assert gpu_model.flag("Not Active") is False and gpu_model.flag("Yes") is True
    assert gpu_model.reasons_from_bits(0x1FF)[-1] == "display_clocks_setting"
    assert gpu_model.normalize_pci_bus_id("00000000:3B:00.0") == "0000:3b:00"
    assert gpu_model.normalize_pci_bus_id("0000:3b:00") == "0000:3b:00"
    assert gpu_model.compute_capability_from_name("NVIDIA A100-SXM4-80GB") == "8.0"
    assert gpu_model.compute_capability_from_name("NVIDIA A10") == "8.6"
    assert gpu_model.compute_capability_from_name("NVIDIA H200") == "9.0"
    assert gpu_model.compute_capability_from_name("NVIDIA L40S") == "8.9"
    assert gpu_model.compute_capability_from_name("Some Future GPU") is None
