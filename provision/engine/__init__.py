"""The playbook engine: load + validate (playbook.py), templating, variables, runner, results,
and a run's timings with their report section (timings.py, report_section.py).

Import from the modules themselves (provision.engine.runner, .playbook, ...): this package's
__init__ imports only its report section (stdlib and provision/report/sections.py), so a module
of provision/modules/ may use engine's helpers (templating, core_filters, yamlpos) without
loading the runner, which imports modules/ in turn.
"""

from provision.engine import report_section as _report_section  # noqa: F401 - registers the timings section
