"""Command line: thin. Parse, pick targets, call a playbook or a command, render.

Start-up time is the rule here, stated once: `provision` imports only the command it runs
(main.py), and a command defers what only some of its paths need (the playbook stack, paramiko,
torch's resolver, the report's sections) into the function that uses it. So an import inside a
function in cli/ is a start-up-time one; elsewhere each is listed with its reason
(tests/unit/test_layout.py `DEFERRED`), and none anywhere dodges a cycle.
"""
