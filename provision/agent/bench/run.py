"""The `bench` agent command: run the sections in order, each isolated, while a sampler watches.

Every section's result starts with {"status": "ok" | "skipped" | "error", "reason": ...}; a
section that fails is reported and the next one runs. Order matters: AMP training speed feeds
the memory search (which precision) and the data-loading verdict (how fast loading must be).
The request/response schema is documented in docs/bench.md; bump SCHEMA_VERSION on changes.
"""

import platform
import sys
import time
import traceback

from provision.agent.bench.common import (
    Skip,
    busy_cores,
    cuda_available,
    effective_cores,
    threads_for_cpu,
)

SCHEMA_VERSION = 1
SECTIONS = (
    "compute",
    "amp",
    "memory",
    "transfer",
    "dataloader",
    "storage",
    "network",
    "distributed",
)


def _section_functions(request, quick, results):
    from provision.agent.bench import (  # lazy: each section imports torch; a quick or skipped bench loads only what runs
        amp,
        compute,
        dataloader,
        distributed,
        memory,
        network,
        storage,
        transfer,
    )

    def amp_ok():
        section = results.get("amp") or {}
        return section if section.get("status") == "ok" else None

    return {
        "compute": lambda: compute.measure(request, quick),
        "amp": lambda: amp.measure(request, quick, request.get("image_size")),
        "memory": lambda: memory.measure(request, quick, amp_ok()),
        "transfer": lambda: transfer.measure(request, quick),
        "dataloader": lambda: dataloader.measure(request, quick, amp_ok()),
        "storage": lambda: storage.measure(request, quick),
        "network": lambda: network.measure(request, quick),
        "distributed": lambda: distributed.measure(request, quick),
    }


def run_section(fn):
    """fn() -> dict, wrapped: status/reason first, seconds last; Skip and errors caught."""
    began = time.monotonic()
    try:
        data = fn()
        out = {"status": data.pop("status", "ok"), "reason": data.pop("reason", None)}
        out.update(data)
    except Skip as exc:
        out = {"status": "skipped", "reason": str(exc)}
    except Exception as exc:  # one section's failure must not cost the others
        out = {
            "status": "error",
            "reason": "%s: %s" % (type(exc).__name__, exc),
            "traceback": traceback.format_exc(limit=-4),
        }
    out["seconds"] = round(time.monotonic() - began, 2)
    return out


def validate(request):
    if not isinstance(request, dict):
        raise ValueError("bench request must be a JSON object, got %s" % type(request).__name__)
    sections = request.get("sections")
    if sections is None:
        return list(SECTIONS)
    if isinstance(sections, str):
        sections = [s.strip() for s in sections.split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise ValueError(
            "bench request sections: unknown %s; known: %s"
            % (", ".join(unknown), ", ".join(SECTIONS))
        )
    # Run in the canonical order whatever order was asked: later sections use earlier results.
    return [s for s in SECTIONS if s in sections]


def host_info(torch):
    info = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "cores": effective_cores(),
        "torch": None,
    }
    if torch is None:
        return info
    info["torch"] = torch.__version__
    info["threads"] = torch.get_num_threads()
    info["cuda"] = getattr(torch.version, "cuda", None)
    info["device"] = "cuda" if cuda_available(torch) else "cpu"
    if info["device"] == "cuda":
        try:
            info["cudnn"] = torch.backends.cudnn.version()
        except Exception:
            info["cudnn"] = None
        info["gpus"] = []
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            info["gpus"].append(
                {
                    "index": i,
                    "name": props.name,
                    "capability": "%d.%d" % (props.major, props.minor),
                    "memory_gb": round(props.total_memory / 1e9, 1),
                }
            )
    return info


def _fit_cpu_threads(torch, request):
    """On a CPU-only host, use only the cores other work leaves free (request "threads" wins).
    Returns a note for the result when the thread count was changed, else None."""
    if torch is None or cuda_available(torch):
        return None
    if request.get("threads"):
        torch.set_num_threads(int(request["threads"]))
        return "threads=%d as requested" % int(request["threads"])
    cores = effective_cores()
    busy = busy_cores()
    threads = threads_for_cpu(cores, busy)
    if threads >= torch.get_num_threads():
        return None
    torch.set_num_threads(threads)
    return (
        "other work kept %.1f of %d cores busy when the bench started: torch runs %d thread(s), "
        "so the figures are this host's share, not its whole CPU" % (busy, cores, threads)
    )


def run(request, ctx):
    """Agent entry point: request as in docs/bench.md -> the bench result document."""
    # lazy: the GPU sampler only when the bench samples under load
    from provision.agent.bench.sampler import Sampler

    started = time.monotonic()
    wanted = validate(request)
    quick = bool(request.get("quick"))
    budget = request.get("max_seconds")
    try:
        import torch
    except Exception:
        torch = None
    threads_note = _fit_cpu_threads(torch, request)
    sampler = Sampler(float(request.get("sample_interval_s") or (0.5 if quick else 1.0)), torch)
    sampler.start()
    results = {}
    functions = _section_functions(request, quick, results)
    try:
        for name in wanted:
            if budget is not None and time.monotonic() - started > float(budget):
                results[name] = {
                    "status": "skipped",
                    "reason": "max_seconds=%s spent before this section" % budget,
                }
                continue
            ctx.progress(step="bench", section=name, status="running")
            sampler.mark(name)
            results[name] = run_section(functions[name])
            ctx.progress(
                step="bench",
                section=name,
                status=results[name]["status"],
                reason=results[name].get("reason"),
                seconds=results[name]["seconds"],
            )
    finally:
        sampler.stop()
    out = {
        "schema": SCHEMA_VERSION,
        "quick": quick,
        "host": host_info(torch),
        "sections": wanted,
    }
    if threads_note:
        out["host"]["threads_note"] = threads_note
    for name in SECTIONS:
        if name in results:
            out[name] = results[name]
        elif name not in wanted:
            out[name] = {"status": "skipped", "reason": "not requested (sections)"}
    under_load = {"status": "ok", "reason": None}
    under_load.update(sampler.summary())
    out["under_load"] = under_load
    out["wall_s"] = round(time.monotonic() - started, 2)
    return out
