"""The roles parity corpus, shard c of 3: tests/fleet/roles_corpus_suite.py (what is compared,
ROLES_ONLY / ROLES_WITH_GAPS) and tests/roles_corpus/README.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from roles_corpus_suite import shard  # noqa: E402

pytestmark = pytest.mark.timeout(3000)  # two tools x two runs x its roles, on a loaded machine
globals().update(shard(2))
