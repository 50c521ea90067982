"""The bench's part of the report, on the controller: its overview rows, section tables, charts
and what was not measured (report_view.py, registered by report_section.py) and its diagnosis
rules (diagnosis.py), all registered with the report when this package is imported. The bench
itself runs on the host (provision/agent/bench/), driven by provision/remote/bench.py."""

from provision.bench import diagnosis as _diagnosis  # noqa: F401 - registers the bench's rules
from provision.bench import report_section as _report_section  # noqa: F401 - registers the bench section

__all__: list[str] = []
