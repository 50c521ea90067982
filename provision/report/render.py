"""Render report documents: console (rich), Markdown and self-contained HTML (templates/).

One `view` per document turns the raw sections into labelled rows with formatted numbers, so
the three outputs show the same figures; the templates only lay them out.
"""

from __future__ import annotations

from typing import Any

import jinja2
from markupsafe import Markup
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table

from provision.agent.bench.run import SECTIONS  # the bench's own order
from provision.paths import bundle_dir
from provision.report import charts
from provision.report.diagnosis import cudnn_text, loader_curve
from provision.report.document import SCHEMA, get, headline
from provision.report.timings import timing_rows
from provision.terminal import MdText, escape, md, md_code, md_fence, visible

SEVERITY_STYLE = {"critical": "bold red", "warn": "yellow", "info": "cyan"}


# -- numbers ---------------------------------------------------------------------------------------


def num(value: Any, digits: int = 3) -> str:
    """A figure as people read it: 3 significant digits, thousands separated, "—" if missing."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 10**digits:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    return str(value)


def gib(nbytes: Any) -> str:
    return "—" if not isinstance(nbytes, (int, float)) else f"{nbytes / 2**30:.1f} GiB"


def pct_delta(new: Any, old: Any) -> float | None:
    if not isinstance(new, (int, float)) or not isinstance(old, (int, float)) or not old:
        return None
    return round(100.0 * (new - old) / old, 1)


# -- ranking -----------------------------------------------------------------------------------------


def rankings(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Hosts side by side: by effective samples/s, and by samples per unit of money for the hosts
    with a price_per_hour. Hosts without a figure go last. `note` says when the workloads differ
    (a GPU bench at 224 px against a CPU one at 32 px is no contest)."""
    heads = [headline(d) for d in docs]
    by_throughput = sorted(heads, key=lambda h: -(h["effective_samples_per_s"] or -1.0))
    priced = [h for h in heads if h["samples_per_money"]]
    by_money = sorted(priced, key=lambda h: -h["samples_per_money"])
    sizes = {h["image_size"] for h in heads if h["image_size"]}
    note = None
    if len(sizes) > 1:
        note = (
            "the hosts benchmarked different image sizes ("
            + ", ".join(f"{s} px" for s in sorted(sizes))
            + "): samples/s compare only within one size"
        )
    unpriced = [h["host"] for h in heads if not h["price_per_hour"]]
    return {
        "by_throughput": by_throughput,
        "by_money": by_money,
        "unpriced": unpriced if priced else [],
        "note": note,
    }


