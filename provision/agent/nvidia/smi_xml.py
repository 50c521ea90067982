"""Parse `nvidia-smi -q -x` into GPU records.

The XML changed across drivers and this parser reads every form seen in real outputs:
- `clocks_throttle_reasons/clocks_throttle_reason_*` (up to 535) vs
  `clocks_event_reasons/clocks_event_reason_*` (535+);
- `power_readings/power_limit` (up to 530) vs `gpu_power_readings/current_power_limit` (535+),
  where 580+ may print `power_draw` N/A and give `average_power_draw`/`instant_power_draw`;
- ECC counts as `single_bit/total` + `double_bit/total` (Pascal/Volta) vs `sram_*`/`dram_*`
  (Ampere+; 550+ split `sram_uncorrectable` into `_parity` and `_secded`);
- absolute temperature thresholds (`gpu_temp_slow_threshold`) vs T.Limit-relative ones (535+:
  `gpu_temp_tlimit` is the margin left, the thresholds are offsets and must not be read as
  absolute temperatures);
- `remapped_rows` as "N/A" text (pre-Ampere, or MIG/VM) vs its children.
"""

import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Optional

from provision.agent.nvidia.gpu_model import (
    add_counts,
    clean,
    compute_capability_from_name,
    flag,
    integer,
    is_gpu_error,
    new_gpu,
    number,
)


class SmiXmlError(ValueError):
    pass


def parse(text: str) -> Dict[str, Any]:
    """{"driver_version", "cuda_version", "gpus": [record, ...]} from `nvidia-smi -q -x` output."""
    start = text.find("<nvidia_smi_log")
    if start < 0:
        raise SmiXmlError("no <nvidia_smi_log> in nvidia-smi output: %r" % text.strip()[:200])
    body = text[start:]  # drops the <?xml?> and DOCTYPE lines; the DTD is never fetched
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise SmiXmlError("nvidia-smi XML does not parse: %s" % exc) from exc
    gpus = [_gpu(element, index) for index, element in enumerate(root.findall("gpu"))]
    return {
        "driver_version": clean(root.findtext("driver_version")),
        "cuda_version": clean(root.findtext("cuda_version")),
        "attached_gpus": integer(root.findtext("attached_gpus")),
        "gpus": gpus,
    }


def _text(element: Optional[ET.Element], path: str) -> Optional[str]:
    if element is None:
        return None
    return element.findtext(path)


def _first(element: ET.Element, *paths: str) -> Optional[str]:
    """The first of several paths that holds a real value (fields moved between drivers)."""
    for path in paths:
        value = element.findtext(path)
        if clean(value) is not None:
            return value
    return None


def _gpu(element: ET.Element, index: int) -> Dict[str, Any]:
    gpu = new_gpu("nvidia-smi-xml")
    # nvidia-smi lists GPUs in index (PCI bus) order; the XML has no index field.
    gpu["index"] = index
    gpu["name"] = clean(element.findtext("product_name"))
    gpu["uuid"] = clean(element.findtext("uuid"))
    gpu["pci_bus_id"] = clean(_text(element.find("pci"), "pci_bus_id")) or element.get("id")
    gpu["architecture"] = clean(element.findtext("product_architecture"))
    gpu["compute_capability"] = clean(
        element.findtext("compute_cap")
    ) or compute_capability_from_name(gpu["name"])
    gpu["persistence_mode"] = flag(element.findtext("persistence_mode"))
    gpu["performance_state"] = clean(element.findtext("performance_state"))
    gpu["fan_pct"] = number(element.findtext("fan_speed"))

    memory = element.find("fb_memory_usage")
    gpu["memory"].update(
        total_mib=integer(_text(memory, "total")),
        used_mib=integer(_text(memory, "used")),
        free_mib=integer(_text(memory, "free")),
        reserved_mib=integer(_text(memory, "reserved")),
    )
    utilization = element.find("utilization")
    gpu["utilization"].update(
        gpu_pct=number(_text(utilization, "gpu_util")),
        memory_pct=number(_text(utilization, "memory_util")),
    )
    _temperature(gpu, element.find("temperature"))
    _power(gpu, element)
    clocks, max_clocks = element.find("clocks"), element.find("max_clocks")
    gpu["clocks"].update(
        graphics_mhz=integer(_text(clocks, "graphics_clock")),
        sm_mhz=integer(_text(clocks, "sm_clock")),
        memory_mhz=integer(_text(clocks, "mem_clock")),
        max_sm_mhz=integer(_text(max_clocks, "sm_clock")),
        max_memory_mhz=integer(_text(max_clocks, "mem_clock")),
    )
    link = element.find("pci/pci_gpu_link_info")
    gpu["pcie"].update(
        gen_current=integer(_text(link, "pcie_gen/current_link_gen")),
        gen_max=integer(_text(link, "pcie_gen/max_link_gen")),
        width_current=integer(_text(link, "link_widths/current_link_width")),
        width_max=integer(_text(link, "link_widths/max_link_width")),
        replay_counter=integer(_text(element.find("pci"), "replay_counter")),
    )
    _ecc(gpu, element)
    retired = element.find("retired_pages")
    if retired is not None:
        gpu["retired_pages"].update(
            single_bit=integer(retired.findtext("multiple_single_bit_retirement/retired_count")),
            double_bit=integer(retired.findtext("double_bit_retirement/retired_count")),
            # "pending_blacklist" is the older name of the same flag
            pending=flag(_first(retired, "pending_retirement", "pending_blacklist")),
        )
    remapped = element.find("remapped_rows")
    if remapped is not None and len(remapped):
        gpu["remapped_rows"].update(
            correctable=integer(remapped.findtext("remapped_row_corr")),
            uncorrectable=integer(remapped.findtext("remapped_row_unc")),
            pending=flag(remapped.findtext("remapped_row_pending")),
            failure=flag(remapped.findtext("remapped_row_failure")),
        )
    gpu["clock_event_reasons"] = _clock_event_reasons(element)
    mig = element.find("mig_mode")
    mig_devices = element.findall("mig_devices/mig_device")
    gpu["mig"].update(
        enabled=flag(_text(mig, "current_mig")),
        pending_enabled=flag(_text(mig, "pending_mig")),
        devices=len(mig_devices) if gpu_mig_enabled(mig) else None,
    )
    gpu["processes"] = [_process(p) for p in element.findall("processes/process_info")]
    gpu["errors"] = _errors(element)
    return gpu


