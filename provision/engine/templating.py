"""Jinja2 for playbooks: StrictUndefined, the filters people use, native values, lazy variables.

- A string that is exactly one `{{ expr }}` evaluates to the expression's native value (a list
  stays a list), like Ansible 2.19; anything else renders to a string.
- Variables may themselves hold templates (`url: "{{ base }}/simple"`); they are rendered when
  looked up (`LazyVars`), so an unused variable with an undefined reference is no error.
- Only the project's own text is a template (`is_template`: a plain `str`). What a host sent and
  what a template produced is marked as data (provision/taint.py) and never rendered.
- An undefined variable raises `UndefinedVariableError` naming the variable; the runner adds the
  task and host.
- Strings that reach a shell are rendered by `render_shell`: every `{{ }}` value comes back as a
  placeholder plus the value, and the command module decides how to pass it as *data*
  (see provision/modules/command.py).
"""

from __future__ import annotations

import functools
import re
import secrets
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.nativetypes import NativeCodeGenerator
from jinja2.runtime import ChainableUndefined, StrictUndefined

from provision.engine import host_paths
from provision.engine.conditionals import (
    BrokenConditionalError,
    conditional_truth,
    empty_conditional,
)
from provision.engine.core_filters import FILTERS, TESTS, QuotedWord, ShellCode, to_bool
from provision.engine.filters import EXTRA_FILTERS
from provision.engine.lookups import lookup, query, use_native_environment
from provision.errors import TemplateError, UndefinedVariableError
from provision.inventory import loader as inventory_loader
from provision.taint import DataDict, DataList

__all__ = [
    "FILTERS",
    "TESTS",
    "LazyVars",
    "OMIT",
    "QuotedWord",
    "ShellCode",
    "ShellTemplate",
    "Templar",
    "TemplateError",
    "UndefinedVariableError",
    "check_syntax",
    "contains_template",
    "is_template",
    "template_variables",
    "to_bool",
]

# `omit`: an argument whose value is this placeholder is dropped, as in Ansible.
OMIT = "__omit_place_holder__" + secrets.token_hex(8)
_MARKERS = ("{{", "{%", "{#")
_SINGLE_EXPR = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\}\}|\{\{).)*)\}\}\s*$", re.DOTALL)
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_UNDEFINED_NAME = re.compile(r"'([^']+)' is undefined")
_MAX_DEPTH = 40


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
    """The one rule: a template is a plain `str` (the project's files, `-e`) holding a marker.
    Host data and template output are `DataStr` (provision/taint.py), `quote`'s output is a
    `QuotedWord`: never templates, whatever they contain."""
    return type(value) is str and any(m in value for m in _MARKERS)


def is_whole_template(value: Any) -> bool:
    """`"{{ expr }}"` and nothing else: a value that is one expression (Ansible's
    `_variable_params`: a module's arguments given as one template of a mapping)."""
    return (
        is_template(value)
        and value.count("{{") == 1
        and value.strip().startswith("{{")
        and value.strip().endswith("}}")
    )


