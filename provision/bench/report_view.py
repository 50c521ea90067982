"""The bench's parts of one document in the bench layout: the overview rows, the section tables'
rows (matmul, AMP, largest batch, DataLoader, copies, storage, under load), what was not
measured and why, and the three charts (num_workers curve, AMP vs fp32, % of peak). Reads the
document through provision/report/schema.py only; registered by report_section.py.
"""

from __future__ import annotations

from typing import Any

from provision.agent.bench.run import SECTIONS  # the bench's own order
from provision.report import charts
from provision.report.formatting import gib, num
from provision.report.schema import cudnn_text, get, headline, loader_curve


def _gpus_text(doc: dict[str, Any]) -> str:
    gpus = get(doc, "facts.gpus") or []
    if gpus:
        out = []
        for g in gpus:
            mem = get(g, "memory.total_mib")
            out.append(
                f"{g.get('index', '?')}: {g.get('name') or '?'} (cc {g.get('compute_capability') or '?'}"
                + (f", {mem / 1024:.0f} GiB" if mem else "")
                + ")"
            )
        return "; ".join(out)
    cpu = get(doc, "facts.cpu") or {}
    cores = cpu.get("usable_cpus") or get(doc, "bench.host.cores")
    model = cpu.get("model") or get(doc, "bench.compute.per_gpu.0.name")
    return f"none — CPU only ({model or '?'}, {cores or '?'} cores)"


def overview(doc: dict[str, Any]) -> list[tuple[str, str]]:
    h = headline(doc)
    rows = []
    hostname = get(doc, "facts.hostname")
    os_name = get(doc, "facts.os.pretty_name")
    if hostname or os_name:
        rows.append(("Machine", " · ".join(str(x) for x in (hostname, os_name) if x)))
    rows.append(("GPUs", _gpus_text(doc)))
    driver = get(doc, "facts.nvidia.driver_version")
    if driver or get(doc, "facts.gpus"):
        rows.append(
            (
                "Driver / CUDA",
                f"{num(driver)} / CUDA ≤ {num(get(doc, 'facts.nvidia.cuda_driver_version'))}",
            )
        )
    install = doc.get("install") or {}
    torch = install.get("torch") or get(doc, "bench.host.torch")
    env = [f"{install.get('python') or get(doc, 'bench.host.executable') or '—'}"]
    if torch:
        env.append(f"torch {torch}")
    if get(doc, "bench.host.cuda"):
        env.append(f"CUDA {get(doc, 'bench.host.cuda')}")
    if get(doc, "bench.host.cudnn"):
        env.append(f"cuDNN {cudnn_text(get(doc, 'bench.host.cudnn'))}")
    rows.append(("Environment", " · ".join(env)))
    verdict = get(doc, "compat.verdict")
    rows.append(
        (
            "Compatibility",
            f"{verdict}" + (f" — fix: {get(doc, 'compat.fix')}" if get(doc, "compat.fix") else "")
            if verdict
            else "not checked (provision check HOST)",
        )
    )
    if h["train_samples_per_s"]:
        runs = get(doc, "bench.amp.models.convnet.runs") or {}
        fastest = next(
            (d for d, r in runs.items() if r.get("samples_per_s") == h["train_samples_per_s"]),
            h["amp_dtype"] or "fp32",
        )
        rows.append(
            (
                "Training",
                f"{num(h['train_samples_per_s'])} samples/s ({fastest}, convnet at "
                f"{num(h['image_size'])} px on {h['device'] or '?'}) · AMP speedup {num(h['amp_speedup'])}×",
            )
        )
    if h["loader_samples_per_s"]:
        verdict = get(doc, "bench.dataloader.verdict.verdict")
        rows.append(
            (
                "DataLoader",
                f"{num(h['loader_samples_per_s'])} samples/s at num_workers={num(h['best_num_workers'])}"
                + (f" · {verdict}" if verdict else ""),
            )
        )
    if h["effective_samples_per_s"]:
        rows.append(
            (
                "Effective",
                f"{num(h['effective_samples_per_s'])} samples/s"
                + (f" (bounded by {h['bottleneck']})" if h["bottleneck"] else ""),
            )
        )
    dd = get(doc, "facts.data_dir") or {}
    if dd.get("path"):
        rows.append(
            (
                "Data dir",
                f"{dd['path']} ({dd.get('fs_type') or '?'}{', network' if dd.get('network') else ''}, "
                f"{gib(dd.get('free_bytes'))} free of {gib(dd.get('total_bytes'))})",
            )
        )
    for ds in doc.get("datasets") or []:
        rows.append(
            (
                "Dataset",
                f"{dataset_name(ds)}: {ds.get('path') or '?'} ({ds.get('format') or '?'}"
                + (
                    f", {num(ds.get('count') or ds.get('samples'))} samples"
                    if ds.get("count") or ds.get("samples")
                    else ""
                )
                + ")",
            )
        )
    if h["price_per_hour"]:
        rows.append(
            (
                "Price",
                f"{num(h['price_per_hour'])} per hour → {num(h['samples_per_money'])} samples per unit of money",
            )
        )
    bench = doc.get("bench") or {}
    if bench:
        rows.append(
            (
                "Benchmark",
                ("quick" if bench.get("quick") else "full")
                + (f", {num(bench.get('wall_s'))} s" if bench.get("wall_s") is not None else ""),
            )
        )
    return rows


