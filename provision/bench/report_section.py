"""The bench's section of the report: the overview, the tables of the bench's sections (matmul,
AMP, largest batch, DataLoader, copies, storage, under load), what was not measured and the
three charts, first in the bench layout. Registered when provision.bench is imported."""

from __future__ import annotations

from typing import Any

from provision.bench import report_view
from provision.report.sections import Section, Table, register


def _tables(doc: dict[str, Any]) -> list[Table]:
    return [
        (
            "Matmul throughput",
            ["device", "dtype", "TFLOPS", "% of peak"],
            report_view.compute_rows(doc),
        ),
        (
            "Training: fp32 vs AMP",
            ["model", "precision", "throughput", "step ms", "peak MB", "speedup"],
            report_view.amp_rows(doc),
        ),
        (
            "Largest batch",
            ["model", "dtype", "max batch", "bounded by", "accumulation for the target"],
            report_view.memory_rows(doc),
        ),
        ("DataLoader", ["source", "num_workers", "samples/s", ""], report_view.loader_rows(doc)),
        (
            "Host ↔ GPU copies (GB/s)",
            ["GPU", "H2D pageable", "H2D pinned", "D2H pinned", "link", "% of link"],
            report_view.transfer_rows(doc),
        ),
        (
            "Storage",
            ["dir", "fs", "seq read MB/s", "seq write MB/s", "4K IOPS", "free GB"],
            report_view.storage_rows(doc),
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
            report_view.under_load_rows(doc),
        ),
    ]


SECTION = register(
    Section(
        name="bench",
        order=10,
        overview=report_view.overview,
        tables=_tables,
        not_measured=report_view.not_measured,
        charts=report_view.chart_svgs,
    )
)
