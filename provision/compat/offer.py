"""What the index in effect serves: the resolver's third input, beside the facts and the request.

The tables say which builds *could* run on a host; an IndexOffer says which ones exist on the
index pip will use today (mirrors lag by days, a private index may hold a single version). It is
plain data — provision/install/index_query.py builds it from the file names an index lists,
already narrowed to the wheels the host's Python and platform accept — so the resolver stays pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

PLAIN = ""  # the local tag of a version without one (torch-2.13.0-cp311-...whl)
PLAIN_ANY = "any"  # a plain version may be any build (a private index): verification checks it
PLAIN_PYPI = "pypi"  # a plain version is PyPI's default build of that release


@dataclass(frozen=True)
class IndexOffer:
    """Builds an index serves: project -> {(public version, local tag)}; only the projects that
    were asked about are keys (an unasked companion is not checked)."""

    where: str  # the index as users see it (credentials masked)
    builds: Mapping[str, frozenset[tuple[str, str]]] = field(default_factory=dict, hash=False)
    # a per-build index (download.pytorch.org/whl/cu126) speaks only for these tags; None: all
    variants: frozenset[str] | None = None
    plain: str = PLAIN_ANY

    def has(self, project: str, version: str, tag: str, pypi_default: str | None) -> bool:
        """Does the index serve `project` `version` as build `tag`?"""
        if self.variants is not None and tag not in self.variants:
            return False
        have = self.builds.get(project) or frozenset()
        if (version, tag) in have:
            return True
        if (version, PLAIN) in have:
            return self.plain == PLAIN_ANY or (self.plain == PLAIN_PYPI and tag == pypi_default)
        return False

    def asked(self, project: str) -> bool:
        return project in self.builds

    def summary(self, project: str = "torch", limit: int = 6) -> str:
        """The newest builds of `project` there, for messages: "2.13.0+cpu, 2.12.1+cpu"."""
        have = sorted(self.builds.get(project) or (), key=lambda vt: _key(vt[0]), reverse=True)
        shown = [v + (f"+{t}" if t else "") for v, t in have[:limit]]
        more = len(have) - len(shown)
        return (", ".join(shown) + (f" and {more} more" if more > 0 else "")) or "nothing"


def _key(version: str) -> Version:
    try:
        return Version(version)
    except InvalidVersion:
        return Version("0")
