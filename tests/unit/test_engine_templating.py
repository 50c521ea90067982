"""Templating: native values, lazy variables, StrictUndefined, filters, shell placeholders,
and secret masking."""

from __future__ import annotations

import pytest

from provision.engine.templating import (
    OMIT,
    Templar,
    TemplateError,
    UndefinedVariableError,
    check_syntax,
    to_bool,
)
from provision.secrets import MASK, Masker, collect_secrets, is_secret_name

T = Templar()


def test_single_expression_keeps_native_type() -> None:
    variables = {"xs": [1, 2], "n": "5", "d": {"a": 1}}
    assert T.render("{{ xs }}", variables) == [1, 2]
    assert T.render("{{ d }}", variables) == {"a": 1}
    assert T.render("{{ n }}", variables) == "5"  # a string var stays a string
    assert T.render("{{ n | int + 1 }}", variables) == 6
    assert T.render("n={{ n }}", variables) == "n=5"
    assert T.render(["{{ n }}", {"k": "{{ xs | length }}"}], variables) == ["5", {"k": 2}]


def test_lazy_variables_render_on_lookup() -> None:
    variables = {"base": "https://mirror", "url": "{{ base }}/simple", "unused": "{{ nope }}"}
    assert T.render("{{ url }}", variables) == "https://mirror/simple"
    with pytest.raises(TemplateError, match="refers to itself"):
        T.render("{{ a }}", {"a": "{{ a }}x"})


def test_undefined_variable_names_the_variable() -> None:
    with pytest.raises(UndefinedVariableError) as err:
        T.render("x {{ missing_thing }}", {})
    assert err.value.variable == "missing_thing"
    with pytest.raises(UndefinedVariableError) as err:
        T.render("{{ missing_thing }}", {})  # the native path too
    assert err.value.variable == "missing_thing"
    # chainable: default() works on attributes of undefined values, as playbooks expect
    assert T.render("{{ a.b.c | default('d') }}", {}) == "d"
    assert T.evaluate("a.b is defined", {}) is False


def test_conditions() -> None:
    variables = {"x": 3, "flag": "yes", "empty": []}
    assert T.condition(["x > 2", "flag | bool"], variables)
    assert not T.condition(["x > 2", "empty | length > 0"], variables)
    # ansible-core 2.19: a list is not a boolean (tests/unit/test_conditionals_vs_ansible.py)
    with pytest.raises(TemplateError, match="must have a boolean result"):
        T.condition(["x > 2", "empty"], variables)
    assert T.condition(["{{ x == 3 }}"], variables)  # `when: "{{ ... }}"` works too
    assert T.condition([True], variables)
    assert not T.condition([False], variables)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ 'yes' | bool }}", True),
        ("{{ 'off' | bool }}", False),
        ("{{ '/a/b/c.txt' | basename }}", "c.txt"),
        ("{{ '/a/b/c.txt' | dirname }}", "/a/b"),
        ("{{ {'a': 1} | to_json }}", '{"a": 1}'),
        ("{{ '{\"a\": 2}' | from_json }}", {"a": 2}),
        ("{{ [1, [2, [3]]] | flatten }}", [1, 2, 3]),
        ("{{ {'a': 1} | combine({'b': 2}) }}", {"a": 1, "b": 2}),
        (
            "{{ {'a': {'x': 1}} | combine({'a': {'y': 2}}, recursive=true) }}",
            {"a": {"x": 1, "y": 2}},
        ),
        ("{{ {'k': 'v'} | dict2items }}", [{"key": "k", "value": "v"}]),
        ("{{ 'abc123' | regex_replace('[0-9]+', 'N') }}", "abcN"),
        # backslashes in a {{ }} string constant are literal, as in Ansible (not Python escapes)
        ("{{ 'v=12' | regex_search('v=(\\d+)', '\\1') }}", ["12"]),
        ('{{ "o\'brien" | quote }}', "'o'\"'\"'brien'"),
        ("{{ ['a', 'b'] | join(',') }}", "a,b"),
        ("{{ none_var | default('d', true) }}", "d"),
        ("{{ '2.1.0' is version('2.0', '>=') }}", True),
        ("{{ '12.4' is version('12.10', '<') }}", True),
        ("{{ true | ternary('y', 'n') }}", "y"),
        ("{{ 'a,b' | split(',') }}", ["a", "b"]),
        ("{{ 2048 | human_readable }}", "2.00 KB"),
        ("{{ 'x' | hash('sha1') }}", "11f6ad8ec52a2984abaafd7c3b516503785c2072"),
        ("{{ omit }}", OMIT),
    ],
    # ids from the template alone: OMIT is random per process, and xdist workers must agree
    ids=lambda v: v if isinstance(v, str) and "{" in v else type(v).__name__,
)
def test_filters(template: str, expected: object) -> None:
    assert T.render(template, {"none_var": None}) == expected


def test_registered_result_tests() -> None:
    variables = {"r": {"changed": True, "failed": False}, "s": {"skipped": True, "changed": False}}
    assert T.evaluate("r is changed", variables)
    assert T.evaluate("r is succeeded", variables)
    assert not T.evaluate("r is failed", variables)
    assert T.evaluate("s is skipped", variables)


def test_to_bool() -> None:
    assert [to_bool(v) for v in ("yes", "True", "1", 1, True, "on")] == [True] * 6
    assert [to_bool(v) for v in ("no", "false", "0", 0, None, "maybe")] == [False] * 6


def test_syntax_errors_are_reported() -> None:
    assert check_syntax("{{ ok }}") is None
    problem = check_syntax("{{ broken( }}")
    assert problem is not None
    with pytest.raises(TemplateError, match="syntax"):
        T.render("{{ broken( }}", {})


def test_template_file_errors_name_file_and_line() -> None:
    with pytest.raises(UndefinedVariableError, match="pip.conf.j2.*missing"):
        T.render_text("a\n{{ missing }}\n", {}, name="pip.conf.j2")
    with pytest.raises(TemplateError, match=r"x\.j2:2:"):
        T.render_text("a\n{% if %}\n", {}, name="x.j2")


def test_shell_rendering_separates_values_from_code() -> None:
    tpl = T.render_shell(
        "echo {{ a }} '{{ b }}' {{ 'lit' }} {{ a | safe }} {{ c | shell_code }}",
        {"a": "$(id)", "b": "o'b", "c": "| cat"},
    )
    # | shell_code: inserted as code on purpose; | safe (Markup) is data like any value
    assert tpl.values == ["$(id)", "o'b", "lit", "$(id)"]
    assert "$(id)" not in tpl.text and "o'b" not in tpl.text
    assert tpl.text.endswith("| cat")
    with pytest.raises(UndefinedVariableError):
        T.render_shell("echo {{ nope }}", {})


def test_secret_names_and_masking() -> None:
    assert (
        is_secret_name("db_password") and is_secret_name("HF_TOKEN") and is_secret_name("api_key")
    )
    assert not is_secret_name("password_env") and not is_secret_name("user")
    secrets = collect_secrets(
        [{"db_password": "hunter22", "nested": {"token": "abcd1234"}, "user": "bob1"}]
    )
    assert secrets == {"hunter22", "abcd1234"}
    masker = Masker(secrets)
    masked = masker.mask(
        {"cmd": "login --pw hunter22", "out": ["Bearer abcd1234"], "password": "x"}
    )
    assert masked == {"cmd": f"login --pw {MASK}", "out": [f"Bearer {MASK}"], "password": MASK}
