"""The generated canary scan's plan (tests/support/canary_plan.py, run by
tests/fleet/test_canary_scan.py) covers the whole registry and every task keyword: a module
added to the registry gets canaries without editing the test, and one whose argument the
generator can't give a valid value fails here until it is listed with why."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from provision.engine.playbook_model import TASK_KEYWORDS
from provision.modules.base import MODULES, Arg, Module, ModuleResult, module_names
from tests.support import canary_plan
from tests.support.canary_plan import (
    KEYWORD_CANARY,
    KEYWORD_NAMED,
    NAMED_IN,
    NO_VALUE,
    NOT_RUN,
    keyword_tasks,
    plan,
)

FILES = {"file": "/x/plain.txt", "template": "/x/t.j2", "archive": "/x/a.tar.gz", "controller": "/x/out"}


def test_every_module_and_argument_is_in_the_plan() -> None:
    generated = plan(FILES)
    assert generated.problems == []
    modules = set(module_names())
    assert {m for m, _ in generated.classes} == {m for m in modules if MODULES[m].args}
    ran = {t.module for t in generated.tasks}
    assert ran == modules - set(NOT_RUN)
    canaried = {(m, a) for (m, a), c in generated.classes.items() if c == "canary"}
    covered = {tuple(where.split(".", 1)) for where in generated.canaries.values()}
    assert canaried <= covered, canaried - covered
    assert len(canaried) >= 30  # urls, headers, bodies, contents, passwords, templates, env…


def test_the_lists_name_only_what_exists() -> None:
    modules = set(module_names())
    assert set(NOT_RUN) <= modules
    args = {(m, a) for m in modules for a in MODULES[m].args}
    assert set(NAMED_IN) <= args and set(NO_VALUE) <= args


def test_every_task_keyword_is_classified() -> None:
    assert TASK_KEYWORDS <= set(KEYWORD_CANARY) | set(KEYWORD_NAMED), TASK_KEYWORDS - set(KEYWORD_NAMED)
    tasks, canaries, secret = keyword_tasks()
    assert len(canaries) == len(KEYWORD_CANARY) and secret and secret <= set(canaries)


@pytest.fixture
def new_module() -> Iterator[type[Module]]:
    class Fresh(Module):
        name: ClassVar[str] = "pv_fresh_module"
        args: ClassVar[dict[str, Arg]] = {"api_token": Arg("str"), "dest": Arg("path", required=True),
                                          "picky": Arg("str")}  # fmt: skip

        def check_args(self, args: dict[str, Any]) -> list[str]:
            return ["picky must be 'yes'"] if args.get("picky") not in (None, "yes") else []

        def run(self, ctx: Any) -> ModuleResult:
            return ModuleResult()

    module_names()  # the registry is loaded first
    MODULES[Fresh.name] = Fresh
    try:
        yield Fresh
    finally:
        del MODULES[Fresh.name]


def test_a_new_module_is_covered_and_an_unusable_argument_fails_until_listed(new_module: type[Module]) -> None:
    generated = plan(FILES)
    assert generated.classes[(new_module.name, "api_token")] == "canary"
    assert [p for p in generated.problems if new_module.name in p and "picky" in p]
    NO_VALUE[(new_module.name, "picky")] = "accepts only 'yes'"
    try:
        fixed = plan(FILES)
    finally:
        del NO_VALUE[(new_module.name, "picky")]
    assert fixed.problems == []
    task = next(t for t in fixed.tasks if t.module == new_module.name)
    assert task.secret and all("api_token" in canary_plan.Plan([task], {}, []).canaries[c] for c in task.secret)