def gpu_mig_enabled(mig: Optional[ET.Element]) -> bool:
    return flag(_text(mig, "current_mig")) is True


def _temperature(gpu: Dict[str, Any], temperature: Optional[ET.Element]) -> None:
    if temperature is None:
        return
    values = gpu["temperature"]
    values["gpu_c"] = number(temperature.findtext("gpu_temp"))
    values["memory_c"] = number(temperature.findtext("memory_temp"))
    if temperature.find("gpu_temp_tlimit") is not None:
        # 535+: thresholds are offsets from T.Limit; only the margin is meaningful on its own.
        values["margin_c"] = number(temperature.findtext("gpu_temp_tlimit"))
    else:
        values["slowdown_c"] = number(temperature.findtext("gpu_temp_slow_threshold"))
        values["shutdown_c"] = number(temperature.findtext("gpu_temp_max_threshold"))
        values["max_operating_c"] = number(temperature.findtext("gpu_temp_max_gpu_threshold"))


def _power(gpu: Dict[str, Any], element: ET.Element) -> None:
    readings = element.find("gpu_power_readings")
    if readings is None:
        readings = element.find("power_readings")
    if readings is None:
        return
    gpu["power"].update(
        draw_w=number(_first(readings, "power_draw", "average_power_draw", "instant_power_draw")),
        limit_w=number(
            _first(readings, "current_power_limit", "enforced_power_limit", "power_limit")
        ),
        default_limit_w=number(readings.findtext("default_power_limit")),
        max_limit_w=number(readings.findtext("max_power_limit")),
    )


def _ecc(gpu: Dict[str, Any], element: ET.Element) -> None:
    mode = element.find("ecc_mode")
    gpu["ecc"]["enabled"] = flag(_text(mode, "current_ecc"))
    gpu["ecc"]["pending_enabled"] = flag(_text(mode, "pending_ecc"))
    errors = element.find("ecc_errors")
    if errors is None:
        return
    for scope in ("volatile", "aggregate"):
        counts = errors.find(scope)
        if counts is None:
            continue
        if counts.find("single_bit") is not None:  # Pascal/Volta layout
            corrected = integer(counts.findtext("single_bit/total"))
            uncorrected = integer(counts.findtext("double_bit/total"))
        else:
            corrected = add_counts(
                number(counts.findtext(tag)) for tag in ("sram_correctable", "dram_correctable")
            )
            uncorrected = add_counts(
                number(counts.findtext(tag))
                for tag in (
                    "sram_uncorrectable",
                    "sram_uncorrectable_parity",
                    "sram_uncorrectable_secded",
                    "dram_uncorrectable",
                )
            )
        gpu["ecc"][scope] = {"corrected": corrected, "uncorrected": uncorrected}


def _clock_event_reasons(element: ET.Element) -> Optional[List[str]]:
    for block, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),
    ):
        reasons = element.find(block)
        if reasons is None:
            continue
        active = []
        known = False
        for child in reasons:
            state = flag(child.text)
            if state is None:
                continue
            known = True
            if state:
                name = child.tag[len(prefix) :] if child.tag.startswith(prefix) else child.tag
                active.append(name)
        return active if known else None
    return None


def _process(element: ET.Element) -> Dict[str, Any]:
    return {
        "pid": integer(element.findtext("pid")),
        "name": clean(element.findtext("process_name")),
        "type": clean(element.findtext("type")),
        "used_mib": integer(element.findtext("used_memory")),
    }


def _errors(element: ET.Element) -> List[str]:
    """Fields where the driver answered "GPU is lost" / "Unknown Error" instead of a value."""
    found = []
    for node in element.iter():
        if node.text and is_gpu_error(node.text):
            found.append("%s: %s" % (node.tag, " ".join(node.text.split())))
    return found
