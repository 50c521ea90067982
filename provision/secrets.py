"""Keep secrets out of output: the ONE rule for what is secret, masking, `no_log`.

What is secret (`is_secret_name`, used by inventory output, results, logs, reports, display):

- Ansible's connection and become passwords: `ansible_password`, `ansible_ssh_pass`,
  `ansible_become_pass`, `ansible_become_password`, `ansible_sudo_pass`, … (`_CONNECTION_SECRETS`);
- names ending in `_password`, `_pass`, `_token`, `_secret`, `_key` (so `api_key`), names that
  contain "password", and names with a part (split on `_ - .`) token / secret / passphrase /
  credential(s) / authorization / apikey / passwd (`HF_TOKEN`, `X-Api-Token`; not
  `tokens_per_s` or `max_tokens`, which are numbers);
- not names that point at a secret instead of holding it (`password_env`, `*_key_file`,
  `*_path`, `*_length`…);
- provision's `stop_command` var, whole (often a cloud API call with its token);
- in any text, the password of a URL's userinfo (`https://user:PASS@host`).

A secret value is replaced by `********` wherever it appears in anything we print or write —
also inside longer strings (`Bearer {{ token }}`), because a templated command line or an
error message carries the value, not the name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

MASK = "********"
NO_LOG_MESSAGE = (
    "the output has been hidden due to the fact that 'no_log: true' was specified for this result"
)

_CONNECTION_SECRETS = frozenset(
    {
        "ansible_password",
        "ansible_pass",
        "ansible_ssh_pass",
        "ansible_ssh_password",
        "ansible_become_pass",
        "ansible_become_password",
        "ansible_sudo_pass",
        "ansible_sudo_password",
        "ansible_su_pass",
        "ansible_su_password",
        "ansible_ssh_private_key_passphrase",
        "ansible_httpapi_pass",
        "ansible_httpapi_password",
        "ansible_winrm_password",
    }
)
# provision's own variables that hold a secret whole: the host's stop command is often a cloud
# API call with its token (`curl -H 'Authorization: Bearer ...'`)
_PROVISION_SECRETS = frozenset({"stop_command"})
# a name's parts (split on _ - . and spaces): `HF_TOKEN` → hf, token; `tokens_per_s` is no secret
_NAME_PARTS = re.compile(r"[_\-. ]+")
_SECRET_PARTS = frozenset(
    {"token", "secret", "passphrase", "credential", "credentials", "authorization", "apikey", "passwd"}
)
_SECRET_LAST_PARTS = frozenset({"pass", "key", "password"})
_SECRET_ENDINGS = ("password", "passwd", "token", "secret", "apikey", "passphrase")
# Names that match but hold no secret (`password_env` names an env var, the value is the
# variable's *name*, and hiding it would only hide useful context).
_NOT_SECRET = re.compile(r"(_env|_file|_path|_length|_min|_max|_var)$", re.IGNORECASE)
_PUBLIC_PARTS = frozenset({"public", "pub", "pubkey"})
_MIN_LEN = 4  # masking "1" or "yes" everywhere would garble output without protecting anything
# scheme://user:PASSWORD@ — the password part of a URL's userinfo, in any text
_URL_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/@:]*:)(?P<secret>[^\s/@]+)@")


def is_secret_name(name: str) -> bool:
    """The one rule: does a variable / argument / key of this name hold a secret?"""
    lowered = name.lower()
    if lowered in _CONNECTION_SECRETS or lowered in _PROVISION_SECRETS:
        return True
    if _NOT_SECRET.search(lowered):
        return False
    parts = [p for p in _NAME_PARTS.split(lowered) if p]
    if parts == ["key"] or _PUBLIC_PARTS.intersection(parts):
        # a bare `key` is a mapping's key (`dict2items`, `with_dict`: item.key is a sysctl or a
        # user name) or authorized_key's public key; `ssh_public_key` is public by name
        return False
    return bool(parts) and (
        "password" in lowered
        or any(p in _SECRET_PARTS for p in parts)
        or parts[-1] in _SECRET_LAST_PARTS
        or parts[-1].endswith(_SECRET_ENDINGS)
    )


def url_passwords(text: str) -> list[str]:
    """The userinfo passwords inside URLs in `text` (raw and %-decoded)."""
    found = []
    for match in _URL_USERINFO.finditer(text):
        found.append(match.group("secret"))
        decoded = unquote(match.group("secret"))
        if decoded != match.group("secret"):
            found.append(decoded)
    return found


def mask_urls(text: str) -> str:
    """`https://user:pass@host` → `https://user:********@host` anywhere in `text`."""
    if "://" not in text:
        return text
    return _URL_USERINFO.sub(lambda m: m.group("head") + MASK + "@", text)


def mask_tree(obj: Any) -> Any:
    """A copy of a JSON-like value with secret-named keys masked and URL passwords hidden;
    for output that has no run's Masker (inventory listings)."""
    return Masker().mask(obj)


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
        elif obj is not None and not isinstance(obj, bool):
            text = str(obj)
            if "{{" in text:
                return
            if secret and len(text) >= _MIN_LEN:
                found.add(text)
            elif isinstance(obj, str):
                found.update(p for p in url_passwords(text) if len(p) >= _MIN_LEN)

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
        if not value:
            return value
        value = mask_urls(value)
        pattern = self._pattern
        if pattern is None:
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
                if isinstance(key, str) and is_secret_name(key):
                    out[key] = _mask_all(value)
                else:
                    out[key] = self.mask(value)
            return out
        if isinstance(obj, (list, tuple)):
            return [self.mask(v) for v in obj]
        return obj


def _mask_all(obj: Any) -> Any:
    """Every scalar under a secret-named key is masked (None and booleans say nothing)."""
    if isinstance(obj, Mapping):
        return {k: _mask_all(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_mask_all(v) for v in obj]
    if obj is None or isinstance(obj, bool):
        return obj
    return MASK


def mask_url_passwords(obj: Any) -> Any:
    """A copy of a JSON-like value with URL passwords masked in every string: for documents
    written outside a run's masker (reports, history), where key names are data, not secrets."""
    if isinstance(obj, str):
        return mask_urls(obj)
    if isinstance(obj, Mapping):
        return {k: mask_url_passwords(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [mask_url_passwords(v) for v in obj]
    return obj
