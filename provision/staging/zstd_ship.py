"""zstandard for a host that lacks it, shipped while its stage stream starts raw.

A host whose Python cannot import zstandard gets raw frames only (compress.py). Where the data
compresses (logs, CSV, text: zstd level 1 ~0.4 of the size) and the stream is long enough for
the bytes saved to outweigh the upload many times (~2.8 MB: zstandard's C backend, zipped), the controller
uploads its own zstandard for the host's Python tag (hostlib.ship_zstandard) on a second channel
of the same connection, asks a second agent process whether it imports (`stage_codecs`), and only
then lets the stream's chooser try zstd windows -- the running stage agent imports the shipped
copy at its first zstd frame (agent/datasets/framing.py). JPEG sets (~0.96) never pay for the
upload, so they are never shipped for. One upload per host and Python: later stages find it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from provision.staging import hostlib

log = logging.getLogger("provision.stage")

SHIP_RATIO = 0.9  # the sampled data must shrink by 10 % or more
SHIP_PAYBACK = 2  # the bytes saved: this many times the package unpacked (~8x its zipped upload)


class ZstdShipping:
    """The `later` of compress.framed_stream for one stage: False until zstandard was shipped to
    the host and imports there. Never raises: a failed shipment leaves the stream raw."""

    def __init__(self, agent: Any, connection: Any, tag: str, stream_bytes: int) -> None:
        self.agent = agent
        self.connection = connection
        self.tag = tag
        self.stream_bytes = stream_bytes
        self.state = "not needed"  # -> shipping -> shipped | failed: ...; for the stage's result
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def __call__(self, ratio: float) -> bool:
        if self._ready.is_set():
            return self.state == "shipped"
        if self._thread is None and self._worth_it(ratio):
            self.state = "shipping"
            self._thread = threading.Thread(target=self._ship, name="zstd-ship", daemon=True)
            self._thread.start()
        return False

    def _worth_it(self, ratio: float) -> bool:
        if not 0 < ratio <= SHIP_RATIO:
            return False  # not sampled yet, or data that does not compress (JPEGs)
        size = hostlib.zstandard_package_size(self.tag)
        return size is not None and (1 - ratio) * self.stream_bytes >= SHIP_PAYBACK * size

    def _ship(self) -> None:
        try:
            if not hostlib.ship_zstandard(self.connection, self.tag, put=getattr(self.agent, "put", None)):
                # the tag is the host's word: repr (no escapes reach a terminal), cut short
                self.state = f"failed: no zstandard here for the host's Python {self.tag[:40]!r}"
                return
            codecs = self.agent.call("stage_codecs", {}).get("codecs") or []
            self.state = "shipped" if "zstd" in codecs else "failed: it does not import on the host"
        except Exception as exc:  # the stream goes on raw; the result says why
            self.state = f"failed: {type(exc).__name__}: {exc}"[:300]
            log.info("%s: shipping zstandard failed: %s", self.connection.host.name, exc)
        finally:
            self._ready.set()

    def join(self, timeout: float) -> None:
        """Bounded: a stage that ends before the upload does not wait for it long."""
        if self._thread is not None:
            self._thread.join(timeout)
