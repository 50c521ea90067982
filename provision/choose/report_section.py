"""The choose check's section of the report: `prediction` (what `choose` predicts for the host's
GPU beside what it measured: check.py) added to each bench report as it is built, its table and
the offers' cost-vs-hours chart in the bench layout (report_view.py). Registered when
provision.choose is imported."""

from __future__ import annotations

from typing import Any

from provision.choose import check, report_view
from provision.report.sections import Section, Table, register


def _table(doc: dict[str, Any]) -> Table:
    return report_view.title(doc), report_view.HEADER, report_view.rows(doc)


def _charts(doc: dict[str, Any]) -> dict[str, str]:
    return {"choose": report_view.chart(doc)}


SECTION = register(Section(name="prediction", contribute=check.section, table=_table, charts=_charts))