def contains_template(value: Any) -> bool:
    if isinstance(value, str):
        return is_template(value)
    if isinstance(value, (DataDict, DataList)):  # marked whole: no walk
        return False
    if isinstance(value, dict):  # plain data only: never walk views like hostvars
        return any(contains_template(k) or contains_template(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(contains_template(v) for v in value)
    return False


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


class _Lookups:
    """Attribute and item access (`x.stdout`, `facts['os']`) seen by the controller-path rule."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        value = super().getattr(obj, attribute)  # type: ignore[misc]
        if host_paths.active():
            host_paths.noted(attribute, value)
        return value

    def getitem(self, obj: Any, argument: Any) -> Any:
        value = super().getitem(obj, argument)  # type: ignore[misc]
        if host_paths.active():
            host_paths.noted(argument, value)
        return value


def _make_env(cls: type[jinja2.Environment] = jinja2.Environment, **kw: Any) -> jinja2.Environment:
    cls = type(cls.__name__, (_Lookups, cls), {})
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
    env.globals.update(
        {"lookup": lookup, "query": query, "q": query, "omit": OMIT, "now": _now, "undef": _undef}
    )
    return env


def _undef(hint: str | None = None) -> jinja2.Undefined:
    """Ansible's `undef()` global: an undefined value (an error where it is used, `hint` says)."""
    return StrictChainableUndefined(hint=hint)


def _now(utc: bool = False, fmt: str | None = None) -> Any:
    """Ansible's `now()` global: the controller's time (a datetime, or `fmt`'s strftime text)."""
    import datetime

    stamp = (
        datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        if utc
        else datetime.datetime.now()
    )
    return stamp.strftime(fmt) if fmt else stamp


_ENV = _make_env()


@jinja2.pass_context
def _keep_value(ctx: Any, value: Any) -> Any:
    """Identity; needing the context stops Jinja from folding constants into strings at compile
    time, so `{{ 'yes' | bool }}` stays True. In a controller path, a host's value must be one
    plain segment (engine/host_paths.py)."""
    if host_paths.active():
        host_paths.noted("(a value)", value)
    return value


_ENV.finalize = _keep_value
_NATIVE_ENV = _make_env(_NativeEnvironment, finalize=_keep_value)
use_native_environment(_NATIVE_ENV)  # the template lookup's overlay
_SHELL_ENV = _make_env(finalize=_shell_finalize)


def native_environment() -> jinja2.Environment:
    """The environment whose one `{{ }}` keeps its value (for a template lookup's overlay)."""
    return _NATIVE_ENV


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
    same variables, and are cached for this evaluation. Only the project's own text is a
    template (`is_template`); host data and earlier templates' output (provision/taint.py) are
    returned as they are, never rendered."""

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


class _JinjaVars(Mapping):
    """LazyVars as a template sees them: a variable whose own template is undefined is an
    undefined value (so `x is defined` is false and `x | default(…)` applies, as in Ansible),
    not an error at the lookup; using it raises the inner variable's error."""

    __slots__ = ("_lazy",)

    def __init__(self, lazy: LazyVars) -> None:
        self._lazy = lazy

    def __getitem__(self, key: str) -> Any:
        try:
            value = self._lazy[key]
        except UndefinedVariableError as exc:
            if exc.attribute or not exc.variable:
                return StrictChainableUndefined(hint=str(exc), name=key)
            return StrictChainableUndefined(name=exc.variable)
        if host_paths.active():
            host_paths.noted(key, value)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self._lazy)

    def __len__(self) -> int:
        return len(self._lazy)


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

    def __init__(self, allow_broken_conditionals: bool = False) -> None:
        # ansible.cfg's ALLOW_BROKEN_CONDITIONALS: non-boolean conditionals take their truth
        self.allow_broken_conditionals = allow_broken_conditionals

    def vars(self, source: Mapping[str, Any]) -> LazyVars:
        return source if isinstance(source, LazyVars) else LazyVars(source, self)

    def _run(self, template: jinja2.Template, variables: Mapping[str, Any]) -> Any:
        ctx = template.new_context(_JinjaVars(self.vars(variables)), shared=True)
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
        if isinstance(value, (DataDict, DataList)):
            return value
        if isinstance(value, dict):
            return {self.render(k, variables): self.render(v, variables) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.render(v, variables) for v in value]
        return value

    def render_path(self, value: Any, variables: Mapping[str, Any], what: str) -> Any:
        """`render` for a controller path (`what` names it): each `{{ }}` value from host data
        must be one plain path segment (engine/host_paths.py)."""
        if not contains_template(value):
            return value
        with host_paths.controller_path(what):
            return self.render(value, variables)

    def render_text(
        self, source: str, variables: Mapping[str, Any], name: str = "<template>"
    ) -> str:
        """A template file's text (the `template` module). Errors name the file and line."""
        try:
            template = _ENV.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"{name}:{exc.lineno}: {exc.message}") from None
        ctx = template.new_context(_JinjaVars(self.vars(variables)), shared=True)
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
        if type(expression) is not str:
            if isinstance(expression, str):  # host data, a template's output, !unsafe text
                raise TemplateError("Encountered untrusted template or expression.")
            return expression  # a literal value
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

    def condition(
        self, expressions: list[Any], variables: Mapping[str, Any], where: str | None = None
    ) -> bool:
        """All of `expressions` true (the first false one stops), by ansible-core 2.19's rule
        (provision/engine/conditionals.py); `where`: the conditional's position, for messages."""
        for expression in expressions:
            if not self._one_condition(expression, variables, where):
                return False
        return True

    def _one_condition(
        self, expression: Any, variables: Mapping[str, Any], where: str | None
    ) -> bool:
        allow = self.allow_broken_conditionals
        if isinstance(expression, str):
            expression = type(expression)(expression.strip())
        if expression is None or expression == "":
            return empty_conditional(allow)
        if isinstance(expression, bool):
            return expression
        if type(expression) is not str:  # a literal (`when: 1`), or host data: a value
            if isinstance(expression, str):  # never an expression (Ansible's trust check)
                raise TemplateError("Encountered untrusted template or expression.")
            if not allow:
                raise BrokenConditionalError("Conditional expressions must be strings.")
            return conditional_truth(self.render(expression, variables), allow, where)
        single = _SINGLE_EXPR.match(expression)
        if single:  # `when: "{{ x }}"`: its value, or the expression a variable holds
            inner = single.group("expr").strip()
            value = self.evaluate(inner, variables)
            if isinstance(value, str):
                value = type(value)(value.strip())
            if value is None or value == "":
                return empty_conditional(allow)
            if not isinstance(value, str):
                return conditional_truth(value, allow, where)
            # Ansible's one allowed indirection: a variable of the play's own holding an
            # expression. Host data, or text a filter made (maybe from host data), never is one.
            if type(value) is not str or not _VAR_NAME.match(inner):
                raise TemplateError("Encountered untrusted template or expression.")
            expression = value
        return conditional_truth(self.evaluate(expression, variables), allow, where)

    def render_shell(self, value: Any, variables: Mapping[str, Any]) -> ShellTemplate:
        """Render a shell string keeping every `{{ }}` value apart from the code around it."""
        if not is_template(value):
            return ShellTemplate(str(value))
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


def _render_inventory_text(text: str, variables: dict[str, Any]) -> Any:
    try:
        return Templar().render(text, variables)
    except TemplateError:
        return text


# the inventory's `{{ ansible_playbook_python }}` interpreters (ansible-test's), rendered as
# Ansible renders them when it connects
inventory_loader.use_renderer(_render_inventory_text)
