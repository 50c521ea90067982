"""Strict JSON out (issue 29): what provision writes as JSON (`--json`, the .json reports) is JSON
any parser takes. A host may send NaN or Infinity (Python's json reads them); they leave as null,
with the reason beside the key (`"usable_cpus": null, "usable_cpus_invalid": "Infinity ..."`)."""

from __future__ import annotations

import json
import math
from typing import Any

INVALID_SUFFIX = "_invalid"


def _reason(value: float) -> str:
    word = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    return f"{word}: not a number JSON can carry"


def finite(value: Any) -> Any:
    """A copy of a JSON-like value with every NaN/Infinity made null (the reason beside its key);
    the value itself where there is none (a walk, no copy, in the common case)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        if not any(_has_nonfinite(v) for v in value.values()):
            return value
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(item, float) and not math.isfinite(item):
                out[key] = None
                note = f"{key}{INVALID_SUFFIX}"
                if note not in value:
                    out[note] = _reason(item)
            else:
                out[key] = finite(item)
        return out
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value] if any(_has_nonfinite(v) for v in value) else value
    return value


def _has_nonfinite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_nonfinite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_nonfinite(v) for v in value)
    return False


def dumps(document: Any, **options: Any) -> str:
    """json.dumps with allow_nan=False, after `finite`: never NaN/Infinity in the text."""
    return json.dumps(finite(document), allow_nan=False, **options)
