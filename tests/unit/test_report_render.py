"""Reports rendered to Markdown, the console and a self-contained HTML page; the page is opened
in headless Chromium: charts in the DOM, painted on screen, no console errors."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from report_support import h100_bench, h100_report, real_facts_and_bench
from rich.console import Console

from provision.bench.report_view import chart_svgs
from provision.report import charts
from provision.report.document import build_report
from provision.report.render import print_console, render_html, render_markdown

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BAR_BLUE = (0x4C, 0x78, 0xA8)  # charts._COLORS[0]


@pytest.fixture(scope="module")
def real_doc() -> dict[str, Any]:
    pytest.importorskip("torch")
    pytest.importorskip("PIL")
    facts, bench = real_facts_and_bench()
    return build_report(
        "localhost",
        facts=facts,
        bench=bench,
        install={"python": bench["host"]["executable"], "torch": bench["host"]["torch"]},
        created="2025-03-02T09:00:00+00:00",
    )


@pytest.fixture
def gpu_doc() -> dict[str, Any]:
    bench = h100_bench(loader_by_workers={0: 300.0, 1: 250.0, 2: 480.0, 4: 900.0, 8: 1100.0})
    return h100_report(created="2025-03-02T08:00:00+00:00", price=2.5, bench=bench)


# -- Markdown ------------------------------------------------------------------------------------


def _tables_are_well_formed(md: str) -> None:
    """Every Markdown table row has as many cells as its header."""
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        if (
            lines[i].startswith("|")
            and i + 1 < len(lines)
            and re.match(r"^\|(---\|)+$", lines[i + 1])
        ):
            width = len(re.findall(r"(?<!\\)\|", lines[i]))
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                assert len(re.findall(r"(?<!\\)\|", lines[i])) == width, lines[i]
                i += 1
        else:
            i += 1


@pytest.mark.slow
def test_markdown_of_the_real_report(real_doc):
    md = render_markdown([real_doc])
    assert md.startswith("# provision report\n")
    assert "## localhost — 2025-03-02T09:00:00+00:00" in md
    assert "### Diagnosis" in md and "### DataLoader" in md and "### Storage" in md
    loader = real_doc["bench"]["dataloader"]
    for setting in loader["sources"][0]["settings"]:
        if setting.get("samples_per_s"):
            assert f"| {setting['num_workers']} |" in md
    assert f"at num_workers={loader['best_num_workers']}" in md
    assert "transfer (skipped): no CUDA device" in md  # what was not measured, and why
    for f in real_doc["diagnosis"]:
        assert f["title"] in md
    _tables_are_well_formed(md)


def test_markdown_ranks_hosts_and_escapes_cells(gpu_doc):
    cheap = h100_report(host="cheap|box", created="2025-03-02T08:30:00+00:00", price=0.5,
                        bench=h100_bench(fp32=600.0, bf16=1500.0))  # fmt: skip
    md = render_markdown([gpu_doc, cheap])
    by_speed = md.split("## Ranking by effective samples/s")[1].split("##")[0]
    by_money = md.split("## Ranking by samples per unit of money")[1].split("##")[0]
    # the H100 at 2.5/h loads 1100/s (its bottleneck); "cheap" trains 1500/s at 0.5/h
    assert by_speed.index("cheap\\|box") < by_speed.index("h100-box")
    assert by_money.index("cheap\\|box") < by_money.index("h100-box")
    assert "| 1 | cheap\\|box | 0.5 | 1,500 | 10,800,000 |" in by_money
    _tables_are_well_formed(md)


# -- console -------------------------------------------------------------------------------------


def test_console_shows_overview_findings_and_rankings(gpu_doc):
    other = h100_report(host="b", created="2025-03-02T08:30:00+00:00")
    console = Console(record=True, width=150, color_system=None)
    print_console([gpu_doc, other], console, detail=True)
    text = console.export_text()
    assert "h100-box · 2025-03-02T08:00:00+00:00" in text
    assert "CRITICAL The DataLoader cannot feed the GPU" in text
    assert "0: NVIDIA H100 80GB HBM3 (cc 9.0, 80 GiB)" in text
    assert "Ranking by effective samples/s" in text
    assert "Ranking by samples per unit of money" in text and "no price_per_hour: b" in text
    assert "Host ↔ GPU copies" in text  # detail tables with -v


def test_a_dataset_staged_without_a_name_is_named_by_its_lmdb():
    doc = h100_report(datasets=[{"path": "/root/autodl-tmp/datasets/imagenet-mini.lmdb",
                                 "format": "lmdb", "count": 3000}])  # fmt: skip
    md = render_markdown([doc])
    assert "| Dataset | imagenet-mini: /root/autodl-tmp/datasets/imagenet-mini.lmdb (lmdb, " in md
    assert "?: /root" not in md


def test_the_diagnosis_headline_is_the_most_severe_finding():
    from provision.report.render import diagnosis_headline

    doc = h100_report(bench=h100_bench(throttle_rows=30))
    first = doc["diagnosis"][0]
    line = diagnosis_headline(doc["diagnosis"])
    assert line.startswith(f"{first['severity']}: {first['title']}")
    assert line.endswith(f"(+{len(doc['diagnosis']) - 1} more)") or len(doc["diagnosis"]) == 1
    assert diagnosis_headline([]) == "no findings"


# -- HTML ----------------------------------------------------------------------------------------


def test_html_is_self_contained(gpu_doc):
    page = render_html([gpu_doc])
    assert "<script" not in page and "<link" not in page and " src=" not in page
    urls = set(re.findall(r"https?://[^\"' )]+", page))
    assert urls == {"http://www.w3.org/2000/svg"}  # the SVG namespace, never fetched
    assert page.count('<svg class="chart"') == 3


def test_html_escapes_report_text(gpu_doc):
    gpu_doc["host"] = "<script>alert(1)</script>"
    gpu_doc["diagnosis"][0]["evidence"] = "<img src=x onerror=alert(2)>"
    page = render_html([gpu_doc])
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_charts_show_why_when_not_measured():
    doc = build_report(
        "h", bench={"dataloader": {"status": "skipped", "reason": "Pillow is not installed"}}
    )
    svgs = chart_svgs(doc)
    assert "not measured: Pillow is not installed" in svgs["num_workers"]
    assert "not measured: no AMP run in this report" in svgs["amp"]


def test_chart_functions_skip_missing_values():
    svg = charts.line_chart("c", "t", [("a", [(0, 1.0), (1, float("nan")), (2, 3.0)])], "x", "y")
    assert svg.count("<circle") == 2 and "nan" not in svg
    svg = charts.grouped_bar_chart(
        "g", "t", ["m1", "m2"], [("fp32", [1.0, None]), ("bf16", [2.0, 3.0])]
    )
    assert svg.count('<rect class="bar"') == 3
    assert "fp32" in svg and "bf16" in svg  # legend


class _DomCharts(HTMLParser):
    """Charts (and their bars / lines / points) per report section, from Chromium's DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.section: str | None = None
        self.chart: str | None = None
        self.found: dict[str, dict[str, dict[str, int]]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section" and "host" in (a.get("class") or ""):
            self.section = a.get("id")
            self.found[self.section or "?"] = {}
        elif tag == "svg" and a.get("class") == "chart" and self.section:
            self.chart = a.get("data-chart")
            self.found[self.section][self.chart or "?"] = {}
        elif self.chart and self.section and a.get("class") in ("bar", "series", "point", "empty"):
            counts = self.found[self.section][self.chart]
            counts[a["class"]] = counts.get(a["class"], 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self.chart = None
        elif tag == "section":
            self.section = None


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-extensions", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
    ]  # fmt: skip
    env = dict(os.environ, HOME=str(tmp_path))
    return subprocess.run(
        [CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, env=env
    )


def _near(color: tuple[int, int, int], target: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 3 for a, b in zip(color, target, strict=True))


def _console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "Uncaught" in line or ":CONSOLE" in line]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_console_error_detection_works(tmp_path):
    """The check below must be able to fail: a page with a script error is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>undefinedFunction()</script></body></html>")
    proc = _chromium(tmp_path, "--dump-dom", bad.as_uri())
    assert any("undefinedFunction" in line for line in _console_errors(proc.stderr)), proc.stderr[
        -2000:
    ]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_html_in_headless_chromium(tmp_path, real_doc, gpu_doc):
    from provision.report import history

    earlier = h100_report(created="2025-03-01T08:00:00+00:00", price=2.5)
    db = tmp_path / "history.sqlite"
    history.record(earlier, db)
    page = tmp_path / "report.html"
    page.write_text(render_html([gpu_doc, real_doc], {"h100-box": history.compare(gpu_doc, db)}))

    proc = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _console_errors(proc.stderr) == []
    dom = _DomCharts()
    dom.feed(proc.stdout)
    assert set(dom.found) == {"host-1", "host-2"}
    gpu, cpu = dom.found["host-1"], dom.found["host-2"]
    assert set(gpu) == set(cpu) == {"num_workers", "amp", "peak"}
    # GPU host: one loader line + the training line; fp32/fp16/bf16 bars; % of peak for 4 dtypes
    assert gpu["num_workers"]["series"] == 2 and gpu["num_workers"]["point"] == 5 + 5
    assert gpu["amp"]["bar"] == 3 and gpu["peak"]["bar"] == 4
    # the real CPU run: its measured num_workers, its precisions, its TFLOPS
    tried = [
        s
        for s in real_doc["bench"]["dataloader"]["sources"][0]["settings"]
        if s.get("samples_per_s")
    ]
    assert cpu["num_workers"]["point"] == 2 * len(tried)
    assert cpu["amp"]["bar"] == sum(
        len(m["runs"]) for m in real_doc["bench"]["amp"]["models"].values()
    )
    assert cpu["peak"]["bar"] >= 2
    assert 'id="comparison"' in proc.stdout and 'id="ranking-money"' in proc.stdout

    shot = tmp_path / "report.png"
    proc = _chromium(tmp_path, "--window-size=1280,2600", f"--screenshot={shot}", page.as_uri())
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as img:
        rgb = img.convert("RGB")
        blue = sum(n for n, color in rgb.getcolors(maxcolors=1 << 24) if _near(color, BAR_BLUE))
    assert blue > 500  # the charts were painted, not only present in the DOM
    keep = os.environ.get("PROVISION_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)
