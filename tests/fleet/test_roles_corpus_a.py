"""The roles parity corpus, shard a of 3: tests/fleet/roles_corpus_suite.py (what is compared,
ROLES_ONLY / ROLES_WITH_GAPS) and tests/roles_corpus/README.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from roles_corpus_suite import shard  # noqa: E402

pytestmark = pytest.mark.timeout(3000)  # two tools x two runs x its roles, on a loaded machine
globals().update(shard(0))
from roles_corpus_suite import (  # noqa: E402,F401  (the corpus-wide checks: once)
    test_both_failing_early_is_not_compared,
    test_corpus_rules,
    test_ownroot_twins_each_have_a_private_root,
)
