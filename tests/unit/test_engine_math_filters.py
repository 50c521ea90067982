"""Ansible's mathstuff filters (ansible-core plugins/filter/mathstuff.py and the formatters it
uses) as provision renders them: the values and error texts playbooks (and ansible-core's
filter_mathstuff target) check."""

from __future__ import annotations

import pytest

from provision.engine.templating import Templar, TemplateError

T = Templar()


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("'0' | human_to_bytes", 0),
        ("'0.1' | human_to_bytes", 0),
        ("'0.9' | human_to_bytes", 1),
        ("'10.00 KB' | human_to_bytes", 10240),
        ("'11 MB' | human_to_bytes", 11534336),
        ("'1.1 GB' | human_to_bytes", 1181116006),
        ("'10.00 Kb' | human_to_bytes(isbits=True)", 10240),
        ("'2' | human_to_bytes('K')", 2048),
        ("'3 megabyte' | human_to_bytes", 3 << 20),
        ("1 | human_readable", "1.00 Bytes"),
        ("1 | human_readable(isbits=True)", "1.00 bits"),
        ("10240 | human_readable", "10.00 KB"),
        ("102400000 | human_readable", "97.66 MB"),
        ("102400000 | human_readable(unit='G')", "0.10 GB"),
        ("102400000 | human_readable(isbits=True, unit='G')", "0.10 Gb"),
        ("['a', 'b', 'A', 'B'] | unique", ["a", "b"]),
        ("['a', 'b', 'A', 'B'] | unique(case_sensitive=True)", ["a", "b", "A", "B"]),
        ("[{'f': 1, 'm': 2}, {'f': 1, 'm': 3}] | unique(attribute='f')", [{"f": 1, "m": 2}]),
        ("[{'f': 1}, {'f': 1}, {'g': 2}] | unique", [{"f": 1}, {"g": 2}]),
        ("[1, 2, 3] | union([{}]) | length", 4),
        ("[1, 2, 3] | symmetric_difference([3, 4])", [1, 2, 4]),
        ("[1, 2] | product(['a']) | list", [(1, "a"), (2, "a")]),
        ("[1, 2, 3] | combinations(2) | list | length", 3),
        (
            "[{'p': 'a', 's': 1}, {'p': 'b', 's': 2}] | rekey_on_member('p')",
            {"a": {"p": "a", "s": 1}, "b": {"p": "b", "s": 2}},
        ),
        ("[{'p': 'a', 's': 1}, {'p': 'a', 's': 2}] | rekey_on_member('p', duplicates='overwrite')",
         {"a": {"p": "a", "s": 2}}),
    ],
)
def test_mathstuff_values(expr: str, value: object) -> None:
    assert T.render("{{ " + expr + " }}", {}) == value


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("'10.00 foo' | human_to_bytes", "can't interpret"),
        ("'10 KB' | human_to_bytes(isbits=True)", "expect Kb or K"),
        ("'10 Mb' | human_to_bytes", "expect MB or M"),
        ("'3 megabytes' | human_to_bytes", "expect MB or M"),
        ("'monkeys' | human_readable", "failed on bad input"),
        ("True | unique", "'bool' object is not iterable"),
        ("[{'a': 1}] | unique(case_sensitive=False)", "cannot fall back"),
        ("'yo' | log", "can only be used on numbers"),
        ("[] | rekey_on_member('x', duplicates='boo')", "has unknown value"),
        ("'minkeys' | rekey_on_member('x')", "Type is not a valid list, set, or dict"),
        ("[True] | rekey_on_member('x')", "List item is not a valid dict"),
        ("[{'a': 1}] | rekey_on_member('x')", "was not found"),
        ("[{'p': 1}, {'p': 1}] | rekey_on_member('p')", "is not unique, cannot convert to dict"),
    ],
)
def test_mathstuff_errors(expr: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        T.render("{{ " + expr + " }}", {})
