"""Every command in the CLI's registry (provision.cli.main.COMMANDS), and how the text canary
reaches it (issue 29: host text reaches a person only as text). A command added to the registry
without an entry here fails tests/unit/test_cli_text.py::test_every_command_is_covered.

- FLEET: run through the real CLI against the `hostile` fleet host, whose hostname, OS name, a
  run's state, command and log, and the idle watcher's state are TEXT_CANARY
  (tests/fleet/test_text_canary.py); argv builders get the host's name.
- LOCAL: its host data comes from a file, run through the real CLI here (tests/unit/test_cli_text.py).
- REPLAYED: the strings it prints come from a host reply a fleet host can't give (GPU rows, a pip
  run, a staged dataset, a benchmark, a run that is stopped): the reply, canary in every string, goes through the
  command's own printer (tests/unit/test_cli_text.py, by the name given).
- NO_HOST_TEXT: prints no host's words, with why.
"""

from __future__ import annotations

from collections.abc import Callable

# rich markup that would crash (`[/x]`), link and restyle; HTML; a Markdown fence. 60 characters:
# it is also the hostile host's hostname (64 at most); tests/fleet/kinds.py plants it.
# (A run's state is not the canary: a state no command knows keeps `attach` following it.)
TEXT_CANARY = "[/x][link=https://evil.example]L[/link][b]<img onerror=1>```"
TEXT_RUN = "hostile-text"

FLEET: dict[str, Callable[[str], list[str]]] = {
    "facts": lambda h: ["facts", h],  # the hostname, the OS's name
    "runs": lambda h: ["runs", h],  # a run's command
    "logs": lambda h: ["logs", h, TEXT_RUN],  # its log lines
    "attach": lambda h: ["attach", h, TEXT_RUN],  # an ended run: its log lines
    "idle": lambda h: ["idle", h, "--status"],  # the watcher's status
    "train": lambda h: ["train", h, "--no-live", "--", "python3", "-c",
                        f"print({TEXT_CANARY!r}); print({TEXT_CANARY!r}); raise SystemExit(3)"],  # log lines, report list
    "run": lambda h: ["run", "PLAYBOOK"],  # a play showing facts and a command's output (the display)
}
LOCAL: dict[str, str] = {
    "choose": "a downloaded config.json's model name (`_name_or_path`)",
    "report": "a report document's host, GPU and OS names (the console report)",
}
REPLAYED: dict[str, str] = {
    "stop": "a stopped run's state and what is still running (a fleet host's run would really end)",
    "health": "GPU rows: a GPU's name, its reasons (no GPU on fleet hosts)",
    "install": "pip's progress lines, its result message and warnings",
    "stage": "the staged path and warnings of a host's stage result",
    "bench": "the benchmark report (the console report, as `report`) and its path",
    "up": "the report's diagnosis headline and path after the play (the play's own display: `run`)",
    "lock": "the plan's warnings and versions (from the host's facts and pip report)",
    "check": "a host's plan panel: its GPU names and installed torch",
}
NO_HOST_TEXT: dict[str, str] = {
    "inventory": "lists the user's own inventory (names, groups, vars): no host is contacted",
    "disconnect": "ends the controller's own kept SSH masters: prints the inventory names and"
    " user@host:port the controller recorded when it started them, nothing a host sent",
}


def covered() -> dict[str, str]:
    """command -> which way it is covered (a command in two ways is a mistake)."""
    out: dict[str, str] = {}
    for kind, commands in (("fleet", FLEET), ("local", LOCAL), ("replayed", REPLAYED), ("none", NO_HOST_TEXT)):
        for name in commands:
            assert name not in out, f"{name} is listed twice ({out[name]} and {kind})"
            out[name] = kind
    return out
