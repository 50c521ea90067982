"""Parse `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` into GPU records.

The last-resort source (used when neither NVML nor the XML works). Field names differ across
drivers: `clocks_event_reasons.*` exists from 535, older drivers only know
`clocks_throttle_reasons.*`; `compute_cap`, `memory.reserved`, `remapped_rows.*` and
`power.draw.instant` are newer still. nvidia-smi rejects the whole query when one field is
unknown (`Field "x" is not a valid field to query.`), so the caller retries without it
(`next_fields`). Values: `[N/A]`, `[Not Supported]`, `N/A` and, on 580+,
`[Requested functionality has been deprecated]` all mean "unknown".
"""

import csv
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from provision.agent.nvidia.gpu_model import (
    clean,
    compute_capability_from_name,
    flag,
    integer,
    is_gpu_error,
    new_gpu,
    number,
    reasons_from_bits,
)

Setter = Callable[[Dict[str, Any], str], None]


def _set(section: Optional[str], key: str, convert: Callable[[str], Any]) -> Setter:
    def setter(gpu: Dict[str, Any], value: str) -> None:
        target = gpu if section is None else gpu[section]
        target[key] = convert(value)

    return setter


def _set_ecc(scope: str, key: str) -> Setter:
    def setter(gpu: Dict[str, Any], value: str) -> None:
        gpu["ecc"][scope][key] = integer(value)

    return setter


def _set_reasons(gpu: Dict[str, Any], value: str) -> None:
    text = clean(value)
    if text is not None:
        try:
            gpu["clock_event_reasons"] = reasons_from_bits(int(text, 16))
        except ValueError:
            pass


def _set_draw(gpu: Dict[str, Any], value: str) -> None:
    # power.draw is [N/A] on some 580+ boards that still report power.draw.instant.
    if gpu["power"]["draw_w"] is None:
        gpu["power"]["draw_w"] = number(value)


# (field, setter) in query order. The index comes first so a row always says which GPU it is.
FIELDS: List[Tuple[str, Setter]] = [
    ("index", _set(None, "index", integer)),
    ("name", _set(None, "name", clean)),
    ("uuid", _set(None, "uuid", clean)),
    ("pci.bus_id", _set(None, "pci_bus_id", clean)),
    ("compute_cap", _set(None, "compute_capability", clean)),
    ("memory.total", _set("memory", "total_mib", integer)),
    ("memory.used", _set("memory", "used_mib", integer)),
    ("memory.free", _set("memory", "free_mib", integer)),
    ("memory.reserved", _set("memory", "reserved_mib", integer)),
    ("utilization.gpu", _set("utilization", "gpu_pct", number)),
    ("utilization.memory", _set("utilization", "memory_pct", number)),
    ("temperature.gpu", _set("temperature", "gpu_c", number)),
    ("temperature.memory", _set("temperature", "memory_c", number)),
    ("power.draw", _set_draw),
    ("power.draw.instant", _set_draw),
    ("power.limit", _set("power", "limit_w", number)),
    ("power.default_limit", _set("power", "default_limit_w", number)),
    ("power.max_limit", _set("power", "max_limit_w", number)),
    ("clocks.current.graphics", _set("clocks", "graphics_mhz", integer)),
    ("clocks.current.sm", _set("clocks", "sm_mhz", integer)),
    ("clocks.current.memory", _set("clocks", "memory_mhz", integer)),
    ("clocks.max.sm", _set("clocks", "max_sm_mhz", integer)),
    ("clocks.max.memory", _set("clocks", "max_memory_mhz", integer)),
    ("pcie.link.gen.current", _set("pcie", "gen_current", integer)),
    ("pcie.link.gen.max", _set("pcie", "gen_max", integer)),
    ("pcie.link.width.current", _set("pcie", "width_current", integer)),
    ("pcie.link.width.max", _set("pcie", "width_max", integer)),
    ("ecc.mode.current", _set("ecc", "enabled", flag)),
    ("ecc.mode.pending", _set("ecc", "pending_enabled", flag)),
    ("ecc.errors.corrected.volatile.total", _set_ecc("volatile", "corrected")),
    ("ecc.errors.uncorrected.volatile.total", _set_ecc("volatile", "uncorrected")),
    ("ecc.errors.corrected.aggregate.total", _set_ecc("aggregate", "corrected")),
    ("ecc.errors.uncorrected.aggregate.total", _set_ecc("aggregate", "uncorrected")),
    ("retired_pages.single_bit_ecc.count", _set("retired_pages", "single_bit", integer)),
    ("retired_pages.double_bit.count", _set("retired_pages", "double_bit", integer)),
    ("retired_pages.pending", _set("retired_pages", "pending", flag)),
    ("remapped_rows.correctable", _set("remapped_rows", "correctable", integer)),
    ("remapped_rows.uncorrectable", _set("remapped_rows", "uncorrectable", integer)),
    ("remapped_rows.pending", _set("remapped_rows", "pending", flag)),
    ("remapped_rows.failure", _set("remapped_rows", "failure", flag)),
    ("clocks_event_reasons.active", _set_reasons),
    ("mig.mode.current", _set("mig", "enabled", flag)),
    ("mig.mode.pending", _set("mig", "pending_enabled", flag)),
    ("persistence_mode", _set(None, "persistence_mode", flag)),
    ("pstate", _set(None, "performance_state", clean)),
    ("fan.speed", _set(None, "fan_pct", number)),
    ("driver_version", lambda gpu, value: None),  # read per row by parse(), same on every GPU
]
_SETTERS = dict(FIELDS)
_SETTERS["clocks_throttle_reasons.active"] = _set_reasons
# When a driver rejects a field, try its older spelling before dropping it.
OLDER_NAMES = {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}
DEFAULT_FIELDS = [name for name, _ in FIELDS]

