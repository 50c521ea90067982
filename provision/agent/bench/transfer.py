"""Host<->device copy bandwidth, pageable vs pinned, against the PCIe link's theoretical rate.

Pageable copies go through a driver staging buffer; pinned ones DMA directly, which is why a
DataLoader with pin_memory=True feeds a GPU faster. Copies are timed with CUDA events on the
current stream. The link's generation and width come from the request's facts or NVML; the
current link drops to a low generation when idle, so it is read right after the copies.
"""

from provision.agent.bench import nvml
from provision.agent.bench.common import Skip, cuda_available, import_torch, sig
from provision.agent.bench.timing import cuda_event_times, median

# GB/s per lane per direction after line encoding: gen1/2 use 8b/10b, gen3-5 128b/130b,
# gen6 PAM4 with FLIT encoding (PCI-SIG figures: 0.25, 0.5, 0.985, 1.969, 3.938, 7.563).
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def theoretical_gbs(gen, width):
    """Theoretical one-direction PCIe bandwidth in GB/s for a link, or None if unknown."""
    try:
        return round(PCIE_LANE_GBS[int(gen)] * int(width), 2)
    except (KeyError, TypeError, ValueError):
        return None


_FACT_KEYS = {
    "gen_current": "gen",
    "gen_max": "max_gen",
    "width_current": "width",
    "width_max": "max_width",
}


def link_facts(request, index):
    """PCIe link of GPU `index` from request["pcie"] (the controller's facts), normalized to
    {gen, width, max_gen, max_width}; accepts the facts' spelling (gen_current, gen_max, ...)."""
    table = request.get("pcie") or {}
    row = table.get(str(index)) or table.get(index) or {}
    out = {}
    for key, value in row.items():
        name = _FACT_KEYS.get(key, key)
        if name in ("gen", "width", "max_gen", "max_width") and value is not None:
            out[name] = value
    return out or None


def merge_link(live, facts):
    """The live NVML reading (taken under load) wins; the facts fill what it lacks."""
    if not live and not facts:
        return None
    out = dict(facts or {})
    out.update(dict((k, v) for k, v in (live or {}).items() if v is not None))
    out["source"] = "nvml after the copies" if live else "request facts"
    return out


def measure(request, quick):
    torch = import_torch()
    if not cuda_available(torch):
        raise Skip("no CUDA device: host<->device bandwidth only applies to GPUs")
    size_mb = 64 if quick else 256
    repeats = 5 if quick else 10
    per = []
    for index in range(torch.cuda.device_count()):
        per.append(_one_gpu(torch, request, index, size_mb, repeats))
    return {"size_mb": size_mb, "per_gpu": per}


def _gbs(nbytes, times):
    return sig(nbytes / median(times) / 1e9)


def _one_gpu(torch, request, index, size_mb, repeats):
    nbytes = size_mb << 20
    with torch.cuda.device(index):
        dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda:%d" % index)
        pageable = torch.empty(nbytes, dtype=torch.uint8).fill_(1)
        pinned = torch.empty(nbytes, dtype=torch.uint8).pin_memory().fill_(1)
        out = {"index": index}
        out["h2d_gbs"] = {
            "pageable": _gbs(nbytes, cuda_event_times(torch, lambda: dev.copy_(pageable), repeats)),
            "pinned": _gbs(
                nbytes,
                cuda_event_times(torch, lambda: dev.copy_(pinned, non_blocking=True), repeats),
            ),
        }
        out["d2h_gbs"] = {
            "pageable": _gbs(nbytes, cuda_event_times(torch, lambda: pageable.copy_(dev), repeats)),
            "pinned": _gbs(
                nbytes,
                cuda_event_times(torch, lambda: pinned.copy_(dev, non_blocking=True), repeats),
            ),
        }
        handle = nvml.handle_for_cuda(torch, index)
        # Read right after the copies: an idle link trains down to a lower generation.
        link = merge_link(nvml.pcie_link(handle), link_facts(request, index))
    out["link"] = link
    if link:
        out["theoretical_gbs"] = theoretical_gbs(link.get("gen"), link.get("width"))
        out["theoretical_max_gbs"] = theoretical_gbs(
            link.get("max_gen") or link.get("gen"), link.get("max_width") or link.get("width")
        )
        best = max(out["h2d_gbs"]["pinned"], out["d2h_gbs"]["pinned"])
        ref = out["theoretical_max_gbs"] or out["theoretical_gbs"]
        out["pct_of_theoretical"] = round(100.0 * best / ref, 1) if ref else None
        out["link_below_max"] = bool(
            link.get("max_gen")
            and link.get("gen")
            and (
                link["gen"] < link["max_gen"]
                or (link.get("width") or 0) < (link.get("max_width") or 0)
            )
        )
    else:
        out["theoretical_gbs"] = None
        out["reason"] = "PCIe link unknown: no request facts and no NVML"
    return out
