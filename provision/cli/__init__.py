"""Command line: thin. Parse, pick targets, call a playbook or a command, render."""
