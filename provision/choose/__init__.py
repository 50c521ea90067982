"""`provision choose` (docs/choose.md): the model's graph on the meta device, memory, roofline
speed, offers ranked by cost to finish; and the report's predicted-vs-measured section."""

from provision.choose import report_section as _report_section  # noqa: F401 - registers the prediction section

__all__: list[str] = []
