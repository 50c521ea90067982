"""Keep secrets out of output: mask values of secret-looking variables, censor `no_log` results.

A variable whose name looks like a credential (password, token, secret, passphrase, api key,
private key, credential) has its value replaced by `********` wherever it appears in anything we
print or write as JSON — also inside longer strings (`Bearer {{ token }}`), because a templated
command line or an error message carries the value, not the name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "********"
NO_LOG_MESSAGE = (
    "the output has been hidden due to the fact that 'no_log: true' was specified for this result"
)

_SECRET_NAME = re.compile(
    r"(passw(or)?d|passwd|passphrase|secret|token|api[_-]?key|private[_-]?key|credential|auth[_-]?key)",
    re.IGNORECASE,
)
# Names that match the pattern but hold no secret (`password_env` names an env var, the value is
# the variable's *name*, and hiding it would only hide useful context).
_NOT_SECRET = re.compile(r"(_env|_file|_path|_length|_min|_max)$", re.IGNORECASE)
_MIN_LEN = 4  # masking "1" or "yes" everywhere would garble output without protecting anything


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET.search(name)


def collect_secrets(layers: Iterable[Mapping[str, Any]]) -> set[str]:
    """Values of secret-named variables (nested dicts included) in the given variable layers."""
    found: set[str] = set()

    def walk(obj: Any, secret: bool) -> None:
        if isinstance(obj, Mapping):
            for key, value in obj.items():
                walk(value, secret or (isinstance(key, str) and is_secret_name(key)))
        elif isinstance(obj, (list, tuple)):
            for value in obj:
                walk(value, secret)
        elif secret and obj is not None and not isinstance(obj, bool):
            text = str(obj)
            if len(text) >= _MIN_LEN and "{{" not in text:
                found.add(text)

    for layer in layers:
        walk(layer, False)
    return found


class Masker:
    """Replaces known secret values in any JSON-like structure. Thread-safe to read; values are
    added by the runner as hosts' variables become known."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        new = {s for s in secrets if s and len(s) >= _MIN_LEN} - self._secrets
        if not new:
            return
        self._secrets |= new
        # longest first so a secret containing another is masked whole
        ordered = sorted(self._secrets, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(s) for s in ordered))

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, value: str) -> str:
        pattern = self._pattern
        if pattern is None or not value:
            return value
        return pattern.sub(MASK, value)

    def mask(self, obj: Any) -> Any:
        """A copy of `obj` with secret values masked; keys named like secrets have their value masked
        outright, so `{"password": "x"}` never shows "x" even when x is short."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            out = {}
            for key, value in obj.items():
                if (
                    isinstance(key, str)
                    and is_secret_name(key)
                    and isinstance(value, (str, int, float))
                    and not isinstance(value, bool)
                ):
                    out[key] = MASK
                else:
                    out[key] = self.mask(value)
            return out
        if isinstance(obj, (list, tuple)):
            return [self.mask(v) for v in obj]
        return obj
