"""A playbook run's section of the report: `timings`, where each host's run went (timings.py),
the last table of the bench layout. `provision up` puts it into the host's report once the run
has ended (report/document.py add_timings). Registered when provision.engine is imported."""

from __future__ import annotations

from typing import Any

from provision.engine.timings import timing_rows
from provision.report.sections import Section, Table, register


def _table(doc: dict[str, Any]) -> Table:
    return "Timings", ["step", "seconds", "share", "ran in parallel"], timing_rows(doc.get("timings"))


SECTION = register(Section(name="timings", order=90, table=_table))
