"""Jinja2 for playbooks: StrictUndefined, the filters people use, native values, lazy variables.

- A string that is exactly one `{{ expr }}` evaluates to the expression's native value (a list
  stays a list), like Ansible 2.19; anything else renders to a string.
- Variables may themselves hold templates (`url: "{{ base }}/simple"`); they are rendered when
  looked up (`LazyVars`), so an unused variable with an undefined reference is no error.
- An undefined variable raises `UndefinedVariableError` naming the variable; the runner adds the
  task and host.
- Strings that reach a shell are rendered by `render_shell`: every `{{ }}` value comes back as a
  placeholder plus the value, and the command module decides how to pass it as *data*
  (see provision/modules/command.py).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import itertools
import json
import os
import re
import secrets
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import jinja2
import yaml
from jinja2 import nodes
from jinja2.nativetypes import NativeCodeGenerator
from jinja2.runtime import ChainableUndefined, StrictUndefined

from provision.engine.filters import EXTRA_FILTERS
from provision.engine.lookups import lookup, query
from provision.errors import ProvisionError
from provision.shell import quote as shell_quote

# `omit`: an argument whose value is this placeholder is dropped, as in Ansible.
OMIT = "__omit_place_holder__" + secrets.token_hex(8)
_MARKERS = ("{{", "{%", "{#")
_SINGLE_EXPR = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\}\}|\{\{).)*)\}\}\s*$", re.DOTALL)
_UNDEFINED_NAME = re.compile(r"'([^']+)' is undefined")
_MAX_DEPTH = 40


class TemplateError(ProvisionError):
    """A template failed to parse or render; `where` says which string/file."""


class UndefinedVariableError(TemplateError):
    def __init__(
        self, variable: str, message: str, attribute: bool = False, source: str | None = None
    ) -> None:
        super().__init__(message)
        self.variable = variable
        self.attribute = attribute  # a missing key/attribute of a defined value
        self.source = source  # template file:line, when it happened in a template file


def _template_line(template: jinja2.Template, exc: BaseException) -> int | None:
    """The template line an exception was raised at (from the compiled code's frames)."""
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if (
            tb.tb_frame.f_globals.get("__jinja_template__") is template
            or tb.tb_frame.f_code.co_filename == "<template>"
        ):
            try:
                line = template.get_corresponding_lineno(tb.tb_lineno)
            except Exception:
                pass
        tb = tb.tb_next
    return line


class StrictChainableUndefined(ChainableUndefined, StrictUndefined):
    """Strict (any use is an error) but chainable, so `foo.bar | default('x')` and
    `foo.bar is defined` work when `foo` is undefined — what playbook authors expect."""

    __slots__ = ()


def is_template(value: Any) -> bool:
    return isinstance(value, str) and any(m in value for m in _MARKERS)


def contains_template(value: Any) -> bool:
    if isinstance(value, str):
        return is_template(value)
    if isinstance(value, dict):  # plain data only: never walk views like hostvars
        return any(contains_template(k) or contains_template(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(contains_template(v) for v in value)
    return False


# -- filters and tests -------------------------------------------------------------------------


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


def _unique_list(seq: Any) -> list:
    out: list = []
    for item in seq:
        if item not in out:
            out.append(item)
    return out


def _human_readable(size: Any, isbits: bool = False, unit: str | None = None) -> str:
    value = float(size)
    units = ["", "K", "M", "G", "T", "P", "E"]
    suffix = "b" if isbits else "B"
    for u in units:
        if unit == u or (unit is None and abs(value) < 1024) or u == units[-1]:
            return f"{value:.2f} {u}{suffix}"
        value /= 1024.0
    return f"{value:.2f} {suffix}"  # pragma: no cover


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


def _result_flag(flag: str) -> Any:
    def test(result: Any) -> bool:
        if not isinstance(result, Mapping):
            raise jinja2.TemplateRuntimeError(f"the '{flag}' test expects a registered task result")
        if flag == "succeeded":
            return not result.get("failed", False)
        if flag == "finished":
            return True
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
    "unique": _unique_list,
    "union": lambda a, b: _unique_list(list(a) + list(b)),
    "intersect": lambda a, b: _unique_list([x for x in a if x in b]),
    "difference": lambda a, b: _unique_list([x for x in a if x not in b]),
    "symmetric_difference": lambda a, b: _unique_list(
        [x for x in list(a) + list(b) if (x in a) != (x in b)]
    ),
    "zip": lambda *lists: [list(t) for t in zip(*lists, strict=False)],
    "zip_longest": lambda *lists, fillvalue=None: [
        list(t) for t in itertools.zip_longest(*lists, fillvalue=fillvalue)
    ],
    "human_readable": _human_readable,
    "version_compare": _version_compare,
    "version": _version_compare,
    "extract": _extract,
    "split": _split,
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
    "failed": _result_flag("failed"),
    "failure": _result_flag("failed"),
    "changed": _result_flag("changed"),
    "change": _result_flag("changed"),
    "skipped": _result_flag("skipped"),
    "skip": _result_flag("skipped"),
    "finished": _result_flag("finished"),
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
}


# -- environments ------------------------------------------------------------------------------


class _SingleValueNativeCodeGenerator(NativeCodeGenerator):
    pass


class _NativeEnvironment(jinja2.Environment):
    """Evaluates one `{{ expr }}` to its value; never literal_eval's strings (a string var "123"
    stays a string, unlike jinja2.nativetypes)."""

    code_generator_class = _SingleValueNativeCodeGenerator


_shell_state = threading.local()


@jinja2.pass_context
def _shell_finalize(ctx: Any, value: Any) -> Any:
    """In shell strings each `{{ }}` value becomes a placeholder; the value travels separately."""
    if isinstance(value, jinja2.Undefined):
        str(value)  # raises UndefinedError naming the variable
    registry = getattr(_shell_state, "values", None)
    if registry is None or type(value) is ShellCode:
        return value  # `| shell_code` marks a value as shell code on purpose
    registry.append(value)
    return f"{_shell_state.nonce}{len(registry) - 1}_"


def _make_env(cls: type[jinja2.Environment] = jinja2.Environment, **kw: Any) -> jinja2.Environment:
    env = cls(
        undefined=StrictChainableUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        autoescape=False,
        extensions=["jinja2.ext.loopcontrols", "jinja2.ext.do"],
        **kw,
    )
    env.filters.update(FILTERS)
    env.filters.update(EXTRA_FILTERS)  # engine/filters.py
    env.tests.update(TESTS)
    env.globals.update({"lookup": lookup, "query": query, "q": query, "omit": OMIT})
    return env


_ENV = _make_env()


@jinja2.pass_context
def _keep_value(ctx: Any, value: Any) -> Any:
    """Identity; needing the context stops Jinja from folding constants into strings at compile
    time, so `{{ 'yes' | bool }}` stays True."""
    return value


_NATIVE_ENV = _make_env(_NativeEnvironment, finalize=_keep_value)
_SHELL_ENV = _make_env(finalize=_shell_finalize)


@functools.lru_cache(maxsize=4096)
def _is_single_expression(source: str) -> bool:
    """Exactly one `{{ ... }}` and nothing but whitespace around it (Jinja's own lexer, so
    `{{ {'a': {'b': 1}} }}` counts)."""
    try:
        tokens = [(kind, value) for _, kind, value in _ENV.lex(source)]
    except jinja2.TemplateSyntaxError:
        return False
    while tokens and tokens[0][0] == "data" and not tokens[0][1].strip():
        tokens.pop(0)
    while tokens and tokens[-1][0] == "data" and not tokens[-1][1].strip():
        tokens.pop()
    if not tokens or tokens[0][0] != "variable_begin" or tokens[-1][0] != "variable_end":
        return False
    return sum(1 for kind, _ in tokens if kind == "variable_begin") == 1 and all(
        kind != "data" for kind, _ in tokens
    )


def _escape_backslashes(source: str, env: jinja2.Environment) -> str:
    """As Ansible: a backslash inside a string constant of a `{{ }}` expression is literal
    (`regex_replace('^(\\d+)$', 'n\\1')` written in YAML means what it says), not a Python
    escape. Not for conditionals nor template files, as in Ansible."""
    if "\\" not in source or "{{" not in source:
        return source
    out: list[str] = []
    in_variable = False
    try:
        for _line, token, value in env.lexer.tokeniter(env.preprocess(source), None):
            if token == "variable_begin":
                in_variable = True
            elif token == "variable_end":
                in_variable = False
            elif in_variable and token == "string":
                value = value.replace("\\", "\\\\")
            out.append(value)
    except jinja2.TemplateSyntaxError:
        return source  # compiling reports it
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def _compile(source: str, kind: str) -> jinja2.Template:
    # "cond": conditionals (when, until, changed_when, failed_when) keep Jinja's escapes
    env = {"str": _ENV, "native": _NATIVE_ENV, "shell": _SHELL_ENV, "cond": _NATIVE_ENV}[kind]
    return env.from_string(source if kind == "cond" else _escape_backslashes(source, env))


def check_syntax(source: str) -> str | None:
    """None when `source` parses as a template, else the error text (for validation)."""
    try:
        _compile(source, "str")
    except jinja2.TemplateSyntaxError as exc:
        line = f" (line {exc.lineno} of the template)" if source.count("\n") else ""
        return f"{exc.message}{line}"
    return None


def _undefined_error(exc: jinja2.UndefinedError) -> UndefinedVariableError:
    """'x' is undefined -> variable x; `'dict object' has no attribute 'y'` -> attribute y."""
    message = str(exc)
    match = _UNDEFINED_NAME.search(message)
    if match:
        return UndefinedVariableError(match.group(1), f"undefined variable '{match.group(1)}'")
    attr = re.search(r"has no attribute '([^']+)'", message)
    return UndefinedVariableError(attr.group(1) if attr else "", message, attribute=bool(attr))


# -- lazy variables ----------------------------------------------------------------------------


class LazyVars(Mapping):
    """Variables as Jinja sees them: values holding templates render on first lookup, with the
    same variables, and are cached for this evaluation."""

    def __init__(self, source: Mapping[str, Any], templar: Templar) -> None:
        self._source = source
        self._templar = templar
        self._cache: dict[str, Any] = {}
        self._rendering: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        if key in self._cache:
            return self._cache[key]
        try:
            value = self._source[key]
        except KeyError:
            if key in _ENV.globals:
                return _ENV.globals[key]
            raise
        if contains_template(value):
            if key in self._rendering:
                raise TemplateError(f"variable '{key}' refers to itself (recursive template)")
            self._rendering.add(key)
            try:
                value = self._templar.render(value, self)
            finally:
                self._rendering.discard(key)
        self._cache[key] = value
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._source or key in _ENV.globals

    def __iter__(self) -> Iterator[str]:
        return iter(self._source)

    def __len__(self) -> int:
        return len(self._source)

    def raw(self) -> Mapping[str, Any]:
        return self._source


@dataclass
class ShellTemplate:
    """A rendered shell string: `text` with placeholders `{nonce}{index}_`, `values` by index."""

    text: str
    values: list[Any] = field(default_factory=list)
    nonce: str = ""

    def placeholder(self, index: int) -> str:
        return f"{self.nonce}{index}_"

    @property
    def placeholder_re(self) -> re.Pattern[str]:
        return re.compile(re.escape(self.nonce) + r"(\d+)_")


class Templar:
    """Renders values against variables. Stateless; safe to share between host threads."""

    def vars(self, source: Mapping[str, Any]) -> LazyVars:
        return source if isinstance(source, LazyVars) else LazyVars(source, self)

    def _run(self, template: jinja2.Template, variables: Mapping[str, Any]) -> Any:
        ctx = template.new_context(self.vars(variables), shared=True)
        try:
            out = list(template.root_render_func(ctx))
        except jinja2.UndefinedError as exc:
            raise _undefined_error(exc) from None
        except TemplateError:
            raise
        except Exception as exc:
            raise TemplateError(f"{type(exc).__name__}: {exc}") from None
        return out

    def render(self, value: Any, variables: Mapping[str, Any]) -> Any:
        """Render strings (recursively through dicts and lists); non-templates pass through."""
        if isinstance(value, str):
            if not is_template(value):
                return value
            if _is_single_expression(value):
                out = self._run(self._template(value, "native"), variables)
                if len(out) == 1:
                    if isinstance(out[0], jinja2.Undefined):
                        try:
                            str(out[0])  # StrictUndefined raises with the variable's name
                        except jinja2.UndefinedError as exc:
                            raise _undefined_error(exc) from None
                    return out[0]
                return "".join(str(v) for v in out)
            return "".join(self._run(self._template(value, "str"), variables))
        if isinstance(value, dict):
            return {self.render(k, variables): self.render(v, variables) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.render(v, variables) for v in value]
        return value

    def render_text(
        self, source: str, variables: Mapping[str, Any], name: str = "<template>"
    ) -> str:
        """A template file's text (the `template` module). Errors name the file and line."""
        try:
            template = _ENV.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"{name}:{exc.lineno}: {exc.message}") from None
        ctx = template.new_context(self.vars(variables), shared=True)
        try:
            return "".join(str(v) for v in template.root_render_func(ctx))
        except Exception as exc:  # name the template file and line in every error
            line = _template_line(template, exc)
            where = f"{name}:{line}" if line else name
            if isinstance(exc, jinja2.UndefinedError):
                err = _undefined_error(exc)
                raise UndefinedVariableError(
                    err.variable, f"{where}: {err}", err.attribute, source=where
                ) from None
            if isinstance(exc, UndefinedVariableError):
                raise UndefinedVariableError(
                    exc.variable, f"{where}: {exc}", exc.attribute, source=where
                ) from None
            raise TemplateError(
                f"{where}: {type(exc).__name__ if not isinstance(exc, TemplateError) else ''}{': ' if not isinstance(exc, TemplateError) else ''}{exc}"
            ) from None

    def evaluate(self, expression: Any, variables: Mapping[str, Any]) -> Any:
        """A bare Jinja expression (`when`, `until`, `changed_when`, `failed_when`)."""
        if isinstance(expression, bool) or expression is None:
            return expression
        if not isinstance(expression, str):
            return expression
        text = expression.strip()
        single = _SINGLE_EXPR.match(text)
        if single:  # `when: "{{ x }}"` works too (Ansible warns but allows it)
            text = single.group("expr").strip()
        out = self._run(self._template("{{ " + text + " }}", "cond"), variables)
        if len(out) == 1 and isinstance(out[0], jinja2.Undefined):
            try:
                str(out[0])  # StrictUndefined raises with the variable's name
            except jinja2.UndefinedError as exc:
                raise _undefined_error(exc) from None
        return out[0] if len(out) == 1 else "".join(str(v) for v in out)

    def condition(self, expressions: list[Any], variables: Mapping[str, Any]) -> bool:
        for expression in expressions:
            value = self.evaluate(expression, variables)
            if isinstance(value, str):
                value = (
                    to_bool(value)
                    if value.strip().lower()
                    in ("yes", "no", "true", "false", "on", "off", "0", "1", "")
                    else bool(value)
                )
            if not value:
                return False
        return True

    def render_shell(self, value: Any, variables: Mapping[str, Any]) -> ShellTemplate:
        """Render a shell string keeping every `{{ }}` value apart from the code around it."""
        if not isinstance(value, str):
            value = str(value)
        if not is_template(value):
            return ShellTemplate(value)
        nonce = "PV" + secrets.token_hex(4) + "x"
        _shell_state.values = []
        _shell_state.nonce = nonce
        try:
            text = "".join(str(v) for v in self._run(self._template(value, "shell"), variables))
            values = list(_shell_state.values)
        finally:
            _shell_state.values = None
        return ShellTemplate(text, values, nonce)

    @staticmethod
    def _template(source: str, kind: str) -> jinja2.Template:
        try:
            return _compile(source, kind)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"template syntax error: {exc.message} in {source!r}") from None


def template_variables(source: str) -> set[str]:
    """Names a template refers to (for messages and validation)."""
    try:
        ast = _ENV.parse(source)
    except jinja2.TemplateSyntaxError:
        return set()
    return {n.name for n in ast.find_all(nodes.Name) if n.ctx == "load"}
