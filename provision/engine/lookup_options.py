"""Lookup options as Ansible's plugins take them: keyword arguments (`file='x.csv'`) and, for
the older lookups, `key=value` words inside a term (`'Smith file=people.csv col=1'`), each
option typed as the plugin's documentation declares it (ansible-core plugins/lookup/*.py).
"""

from __future__ import annotations

import codecs
import decimal
import re
from collections.abc import Mapping
from typing import Any

import jinja2

from provision.engine.kv_words import split_words

# name -> (type, default); a type of None takes the value as it is
Spec = Mapping[str, tuple[str | None, Any]]

_ESCAPE = re.compile(
    r"(\\U[0-9a-fA-F]{8}|\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}|\\N\{[^}]+\}|\\[\\'\"abfnrtv])"
)
_TRUE = {"y", "yes", "on", "1", "true", "t"}
_FALSE = {"n", "no", "off", "0", "false", "f", ""}


def lookup_error(message: str) -> jinja2.TemplateRuntimeError:
    return jinja2.TemplateRuntimeError(message)


def _unquote(value: str) -> str:
    if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"" and value[-2] != "\\":
        return value[1:-1]
    return value


def parse_kv(term: str) -> dict[str, str]:
    """Ansible's parse_kv: `k=v` words (quotes kept together, then removed, escapes decoded),
    the other words joined as `_raw_params`."""
    out: dict[str, str] = {}
    raw: list[str] = []
    try:
        spans = split_words(term)
    except ValueError as exc:
        raise lookup_error(str(exc)) from None
    for start, end in spans:
        word = term[start:end]
        decoded = _ESCAPE.sub(lambda m: codecs.decode(m.group(0), "unicode-escape"), word)
        pos = next(
            (i for i, c in enumerate(decoded) if c == "=" and i > 0 and decoded[i - 1] != "\\"),
            None,
        )
        if "=" not in decoded:
            raw.append(word)
        elif pos is None:
            raw.append(decoded.replace("\\=", "="))
        else:
            out[decoded[:pos].strip()] = _unquote(decoded[pos + 1 :].strip())
    if raw:
        out["_raw_params"] = " ".join(raw)
    return out


def convert(plugin: str, name: str, kind: str | None, value: Any) -> Any:
    """One option's value as its declared type (Ansible's config ensure_type)."""
    if kind is None or value is None:
        return value
    bad = lookup_error(
        f"Config {name!r} for {plugin!r} lookup plugin has an invalid value: "
        f"Invalid value provided for {kind!r}: {value!r}"
    )
    if kind == "integer":
        if isinstance(value, int):
            return int(value)
        if isinstance(value, (float, str)):
            try:
                number = decimal.Decimal(value)
                if number == int(number):
                    return int(number)
            except (decimal.DecimalException, ValueError):
                pass
        raise bad
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise bad
    if kind == "str":
        return value if isinstance(value, str) else str(value)
    if kind == "dict":
        if not isinstance(value, Mapping):
            raise bad
        return value
    return value


def options(
    plugin: str, spec: Spec, kwargs: Mapping[str, Any], aliases: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The plugin's options: its defaults, then the keyword arguments it declares (Ansible
    ignores the others)."""
    values = {name: default for name, (_kind, default) in spec.items()}
    for key, value in kwargs.items():
        name = (aliases or {}).get(key, key)
        if name in spec:
            values[name] = convert(plugin, name, spec[name][0], value)
    return values