_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')
_NO_HANDLE = re.compile(r"Unable to determine the device handle for GPU\s*([0-9A-Fa-f:.]+):\s*(.*)")

PROCESS_FIELDS = ["gpu_uuid", "pid", "process_name", "used_memory"]


def invalid_field(output: str) -> Optional[str]:
    """The field nvidia-smi refused, if that is why the query failed."""
    match = _INVALID_FIELD.search(output)
    return match.group(1) if match else None


def next_fields(fields: List[str], rejected: str) -> List[str]:
    """The field list to retry with after nvidia-smi rejected one field."""
    older = OLDER_NAMES.get(rejected)
    return [
        older if name == rejected and older else name
        for name in fields
        if name != rejected or older
    ]


def parse(text: str, fields: List[str]) -> Dict[str, Any]:
    """{"driver_version", "gpus": [...], "errors": [...]} from noheader,nounits CSV output of `fields`.

    Lines that are not rows (nvidia-smi prints "Unable to determine the device handle for
    GPU0000:01:00.0: GPU is lost" among the rows when a GPU fails) become errors, not GPUs.
    """
    gpus: List[Dict[str, Any]] = []
    errors: List[Dict[str, Any]] = []
    driver = None
    for line in text.splitlines():
        if not line.strip():
            continue
        lost = _NO_HANDLE.search(line)
        if lost:
            errors.append({"pci_bus_id": lost.group(1).rstrip(":"), "error": lost.group(2).strip()})
            continue
        row = next(csv.reader([line], skipinitialspace=True))
        if len(row) != len(fields):
            errors.append({"pci_bus_id": None, "error": line.strip()})
            continue
        gpu = new_gpu("nvidia-smi-csv")
        for name, value in zip(fields, row):  # noqa: B905 (strict= is 3.10+; lengths checked above)
            if name == "driver_version":
                driver = clean(value)
            setter = _SETTERS.get(name)
            if setter is not None:
                setter(gpu, value)
            if is_gpu_error(value):
                gpu["errors"].append("%s: %s" % (name, value.strip()))
        if gpu["compute_capability"] is None:
            gpu["compute_capability"] = compute_capability_from_name(gpu["name"])
        gpus.append(gpu)
    return {"driver_version": driver, "gpus": gpus, "errors": errors}


def parse_processes(text: str) -> Dict[str, List[Dict[str, Any]]]:
    """uuid -> processes, from `--query-compute-apps=gpu_uuid,pid,process_name,used_memory`."""
    by_uuid: Dict[str, List[Dict[str, Any]]] = {}
    for line in text.splitlines():
        row = next(csv.reader([line], skipinitialspace=True), [])
        if len(row) != len(PROCESS_FIELDS):
            continue
        uuid, pid, name, used = row
        by_uuid.setdefault(uuid.strip(), []).append(
            {"pid": integer(pid), "name": clean(name), "type": "C", "used_mib": integer(used)}
        )
    return by_uuid
