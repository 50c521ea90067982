"""Controller side of dataset staging (`provision stage`, the `stage_dataset` module).

source.py: where the dataset is, its manifest, the one sample stream (and its broadcast to several
hosts); stage.py: per-host status -> stream -> result; payload.py: the stream of a one-call
stage, started on the agent's `ready`; compress.py: raw or zstd frames, chosen by measured pace;
progress.py: per-host rich progress; watchdog.py: a silent agent cuts the transport;
hostlib.py: py-lmdb for hosts whose Python lacks it. The host side is provision/agent/datasets;
the stream goes over the OpenSSH data plane (provision/connection/openssh.py) where it can.
"""

from typing import Any

__all__ = [
    "HostStage",
    "StageRequest",
    "make_request",
    "stage_dataset",
    "stage_hosts",
    "stage_local",
]


def __getattr__(name: str) -> Any:
    """The names above from stage.py, imported on first use: `provision stage` lists its source
    (source.py) while its SSH handshake runs, before the rest of the stack is imported."""
    if name in __all__:
        # start-up time: `provision stage` lists its source while the SSH handshake runs, before the rest is imported
        from provision.staging import stage

        return getattr(stage, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