def dataset_name(ds: dict[str, Any]) -> str:
    """Its name, else the LMDB's file name without .lmdb (a dataset staged without --name)."""
    if ds.get("name"):
        return str(ds["name"])
    path = str(ds.get("path") or "").rstrip("/")
    base = path.rsplit("/", 1)[-1]
    return (base[: -len(".lmdb")] if base.endswith(".lmdb") else base) or "dataset"


def compute_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for g in get(doc, "bench.compute.per_gpu") or []:
        label = f"{g.get('index') if g.get('index') is not None else 'cpu'}: {g.get('name') or '?'}"
        for dtype, tf in (g.get("tflops") or {}).items():
            skipped = (g.get("skipped") or {}).get(dtype)
            rows.append(
                [
                    label,
                    dtype,
                    num(tf) if tf is not None else f"— ({skipped})" if skipped else "—",
                    num(get(g, f"pct_of_peak.{dtype}")),
                ]
            )
    return rows


def amp_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name, m in (get(doc, "bench.amp.models") or {}).items():
        for dtype, run in (m.get("runs") or {}).items():
            rows.append(
                [
                    f"{name} (batch {m.get('batch')})",
                    dtype,
                    f"{num(run.get('samples_per_s'))} {m.get('unit') or 'samples'}/s",
                    num(run.get("step_ms")),
                    num(run.get("peak_memory_mb")),
                    f"{num(m.get('speedup'))}×" if dtype == m.get("best_amp_dtype") else "",
                ]
            )
        for dtype, err in (m.get("errors") or {}).items():
            rows.append([name, dtype, f"failed: {err}", "", "", ""])
    return rows


def memory_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    mem = get(doc, "bench.memory") or {}
    for name, m in (mem.get("models") or {}).items():
        ga = m.get("grad_accumulation") or {}
        rows.append(
            [
                name,
                str(mem.get("dtype") or "—"),
                num(m.get("max_batch")),
                str(m.get("bounded_by") or "—"),
                f"{num(ga.get('steps'))} × {num(ga.get('micro_batch'))} = {num(ga.get('effective_batch'))}"
                if ga
                else "—",
            ]
        )
    return rows


def loader_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for s in get(doc, "bench.dataloader.sources") or []:
        src = s.get("source") or {}
        label = f"{src.get('name') or '?'} ({src.get('format') or '?'}, {src.get('role') or '?'})"
        if not s.get("settings"):
            rows.append([label, "—", f"{s.get('status')}: {s.get('reason')}", ""])
        for setting in s.get("settings") or []:
            best = s.get("best") or {}
            is_best = setting.get("num_workers") == best.get("num_workers") and setting.get(
                "samples_per_s"
            ) == best.get("samples_per_s")
            rows.append(
                [
                    label,
                    str(setting.get("num_workers")),
                    num(setting.get("samples_per_s"))
                    if setting.get("samples_per_s") is not None
                    else str(setting.get("error") or setting.get("skipped") or "—"),
                    "best" if is_best else "",
                ]
            )
    return rows


def transfer_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for t in get(doc, "bench.transfer.per_gpu") or []:
        link = t.get("link") or {}
        rows.append(
            [
                str(t.get("index")),
                num(get(t, "h2d_gbs.pageable")),
                num(get(t, "h2d_gbs.pinned")),
                num(get(t, "d2h_gbs.pinned")),
                f"gen{link.get('gen', '?')} x{link.get('width', '?')} (max gen{link.get('max_gen', '?')} "
                f"x{link.get('max_width', '?')})"
                if link
                else "—",
                num(t.get("pct_of_theoretical")),
            ]
        )
    return rows


def storage_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for d in get(doc, "bench.storage.dirs") or []:
        rows.append(
            [
                f"{d.get('path')} ({d.get('role')})",
                f"{d.get('fstype') or '?'}{' network' if d.get('network_fs') else ''}",
                num(get(d, "seq_read.mb_s")),
                num(d.get("seq_write_mb_s")),
                num(get(d, "random_read.iops")),
                f"{num(d.get('free_gb'))} of {num(d.get('total_gb'))}",
            ]
        )
    return rows


