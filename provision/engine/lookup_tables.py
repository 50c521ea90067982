"""The `csvfile` and `ini` lookups (ansible-core plugins/lookup/csvfile.py, ini.py): a value
from a CSV/TSV row or an INI/Java-properties key, options as keyword arguments or as
`key=value` words in the term. `find(name)` is the task's file search (`files/` first)."""

from __future__ import annotations

import configparser
import csv
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from provision.engine.lookup_options import convert, lookup_error, options, parse_kv

Find = Callable[[str], "Path | None"]

CSV_SPEC = {
    "col": ("integer", 1),
    "keycol": ("integer", 0),
    "default": (None, None),
    "delimiter": ("str", "TAB"),
    "file": ("str", "ansible.csv"),
    "encoding": ("str", "utf-8"),
}
INI_SPEC = {
    "type": ("str", "ini"),
    "file": ("str", "ansible.ini"),
    "section": ("str", "global"),
    "re": ("bool", False),
    "encoding": ("str", "utf-8"),
    "default": (None, ""),
    "case_sensitive": (None, False),
    "allow_no_value": ("bool", False),
    "interpolation": ("bool", True),
}
_INI_ALIASES = {"allow_none": "allow_no_value"}


def _read(find: Find, name: str, encoding: str) -> str:
    path = find(name)
    if path is None or not path.is_file():
        raise lookup_error(f"could not find the file {name!r} (No such file or directory)")
    try:
        with open(path, encoding=encoding) as handle:
            return handle.read()
    except (OSError, LookupError, UnicodeDecodeError) as exc:
        raise lookup_error(f"could not read {name!r}: {exc}") from None


def csvfile(find: Find, terms: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The `col` column of the row whose `keycol` column is the term (`default` else)."""
    opts = options("csvfile", CSV_SPEC, kwargs)
    if not terms:
        raise lookup_error("Search key is required but was not found")
    out: list[Any] = []
    for term in terms:
        words = parse_kv(str(term))
        if "_raw_params" not in words:
            raise lookup_error("Search key is required but was not found")
        key = words.pop("_raw_params")
        for name, value in words.items():
            if name not in CSV_SPEC:
                raise lookup_error(f"{name!r} is not a valid option")
            opts[name] = convert("csvfile", name, CSV_SPEC[name][0], value)
        delimiter = "\t" if opts["delimiter"] == "TAB" else opts["delimiter"]
        text = _read(find, opts["file"], opts["encoding"])
        value = opts["default"]
        try:
            for row in csv.reader(io.StringIO(text), dialect=csv.excel, delimiter=delimiter):
                if row and row[opts["keycol"]] == key:
                    value = row[opts["col"]]
                    break
        except (csv.Error, IndexError, TypeError) as exc:
            raise lookup_error(f"csvfile: {opts['file']}: {exc}") from None
        if value is not None:
            out.extend(value if isinstance(value, list) else [value])
    return out


def _inline_params(term: str) -> list[str]:
    """Ansible's ini `_parse_params`: words, a word with `NAME=` starting that option's
    value and later words joining it (values may hold spaces)."""
    params: dict[str, str] = {}
    keys: list[str] = []
    current = "key"
    for index, phrase in enumerate(term.split()):
        if "=" in phrase:
            for name in INI_SPEC:
                if f"{name}=" in phrase:
                    current = name
        if index == 0 or not params.get(current):
            params[current] = phrase
            keys.append(current)
        else:
            params[current] += " " + phrase
    return [params[k] for k in keys]


def ini(find: Find, terms: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """A key's value from a section (`re=true`: every matching key's), Java properties with
    `type=properties`; duplicate keys and missing sections are errors, as in Ansible."""
    opts = options("ini", INI_SPEC, kwargs, _INI_ALIASES)
    parser = configparser.ConfigParser(
        allow_no_value=bool(opts["allow_no_value"]),
        interpolation=configparser.BasicInterpolation() if opts["interpolation"] else None,
    )
    if opts["case_sensitive"]:
        parser.optionxform = str  # type: ignore[assignment,method-assign]
    out: list[Any] = []
    for raw_term in terms:
        term = key = str(raw_term)
        if "=" in term or " " in term.strip():
            found_key = False
            for param in _inline_params(term):
                if "=" in param:
                    name, _, value = param.partition("=")
                    if name not in INI_SPEC:
                        raise lookup_error(f"{name!r} is not a valid option.")
                    opts[name] = convert("ini", name, INI_SPEC[name][0], value)
                elif key == term:
                    key, found_key = param, True
            if not found_key:
                raise lookup_error(
                    "No key to look up was provided as first term within string inline "
                    f"options: {term}"
                )
        text = _read(find, opts["file"], opts["encoding"])
        section = opts["section"]
        if opts["type"] == "properties":
            text, section = "[java_properties]\n" + text, "java_properties"
        try:
            parser.read_file(io.StringIO(text))
        except configparser.DuplicateOptionError:
            raise lookup_error(f"Duplicate option in {opts['file']!r}.") from None
        except configparser.Error as exc:
            raise lookup_error(f"ini: {opts['file']}: {exc}") from None
        try:
            if opts["re"]:
                value: Any = [v for k, v in parser.items(section) if re.match(key, k)]
            else:
                try:
                    value = parser.get(section, key)
                except configparser.NoOptionError:
                    value = opts["default"]
        except configparser.NoSectionError:
            raise lookup_error(f"No section {section!r} in {opts['file']!r}.") from None
        except configparser.InterpolationError as exc:
            raise lookup_error(f"ini: {exc}") from None
        if value is not None:
            out.extend(value if isinstance(value, list) else [value])
    return out
