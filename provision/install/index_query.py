"""Ask the index in effect which torch builds it serves, before choosing one.

One bounded round trip from the HOST (its network is the one pip will use): the agent-side
lister (provision/agent/index_list.py) runs under the host's Python with the request on stdin, so
index credentials never reach a command line. From this machine instead for --offline and
--relay (here is where the wheels are fetched then). The file names that come back become a
resolver IndexOffer, narrowed to the wheels the host's interpreter and platform accept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from provision.agent import index_list
from provision.compat.offer import PLAIN, PLAIN_ANY, PLAIN_PYPI, IndexOffer
from provision.connection.base import Connection
from provision.install.mirrors import KIND_PYPI, IndexOptions, mask_url
from provision.install.pip import _READ_ENV, _env_block
from provision.install.planning import PythonInfo
from provision.shell import Raw, sh

_LISTER = Path(index_list.__file__).read_text()


@dataclass
class IndexAnswer:
    """What one index (or find-links page) said: the file names per project asked about."""

    url: str
    usage: str  # "index" (PEP 503/691) | "find-links" (a flat listing)
    ok: bool
    detail: str = ""
    files: dict[str, list[str]] = field(default_factory=dict)
    origin: str = ""  # for a source of the host's pip configuration: the variable or file

    @property
    def where(self) -> str:
        return mask_url(self.url)


def _targets(targets: list[tuple[str, str]], projects: list[str]) -> list[dict[str, Any]]:
    return [{"url": u, "flat": usage != "index", "projects": projects} for u, usage in targets]


def _answers(targets: list[tuple[str, str]], raw: list[dict[str, Any]]) -> list[IndexAnswer]:
    out = []
    for (url, usage), item in zip(targets, raw, strict=False):
        files = {str(k): [str(f) for f in v] for k, v in (item.get("files") or {}).items()}
        out.append(
            IndexAnswer(url, usage, bool(item.get("ok")), str(item.get("detail") or ""), files)
        )
    return out


def list_from_host(
    connection: Connection,
    python: str,
    targets: list[tuple[str, str]],
    projects: list[str],
    index: IndexOptions,
    *,
    pip_config: bool = False,
) -> list[IndexAnswer]:
    """Ask every target from the host, in one command: `probe_timeout` per page, 3x in all.
    With `pip_config`, the sources the host's pip configuration names are asked in the same
    round trip and follow the targets' answers (their `origin` says where each was set)."""
    if not targets and not pip_config:
        return []
    env: dict[str, str] = {}
    if index.proxy:
        env.update(
            {k: index.proxy for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}
        )
    turbo = Raw(". /etc/network_turbo >/dev/null 2>&1; " if index.network_turbo else "")
    script = sh("{read_env}{turbo}exec {python} -c {code}", read_env=Raw(_READ_ENV), turbo=turbo,
                python=python, code=_LISTER)  # fmt: skip
    budget = index.probe_timeout * 3
    request = {
        "targets": _targets(targets, projects),
        "timeout": index.probe_timeout,
        "budget": budget,
    }
    if pip_config:
        request["pip_config"] = projects
    stdin = _env_block(env) + (json.dumps(request) + "\n").encode()
    result = connection.run(script, stdin=stdin, timeout=budget + 30)
    try:
        raw = json.loads(result.stdout.strip().splitlines()[-1])
        if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
            raise ValueError("not a list of answers")
    except (ValueError, IndexError):
        why = (result.stderr.strip() or f"exit {result.exit_code}")[-200:]
        raw = [{"ok": False, "detail": f"could not ask from the host: {why}"} for _ in targets]
    return _answers(targets, raw[: len(targets)]) + _config_answers(raw[len(targets) :])


def _config_answers(raw: list[dict[str, Any]]) -> list[IndexAnswer]:
    """The host's pip-configuration sources as answers (host data: only strings kept)."""
    out = []
    for item in raw[:32]:
        url, usage = str(item.get("url") or ""), str(item.get("usage") or "")
        if not url or usage not in ("index", "find-links"):
            continue
        answer = _answers([(url, usage)], [item])[0]
        answer.origin = str(item.get("origin") or "")[:300]
        out.append(answer)
    return out


def list_from_here(
    targets: list[tuple[str, str]], projects: list[str], index: IndexOptions
) -> list[IndexAnswer]:
    """The same question from this machine (--offline, --relay), with the same bounds."""
    if not targets:
        return []
    budget = index.probe_timeout * 3
    request = {
        "targets": _targets(targets, projects),
        "timeout": index.probe_timeout,
        "budget": budget,
    }
    return _answers(targets, index_list.list_all(request))


def askable(url: str) -> bool:
    """Only http(s) pages can be asked; a directory or file:// index is pip's alone to read."""
    return url.startswith(("http://", "https://"))


def _accepts(tags: frozenset[Tag], py: PythonInfo) -> bool:
    minor = py.major_minor.replace(".", "")
    interpreters = {f"cp{minor}", f"py{minor}", f"py{minor[0]}"}
    abis = {f"cp{minor}", "abi3", "none"}
    platforms = {*py.platform_tags(), "any"}
    return any(
        t.interpreter in interpreters and t.abi in abis and t.platform in platforms for t in tags
    )


def builds_of(files: list[str], py: PythonInfo | None) -> frozenset[tuple[str, str]]:
    """(public version, local tag) of the wheels `py` can install (all wheels when py is None)."""
    out = set()
    for name in files:
        try:
            _, version, _, tags = parse_wheel_filename(name)
        except (InvalidWheelFilename, ValueError):
            continue
        if py is None or _accepts(tags, py):
            out.add((Version(str(version)).public, version.local or PLAIN))
    return frozenset(out)


def offer_of(
    answers: list[IndexAnswer],
    projects: list[str],
    py: PythonInfo | None,
    *,
    kind: str,
    variants: frozenset[str] | None = None,
) -> IndexOffer | None:
    """The union of what the answering targets list (pip reads them all), or None when none
    answered: then nothing is known and pip's own error will tell."""
    heard = [a for a in answers if a.ok]
    if not heard:
        return None
    builds = {
        p: frozenset().union(*(builds_of(a.files.get(p) or [], py) for a in heard))
        for p in projects
    }
    return IndexOffer(
        where=" + ".join(a.where for a in heard),
        builds=builds,
        variants=variants,
        plain=PLAIN_PYPI if kind == KIND_PYPI else PLAIN_ANY,
    )


def failures(answers: list[IndexAnswer]) -> str:
    return "; ".join(f"{a.where}: {a.detail or 'no answer'}" for a in answers if not a.ok)


def serves_project(
    connection: Connection, python: str, cfg: Any, opts: IndexOptions, project: str
) -> bool | None:
    """Whether the indexes of `cfg` (an IndexConfig) list any wheel of `project`: one bounded
    round trip from the host. None when that is not known (a source that can't be asked, or none
    answered): the caller then tries as if it did."""
    urls = [(u, "index") for u in [cfg.index_url, *cfg.extra_index_urls] if u]
    urls += [(u, "find-links") for u in cfg.find_links]
    if not urls or not all(askable(u) for u, _ in urls):
        return None
    answers = list_from_host(connection, python, urls, [project], opts)
    heard = [a for a in answers if a.ok]
    if len(heard) < len(answers):
        return None  # a source that did not answer may be the one that has it
    return any(name.endswith(".whl") for a in heard for name in a.files.get(project) or [])

