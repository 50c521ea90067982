"""The playbook engine: load + validate (playbook.py), templating, variables, runner, results.

Import from the modules themselves (provision.engine.runner, .playbook, ...): this package's
__init__ imports nothing, so a module of provision/modules/ may use engine's helpers (templating,
core_filters, yamlpos) without loading the runner, which imports modules/ in turn.
"""