def rank(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The one ordering to show first: by money when every host has a price, else throughput."""
    r = rankings(docs)
    if r["by_money"] and not r["unpriced"]:
        return r["by_money"]
    return r["by_throughput"]


# -- the per-document view -----------------------------------------------------------------------


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


def _overview(doc: dict[str, Any]) -> list[tuple[str, str]]:
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


def diagnosis_headline(findings: list[dict[str, Any]]) -> str:
    """One console line: the most severe finding (they come sorted) and how many more."""
    if not findings:
        return "no findings"
    first = findings[0]
    more = len(findings) - 1
    return f"{first.get('severity')}: {first.get('title')}" + (f" (+{more} more)" if more else "")


def _compute_rows(doc: dict[str, Any]) -> list[list[str]]:
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


def _amp_rows(doc: dict[str, Any]) -> list[list[str]]:
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


def _memory_rows(doc: dict[str, Any]) -> list[list[str]]:
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


def _loader_rows(doc: dict[str, Any]) -> list[list[str]]:
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


def _transfer_rows(doc: dict[str, Any]) -> list[list[str]]:
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


def _storage_rows(doc: dict[str, Any]) -> list[list[str]]:
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


def _under_load_rows(doc: dict[str, Any]) -> list[list[str]]:
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


def _not_measured(doc: dict[str, Any]) -> list[tuple[str, str]]:
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
    from provision.choose import report_view

    return {"num_workers": num_workers_svg, "amp": amp_svg, "peak": peak_svg, "choose": report_view.chart(doc)}


def view(doc: dict[str, Any]) -> dict[str, Any]:
    from provision.choose import report_view

    return {
        "host": doc["host"],
        "created": doc["created"],
        "headline": headline(doc),
        "overview": _overview(doc),
        "diagnosis": doc.get("diagnosis") or [],
        "tables": [
            t
            for t in (
                (
                    "Matmul throughput",
                    ["device", "dtype", "TFLOPS", "% of peak"],
                    _compute_rows(doc),
                ),
                (
                    "Training: fp32 vs AMP",
                    ["model", "precision", "throughput", "step ms", "peak MB", "speedup"],
                    _amp_rows(doc),
                ),
                (
                    "Largest batch",
                    ["model", "dtype", "max batch", "bounded by", "accumulation for the target"],
                    _memory_rows(doc),
                ),
                ("DataLoader", ["source", "num_workers", "samples/s", ""], _loader_rows(doc)),
                (
                    "Host ↔ GPU copies (GB/s)",
                    ["GPU", "H2D pageable", "H2D pinned", "D2H pinned", "link", "% of link"],
                    _transfer_rows(doc),
                ),
                (
                    "Storage",
                    ["dir", "fs", "seq read MB/s", "seq write MB/s", "4K IOPS", "free GB"],
                    _storage_rows(doc),
                ),
                (
                    "Under load",
                    [
                        "device",
                        "util % mean/max",
                        "temp °C max",
                        "power W mean/limit",
                        "clocks MHz",
                        "throttle reasons",
                    ],
                    _under_load_rows(doc),
                ),
                (report_view.title(doc), report_view.HEADER, report_view.rows(doc)),
                (
                    "Timings",
                    ["step", "seconds", "share", "ran in parallel"],
                    timing_rows(doc.get("timings")),
                ),
            )
            if t[2]
        ],
        "not_measured": _not_measured(doc),
    }


def comparison_rows(comparisons: dict[str, dict[str, Any]]) -> list[list[str]]:
    """[host, previous run, figure, before, now, change %] from history.compare results."""
    rows = []
    for host, c in comparisons.items():
        for figure, f in c["figures"].items():
            delta = f["change_pct"]
            rows.append(
                [
                    host,
                    str(c["previous"]["created"]),
                    figure,
                    num(f["before"]),
                    num(f["now"]),
                    "—" if delta is None else f"{delta:+.1f}%",
                ]
            )
    return rows


# -- outputs -----------------------------------------------------------------------------------------


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(bundle_dir("templates"))),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default=False),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_shown,  # every value a report shows: a host's text carries no escape sequence
    )
    env.filters["num"] = num
    return env


def markdown_env() -> jinja2.Environment:
    """The Markdown templates' environment: every value is host text unless provision made it as
    Markdown (MdText) — escaped by provision/terminal.py's `md`, like HTML's autoescape."""
    env = _env()
    env.finalize = lambda value: value if isinstance(value, MdText) else md(value)
    env.filters.update(md=md, code=md_code, fence=md_fence, join=_md_join)
    return env


def _md_join(values: Any, separator: str = "") -> MdText:
    return MdText(separator.join(md(v) for v in values))


def _shown(value: Any) -> Any:
    if isinstance(value, str) and not isinstance(value, Markup):  # Markup: our own SVG charts
        return visible(value)
    return value


def _context(docs: list[dict[str, Any]], comparisons: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "docs": docs,
        "views": [view(d) for d in docs],
        "rankings": rankings(docs),
        "comparison": comparison_rows(comparisons or {}),
    }


def _all_train(docs: list[dict[str, Any]]) -> bool:
    """Reports of `provision train` runs have their own layout (provision/report/train_render.py)."""
    return bool(docs) and all(isinstance(d.get("train"), dict) for d in docs)


def render_markdown(docs: list[dict[str, Any]], comparisons: dict[str, Any] | None = None) -> str:
    if _all_train(docs):
        from provision.report import train_render

        return train_render.render_markdown(docs, comparisons)
    return markdown_env().get_template("report.md.j2").render(**_context(docs, comparisons))


def render_html(docs: list[dict[str, Any]], comparisons: dict[str, Any] | None = None) -> str:
    if _all_train(docs):
        from provision.report import train_render

        return train_render.render_html(docs, comparisons)
    ctx = _context(docs, comparisons)
    ctx["charts"] = [chart_svgs(d) for d in docs]
    return _env().get_template("report.html.j2").render(**ctx)


def _table(title: str, header: list[str], rows: list[list[str]]) -> Table:
    t = Table(
        title=title, title_justify="left", title_style="bold", show_edge=False, pad_edge=False
    )
    for col in header:
        t.add_column(col)
    for row in rows:
        t.add_row(*(escape(cell) for cell in row))
    return t


def print_console(
    docs: list[dict[str, Any]],
    console: Console,
    comparisons: dict[str, Any] | None = None,
    detail: bool = False,
) -> None:
    """One panel per host (overview, findings; the section tables with `detail`), then the
    rankings and the comparison with the previous runs."""
    for doc in docs:
        v = view(doc)
        t = Table(show_header=False, box=None, pad_edge=False)
        t.add_column(style="bold cyan", no_wrap=True)
        t.add_column()
        for label, value in v["overview"]:
            t.add_row(escape(label), escape(value))
        parts: list[Any] = [t]
        for f in v["diagnosis"]:
            style = SEVERITY_STYLE.get(f["severity"], "")
            parts.append(
                f"[{style}]{escape(f['severity'].upper())}[/] [bold]{escape(f['title'])}[/]\n"
                f"   [dim]evidence:[/] {escape(f['evidence'])}\n   [dim]do:[/] {escape(f['recommendation'])}"
            )
        if not v["diagnosis"]:
            parts.append("[green]no findings: this server looks right[/]")
        if detail:
            parts += [_table(title, header, rows) for title, header, rows in v["tables"]]
        for name, reason in v["not_measured"]:
            parts.append(f"[dim]{escape(name)}: {escape(reason)}[/]")
        console.print(
            Panel(
                Group(*parts),
                title=f"[bold]{escape(doc['host'])}[/] · {escape(doc['created'])}",
                title_align="left",
            )
        )
    r = rankings(docs)
    if len(docs) > 1:
        table = Table(title="Ranking by effective samples/s", title_justify="left")
        for col in (
            "#",
            "host",
            "GPU",
            "effective samples/s",
            "train",
            "loader",
            "critical",
            "warn",
        ):
            table.add_column(col)
        for i, h in enumerate(r["by_throughput"], 1):
            table.add_row(
                str(i), escape(h["host"]), escape(h["gpu"]), num(h["effective_samples_per_s"]),
                num(h["train_samples_per_s"]), num(h["loader_samples_per_s"]),
                str(h["critical"]), str(h["warnings"]),
            )  # fmt: skip
        console.print(table)
    if r["by_money"] and len(docs) > 1:
        table = Table(
            title="Ranking by samples per unit of money (price_per_hour)", title_justify="left"
        )
        for col in ("#", "host", "price/hour", "effective samples/s", "samples per money"):
            table.add_column(col)
        for i, h in enumerate(r["by_money"], 1):
            table.add_row(
                str(i), escape(h["host"]), num(h["price_per_hour"]),
                num(h["effective_samples_per_s"]), num(h["samples_per_money"]),
            )  # fmt: skip
        console.print(table)
        if r["unpriced"]:
            console.print(f"[dim]no price_per_hour: {escape(', '.join(r['unpriced']))}[/]")
    if r["note"]:
        console.print(f"[yellow]note:[/] {escape(r['note'])}")
    rows = comparison_rows(comparisons or {})
    if rows:
        console.print(
            _table(
                "Compared with each host's previous run",
                ["host", "previous", "figure", "before", "now", "change"],
                rows,
            )
        )