def under_load_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for g in get(doc, "bench.under_load.gpu.per_gpu") or []:
        reasons = g.get("throttle_reasons") or {}
        rows.append(
            [
                f"GPU {g.get('index')}",
                f"{num(g.get('util_pct_mean'))} / {num(g.get('util_pct_max'))}",
                num(g.get("temperature_c_max")),
                f"{num(g.get('power_w_mean'))} / {num(g.get('power_limit_w'))}",
                f"{num(g.get('sm_mhz_min'))}–{num(g.get('sm_mhz_max'))} (max {num(g.get('max_sm_mhz'))})",
                ", ".join(f"{r} ×{n}" for r, n in sorted(reasons.items())) or "none",
            ]
        )
    cpu = get(doc, "bench.under_load.cpu") or {}
    if cpu:
        rows.append(
            [
                "CPU",
                f"{num(cpu.get('busy_pct_mean'))} / {num(cpu.get('busy_pct_max'))}",
                "",
                "",
                f"load {num(cpu.get('load1_max'))} max, iowait {num(cpu.get('iowait_pct_mean'))}%",
                "",
            ]
        )
    return rows


def not_measured(doc: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for name in SECTIONS:
        section = get(doc, f"bench.{name}")
        if isinstance(section, dict) and section.get("status") in ("skipped", "error"):
            out.append((f"{name} ({section['status']})", str(section.get("reason") or "")))
    gpu = get(doc, "bench.under_load.gpu") or {}
    if gpu.get("status") == "skipped":
        out.append(("GPU sampling (skipped)", str(gpu.get("reason") or "")))
    return out


def chart_svgs(doc: dict[str, Any]) -> dict[str, str]:
    """The three charts: num_workers curve, AMP vs fp32, % of peak (TFLOPS when no peak)."""
    series = []
    primary = get(doc, "bench.dataloader.primary")
    for s in get(doc, "bench.dataloader.sources") or []:
        name = (s.get("source") or {}).get("name")
        pts = loader_curve(doc, name)
        if pts:
            role = (s.get("source") or {}).get("role")
            several = len(get(doc, "bench.dataloader.sources") or []) > 1
            label = f"{name} ({role})" + (", used" if several and name == primary else "")
            series.append((label, pts))
    train = get(doc, "bench.amp.train_samples_per_s")
    if series and train:
        xs = sorted({x for _, pts in series for x, _ in pts})
        series.append((f"training {num(train)}/s", [(x, float(train)) for x in xs]))
    loader_reason = get(doc, "bench.dataloader.reason") or "no DataLoader run in this report"
    num_workers_svg = charts.line_chart(
        "num_workers",
        "DataLoader samples/s by num_workers",
        series,
        "num_workers",
        "samples/s",
        empty_reason=str(loader_reason),
    )
    models = get(doc, "bench.amp.models") or {}
    dtypes: list[str] = []
    for m in models.values():
        for d in m.get("runs") or {}:
            if d not in dtypes:
                dtypes.append(d)
    # Relative to each model's fp32 run: the workloads count different samples (images,
    # sequences) at different rates, so one absolute axis would hide the smaller one.
    groups = [g for g in models if get(models[g], "runs.fp32.samples_per_s")]
    amp_series = []
    for d in dtypes:
        values = []
        for g in groups:
            sps = get(models[g], f"runs.{d}.samples_per_s")
            values.append(
                round(sps / models[g]["runs"]["fp32"]["samples_per_s"], 3) if sps else None
            )
        amp_series.append((d, values))
    amp_svg = charts.grouped_bar_chart(
        "amp",
        "Training speed: AMP vs fp32 (fp32 = 1)",
        [f"{g} ({num(get(models[g], 'runs.fp32.samples_per_s'))}/s fp32)" for g in groups],
        amp_series,
        "× fp32",
        empty_reason=str(get(doc, "bench.amp.reason") or "no AMP run in this report"),
    )
    per_gpu = get(doc, "bench.compute.per_gpu") or []
    labels = [f"{g.get('index') if g.get('index') is not None else 'cpu'}" for g in per_gpu]
    dtypes = ["fp32", "tf32", "fp16", "bf16"]
    has_peak = any(v is not None for g in per_gpu for v in (g.get("pct_of_peak") or {}).values())
    if has_peak:
        peak_series = [(d, [get(g, f"pct_of_peak.{d}") for g in per_gpu]) for d in dtypes]
        peak_svg = charts.grouped_bar_chart(
            "peak", "Matmul: % of the dense datasheet peak", labels, peak_series, "% of peak"
        )
    else:
        tf_series = [(d, [get(g, f"tflops.{d}") for g in per_gpu]) for d in dtypes]
        tf_series = [s for s in tf_series if any(v is not None for v in s[1])]
        peak_svg = charts.grouped_bar_chart(
            "peak",
            "Matmul TFLOPS (no datasheet peak for this device)",
            labels,
            tf_series,
            "TFLOPS",
            empty_reason=str(get(doc, "bench.compute.reason") or "no matmul run in this report"),
        )
    return {"num_workers": num_workers_svg, "amp": amp_svg, "peak": peak_svg}
