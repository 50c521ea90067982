"""Parsing what users type for `provision train` and friends: durations, KEY=VALUE, env vars."""

from __future__ import annotations

import os
import re
from typing import Any

from provision.errors import ConfigError

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Offered to the user (never run unasked) when a host has no stop_command var.
STOP_COMMAND_HINTS = {
    "autodl": "shutdown",  # AutoDL: shutting the container down stops billing for the GPU
    "runpod": "runpodctl stop pod $RUNPOD_POD_ID",
    "vast.ai": "vastai stop instance $CONTAINER_ID",
}


def parse_duration(text: str, option: str) -> float:
    """'90', '90s', '30m', '1h30m' -> seconds."""
    value = str(text).strip().lower()
    try:
        seconds = float(value)
    except ValueError:
        m = _DURATION.match(value)
        if not value or not m or not any(m.groups()):
            raise ConfigError(f"{option} {text!r}: give a duration like 90s, 30m or 1h30m") from None
        h, mi, s = (float(g) if g else 0.0 for g in m.groups())
        seconds = h * 3600 + mi * 60 + s
    if seconds < 0:
        raise ConfigError(f"{option} {text!r}: must not be negative")
    return seconds


def parse_env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not _ENV_NAME.match(key):
            raise ConfigError(f"-e {pair!r}: give KEY=VALUE with KEY a variable name (secrets: --env-from VAR)")
        env[key] = value
    return env


def env_from(names: list[str]) -> dict[str, str]:
    """Values of the controller's environment variables, sent over stdin, never shown."""
    out = {}
    for name in names:
        if not _ENV_NAME.match(name):
            raise ConfigError(f"--env-from {name!r}: not an environment variable name")
        if name not in os.environ:
            raise ConfigError(f"--env-from {name}: the variable is not set here (export it first)")
        out[name] = os.environ[name]
    return out


def stop_command_of(host: object, facts: dict | None = None) -> str | None:
    value = getattr(host, "vars", {}).get("stop_command")
    return str(value) if value else None


def stop_command_hint(host_name: str, facts: dict | None) -> str:
    provider = str((((facts or {}).get("os") or {}).get("provider") or {}).get("name") or "").lower()
    offer = STOP_COMMAND_HINTS.get(provider)
    example = f"stop_command='{offer}' (what {provider} documents; check it first)" if offer else \
        "stop_command='shutdown -h now' (or your provider's stop command)"
    return (f"{host_name}: no stop_command var, so there is nothing to run when idle. Set it in the "
            f"inventory, e.g. `{host_name} ... {example}`; provision never runs a default unasked.")


# The exit codes of train/attach/logs/runs/stop (docs/train.md says the same): shown by --help.
EXIT_CODES = """exit codes:
  0    train/attach: the run finished (or was started, with --detach); logs: the log was
       shown, whatever the run's state; runs: listed; stop: stopped, or had already ended
  1    train/attach: the run failed or was stopped; any command: a host failed (its error
       is printed)
  2    usage or configuration error (bad option, unknown host, missing command)
  4    a host was unreachable (and none failed otherwise)
  130  Ctrl-C: `attach` and `logs -f` detach and the run goes on; `train` on one host leaves the
       run going (`provision attach HOST RUN`); `train --distributed` stops it on every host"""


def with_exit_codes(parser: Any) -> None:
    """Append the exit-code table to a command's --help, keeping its line breaks."""
    import argparse

    parser.epilog = EXIT_CODES
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
