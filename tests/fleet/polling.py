"""Bounded waits for fleet tests: poll a check until it holds, or fail naming what never came."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(what: str, check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Poll `check()` until it returns something truthy (returned); AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {timeout:g}s")
