"""The core Ansible filters and tests (bool, to_json, regex_*, combine, version, succeeded…) and the shell quoting markers `quote` and `shell_code` produce."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import math
import os
import re
from collections.abc import Mapping
from typing import Any

import jinja2
import yaml

from provision.engine.comment_filter import comment
from provision.errors import UndefinedVariableError
from provision.shell import quote as shell_quote

# `omit`: an argument whose value is this placeholder is dropped, as in Ansible.


def to_bool(value: Any) -> bool:
    """Ansible's `bool`: yes/on/true/1 (any case) are true, everything else false."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, (int, float)):
        return value == 1
    return str(value).strip().lower() in ("yes", "on", "true", "1", "y", "t")


def _to_json(value: Any, indent: int | None = None, sort_keys: bool = False, **kw: Any) -> str:
    return json.dumps(value, indent=indent, sort_keys=sort_keys, default=str, ensure_ascii=False)


def _to_nice_json(value: Any, indent: int = 4, sort_keys: bool = True, **kw: Any) -> str:
    return json.dumps(value, indent=indent, sort_keys=sort_keys, default=str, ensure_ascii=False)


def _plain(value: Any) -> Any:
    """Dict/list subclasses (positions-aware YAML maps, lazy views) as plain ones for PyYAML."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _to_yaml(value: Any, **kw: Any) -> str:
    # As Ansible's: PyYAML's defaults (keys sorted) and unicode kept
    return yaml.safe_dump(
        _plain(value),
        default_flow_style=kw.get("default_flow_style"),
        sort_keys=kw.get("sort_keys", True),
        allow_unicode=True,
    )


def _to_nice_yaml(value: Any, indent: int = 4, **kw: Any) -> str:
    return yaml.safe_dump(
        _plain(value),
        indent=indent,
        default_flow_style=False,
        sort_keys=kw.get("sort_keys", True),
        allow_unicode=True,
    )


def _regex_flags(ignorecase: bool = False, multiline: bool = False) -> int:
    return (re.IGNORECASE if ignorecase else 0) | (re.MULTILINE if multiline else 0)


def _regex_replace(
    value: Any,
    pattern: str = "",
    replacement: str = "",
    ignorecase: bool = False,
    multiline: bool = False,
    count: int = 0,
) -> str:
    return re.sub(
        pattern, replacement, str(value), count=count, flags=_regex_flags(ignorecase, multiline)
    )


def _regex_search(
    value: Any, pattern: str, *groups: str, ignorecase: bool = False, multiline: bool = False
) -> Any:
    match = re.search(pattern, str(value), _regex_flags(ignorecase, multiline))
    if not match:
        return None
    if not groups:
        return match.group(0)
    out = []
    for g in groups:
        if g.startswith("\\g<"):
            out.append(match.group(g[3:-1]))
        elif g.startswith("\\"):
            out.append(match.group(int(g[1:])))
        else:
            out.append(match.group(g))
    return out


def _regex_findall(
    value: Any, pattern: str, ignorecase: bool = False, multiline: bool = False
) -> list:
    return re.findall(pattern, str(value), _regex_flags(ignorecase, multiline))


def _hash(value: Any, algorithm: str = "sha1") -> str:
    h = hashlib.new(algorithm)
    h.update(str(value).encode())
    return h.hexdigest()


def _combine(*dicts: Any, recursive: bool = False, list_merge: str = "replace") -> dict:
    def merge(a: dict, b: Mapping) -> dict:
        out = dict(a)
        for k, v in b.items():
            if recursive and isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
                out[k] = merge(dict(out[k]), v)
            elif list_merge != "replace" and isinstance(v, list) and isinstance(out.get(k), list):
                if list_merge == "append":
                    out[k] = out[k] + v
                elif list_merge == "prepend":
                    out[k] = v + out[k]
                elif list_merge in ("append_rp", "prepend_rp"):
                    kept = [x for x in out[k] if x not in v]
                    out[k] = kept + v if list_merge == "append_rp" else v + kept
                else:
                    raise jinja2.FilterArgumentError(f"combine: unknown list_merge {list_merge!r}")
            else:
                out[k] = v
        return out

    result: dict = {}
    for d in dicts:
        for one in d if isinstance(d, list) else [d]:
            if not isinstance(one, Mapping):
                raise jinja2.FilterArgumentError(f"combine expects dicts, got {type(one).__name__}")
            result = merge(result, one)
    return result


def _dict2items(value: Mapping, key_name: str = "key", value_name: str = "value") -> list:
    if not isinstance(value, Mapping):
        raise jinja2.FilterArgumentError(f"dict2items expects a dict, got {type(value).__name__}")
    return [{key_name: k, value_name: v} for k, v in value.items()]


def _items2dict(value: list, key_name: str = "key", value_name: str = "value") -> dict:
    return {item[key_name]: item[value_name] for item in value}


def _flatten(value: Any, levels: int | None = None) -> list:
    out: list = []
    for item in value:
        if isinstance(item, (list, tuple)) and (levels is None or levels > 0):
            out.extend(_flatten(item, None if levels is None else levels - 1))
        elif item is not None:
            out.append(item)
    return out


def _mandatory(value: Any, msg: str | None = None) -> Any:
    if isinstance(value, jinja2.Undefined):
        name = getattr(value, "_undefined_name", None) or "value"
        raise UndefinedVariableError(str(name), msg or f"Mandatory variable '{name}' not defined.")
    return value


def _ternary(value: Any, true_val: Any, false_val: Any, none_val: Any = None) -> Any:
    if value is None and none_val is not None:
        return none_val
    return true_val if value else false_val


def _version_key(version: str) -> tuple:
    parts = re.split(r"[.+\-]", str(version))
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts if p != "")


def _version_compare(
    value: Any,
    version: Any,
    operator: str = "eq",
    strict: bool = False,
    version_type: str | None = None,
) -> bool:
    try:
        from packaging.version import Version

        left, right = Version(str(value)), Version(str(version))
    except Exception:  # not PEP 440: fall back to a loose numeric/lexical comparison
        left, right = _version_key(str(value)), _version_key(str(version))  # type: ignore[assignment]
    ops = {
        "==": "eq",
        "=": "eq",
        "eq": "eq",
        "<": "lt",
        "lt": "lt",
        "<=": "le",
        "le": "le",
        ">": "gt",
        "gt": "gt",
        ">=": "ge",
        "ge": "ge",
        "!=": "ne",
        "<>": "ne",
        "ne": "ne",
    }
    op = ops.get(operator)
    if op is None:
        raise jinja2.FilterArgumentError(f"version: unknown operator {operator!r}")
    return bool(getattr(left, f"__{op}__")(right))


def _extract(key: Any, container: Any, morekeys: Any = None) -> Any:
    value = container[key]
    for k in [] if morekeys is None else (morekeys if isinstance(morekeys, list) else [morekeys]):
        value = value[k]
    return value


def _split(value: Any, sep: str | None = None, maxsplit: int = -1) -> list:
    return str(value).split(sep, maxsplit)


def _is_nan(value: Any) -> bool:
    try:
        return math.isnan(value)
    except TypeError:
        return False


def _result_flag(flag: str) -> Any:
    def test(result: Any) -> bool:
        if not isinstance(result, Mapping):
            raise jinja2.TemplateRuntimeError(f"the '{flag}' test expects a registered task result")
        if flag == "succeeded":
            return not result.get("failed", False)
        if flag in ("finished", "started"):  # an async job's: 0/1 or false/true (Ansible's)
            return result.get(flag, 1) == 1
        return bool(result.get(flag, False))

    return test


class ShellCode(str):
    """Text a `shell:` task inserts as code, not as a value: made only by the `shell_code`
    filter (on purpose, documented) and by `quote` (already one quoted word). Jinja's `Markup`
    (`safe`, `e`, `tojson`, `xmlattr`…) is data like any other value."""

    __slots__ = ()


class QuotedWord(str):
    """`quote`'s output: one quoted shell word. A `shell:` task inserts it as is where a bare
    word stands (so `echo {{ x | quote }}` behaves as in Ansible) and as data anywhere else
    (inside "…" the quotes would be literal and the contents expand)."""

    __slots__ = ()


def _quote(value: Any) -> QuotedWord:
    return QuotedWord(shell_quote(str(value)))


def _shell_code(value: Any) -> ShellCode:
    return ShellCode(str(value))


FILTERS: dict[str, Any] = {
    "bool": to_bool,
    "to_json": _to_json,
    "to_nice_json": _to_nice_json,
    "from_json": lambda s: json.loads(s),
    "to_yaml": _to_yaml,
    "to_nice_yaml": _to_nice_yaml,
    "from_yaml": lambda s: yaml.safe_load(s),
    "basename": lambda p: os.path.basename(str(p)),
    "dirname": lambda p: os.path.dirname(str(p)),
    "expanduser": lambda p: os.path.expanduser(str(p)),
    "realpath": lambda p: os.path.realpath(str(p)),
    "splitext": lambda p: list(os.path.splitext(str(p))),
    "path_join": lambda parts: os.path.join(*[str(p) for p in parts]),
    "quote": _quote,
    "shell_code": _shell_code,
    "regex_replace": _regex_replace,
    "regex_search": _regex_search,
    "regex_findall": _regex_findall,
    "regex_escape": lambda s: re.escape(str(s)),
    "b64encode": lambda s: base64.b64encode(str(s).encode()).decode(),
    "b64decode": lambda s: base64.b64decode(str(s)).decode(),
    "hash": _hash,
    "checksum": lambda s: _hash(s, "sha1"),
    "sha1": lambda s: _hash(s, "sha1"),
    "md5": lambda s: _hash(s, "md5"),
    "combine": _combine,
    "dict2items": _dict2items,
    "items2dict": _items2dict,
    "flatten": _flatten,
    "mandatory": _mandatory,
    "ternary": _ternary,
    "type_debug": lambda v: type(v).__name__,
    "zip": lambda *lists: [list(t) for t in zip(*lists, strict=False)],
    "zip_longest": lambda *lists, fillvalue=None: [
        list(t) for t in itertools.zip_longest(*lists, fillvalue=fillvalue)
    ],
    "version_compare": _version_compare,
    "version": _version_compare,
    "extract": _extract,
    "split": _split,
    "comment": comment,
}

TESTS: dict[str, Any] = {
    "version": _version_compare,
    "version_compare": _version_compare,
    "match": lambda v, p, ignorecase=False, multiline=False: (
        re.match(p, str(v), _regex_flags(ignorecase, multiline)) is not None
    ),
    "search": lambda v, p, ignorecase=False, multiline=False: (
        re.search(p, str(v), _regex_flags(ignorecase, multiline)) is not None
    ),
    "regex": lambda v, p, ignorecase=False, multiline=False, match_type="search": (
        getattr(re, match_type)(p, str(v), _regex_flags(ignorecase, multiline)) is not None
    ),
    "succeeded": _result_flag("succeeded"),
    "success": _result_flag("succeeded"),
    "successful": _result_flag("succeeded"),
    "failed": _result_flag("failed"),
    "failure": _result_flag("failed"),
    "changed": _result_flag("changed"),
    "change": _result_flag("changed"),
    "skipped": _result_flag("skipped"),
    "skip": _result_flag("skipped"),
    "finished": _result_flag("finished"),
    "started": _result_flag("started"),
    "truthy": lambda v: bool(v),
    "falsy": lambda v: not v,
    "subset": lambda a, b: all(x in b for x in a),
    "superset": lambda a, b: all(x in a for x in b),
    "contains": lambda seq, v: v in seq,
    # controller-side path tests, like Ansible's
    "exists": lambda p: os.path.exists(os.path.expanduser(str(p))),
    "file": lambda p: os.path.isfile(os.path.expanduser(str(p))),
    "directory": lambda p: os.path.isdir(os.path.expanduser(str(p))),
    "link": lambda p: os.path.islink(os.path.expanduser(str(p))),
    "abs": lambda p: os.path.isabs(str(p)),
    "link_exists": lambda p: os.path.lexists(os.path.expanduser(str(p))),
    "same_file": lambda a, b: os.path.samefile(str(a), str(b)),
    "mount": lambda p: os.path.ismount(str(p)),
    "issubset": lambda a, b: all(x in b for x in a),
    "issuperset": lambda a, b: all(x in a for x in b),
    "nan": _is_nan,
}
# Ansible's other names of the same tests (plugins/test/files.py, mathstuff.py)
TESTS.update(
    {f"is_{name}": TESTS[name] for name in ("file", "link", "abs", "same_file", "mount")}
    | {"is_dir": TESTS["directory"], "isnan": _is_nan}
)
