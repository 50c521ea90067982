"""Which index an install uses, and the plan re-resolved for what that index really serves.

user's --index-url (or the lock's)    → ask it (from the host; from here with --relay)
presets / default                     → ask the PyTorch wheel indexes for the planned build and
                                        PyPI, in ONE host round trip; the index whose newest
                                        fitting torch is newest wins (a lagging mirror loses
                                        to download.pytorch.org, and is named)
the host's pip configuration         → its index-url / extra-index-url / find-links are asked
                                        in the same round trip and compete by the same rule
                                        (on a tie they win); the one used is named
no PyTorch wheel index answers        → PyPI's default build, when the resolver says it fits
                                        (never a multi-GB CUDA build on a CPU host unless
                                        --allow-cuda-build-on-cpu)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from provision.connection.base import Connection
from provision.errors import HostError
from provision.install.index_query import (
    IndexAnswer,
    askable,
    failures,
    list_from_here,
    list_from_host,
    offer_of,
)
from provision.install.mirrors import (
    KIND_PYPI,
    KIND_PYTORCH,
    PRESETS,
    PYPI_INDEX,
    IndexConfig,
    IndexOptions,
    build_index_config,
    torch_index_candidates,
)
from provision.install.planning import NoPlanError, Plan, PythonInfo, resolve


@dataclass
class Planning:
    """What re-resolving needs besides the offer: the request, the facts, the interpreter."""

    facts: dict[str, Any]
    py: PythonInfo
    host: str
    torch: str
    variant: str | None
    with_: list[str]
    allow_minor_version_compat: bool
    allow_cuda_build_on_cpu: bool
    installed: dict[str, Any] | None = None

    def resolve(self, kind: str, offer: Any = None) -> Plan:
        return resolve(
            self.facts,
            torch=self.torch,
            variant=self.variant,
            index_kind=kind,
            python_version=self.py.version,
            installed=self.installed,
            allow_minor_version_compat=self.allow_minor_version_compat,
            host=self.host,
            offer=offer,
            allow_cuda_build_on_cpu=self.allow_cuda_build_on_cpu,
        )


class IndexRefusal(HostError):
    """No index in effect serves a build that fits; the message names them and the options."""

    def __init__(self, host: str, message: str, reasons: list[str]) -> None:
        super().__init__(host, message)
        self.reasons = reasons


def _ask(
    connection: Connection | None, py: PythonInfo, targets: list[tuple[str, str]],
    projects: list[str], opts: IndexOptions, *, pip_config: bool = False,
) -> list[IndexAnswer]:  # fmt: skip
    if connection is None:
        return list_from_here(targets, projects, opts)
    return list_from_host(connection, py.executable, targets, projects, opts,
                          pip_config=pip_config)  # fmt: skip


def _kind_of(answer: IndexAnswer) -> str:
    """A source of the host's pip configuration is a PyTorch-style index when its torch wheels
    carry build tags (+cpu, +cu126); else it serves PyPI's builds."""
    tagged = any("+" in name.split("-")[1] for name in answer.files.get("torch") or []
                 if name.count("-") >= 2)  # fmt: skip
    return KIND_PYTORCH if tagged else KIND_PYPI


def _refuse(host: str, exc: NoPlanError) -> IndexRefusal:
    return IndexRefusal(host, exc.detail, list(getattr(exc, "reasons", [])))


def for_config(
    connection: Connection | None,
    cfg: IndexConfig,
    plan: Plan,
    planning: Planning,
    opts: IndexOptions,
    say: Callable[[str], None],
) -> Plan:
    """Re-plan for what a fixed index config (the user's, or the relay's) serves. Nothing is
    known (and the plan stands) when a source can't be asked or none answers."""
    urls = [(u, "index") for u in [cfg.index_url, *cfg.extra_index_urls] if u]
    urls += [(u, "find-links") for u in cfg.find_links]
    if not urls or not all(askable(u) for u, _ in urls):
        return plan
    projects = ["torch", *planning.with_]
    say(f"asking {cfg.describe()} which torch builds it has")
    answers = _ask(connection, planning.py, urls, projects, opts)
    offer = offer_of(answers, projects, planning.py, kind=cfg.kind)
    if offer is None:
        return plan
    try:
        return planning.resolve(cfg.kind, offer)
    except NoPlanError as exc:
        raise _refuse(planning.host, exc) from None


def choose(
    connection: Connection | None,
    plan: Plan,
    planning: Planning,
    opts: IndexOptions,
    say: Callable[[str], None],
) -> tuple[IndexConfig, Plan]:
    """Presets and the default: the PyTorch wheel indexes for the planned build, best first,
    then PyPI's build if none answers — each asked what it has."""
    candidates = torch_index_candidates(opts, plan.variant)
    pypi = PRESETS[opts.mirror].pypi if opts.mirror else PYPI_INDEX
    projects = ["torch", *planning.with_]
    say("asking the PyTorch wheel indexes, PyPI and the host's pip configuration which torch "
        "builds they have")  # fmt: skip
    answers = _ask(connection, planning.py, [*candidates, (pypi, "index")], projects, opts,
                   pip_config=True)  # fmt: skip
    torch_answers = answers[: len(candidates)]
    pypi_answer = answers[len(candidates) : len(candidates) + 1]
    configured = [a for a in answers[len(candidates) + 1 :]
                  if a.url.rstrip("/") != pypi.rstrip("/")]  # fmt: skip
    best: tuple[Plan, tuple[str, str], IndexAnswer] | None = None
    skipped: list[str] = []
    refusal: NoPlanError | None = None
    # The host's own pip sources first: on a tie they win (already local or chosen by the owner).
    ranked = [(a, _kind_of(a)) for a in configured if a.ok and a.files.get("torch")]
    ranked += [(a, KIND_PYTORCH) for a in torch_answers]
    for answer, kind in ranked:
        if not answer.ok:
            skipped.append(f"{answer.where}: {answer.detail}")
            continue
        variants = frozenset({plan.variant}) if kind == KIND_PYTORCH else None
        offer = offer_of([answer], projects, planning.py, kind=kind, variants=variants)
        try:
            found = planning.resolve(kind, offer)
        except NoPlanError as exc:
            if kind == KIND_PYTORCH and not answer.origin:
                refusal = refusal or exc
            skipped.append(f"{answer.where}: has torch {offer.summary() if offer else 'nothing'}")
            continue
        if best is None or Version(found.torch) > Version(best[0].torch):
            best = (found, (answer.url, answer.usage), answer)
    if best is not None:
        found, reachable, answer = best
        cfg = build_index_config(opts, plan_index_url=found.index_url, variant=found.variant,
                                 reachable_torch_index=reachable)  # fmt: skip
        if answer.origin:
            cfg.torch_source = f"{answer.where} (the host's pip configuration: {answer.origin})"
            say(f"torch {found.torch} from {cfg.torch_source}")
        if skipped:
            cfg.warnings.append("skipped PyTorch wheel indexes: " + "; ".join(skipped))
        return cfg, found
    if refusal is not None:  # an index answered, and nothing on it fits
        raise _refuse(planning.host, refusal)
    tried = failures(torch_answers) or "none to ask"
    say("no PyTorch wheel index answers from the host: PyPI's default build, if it fits")
    offer = offer_of(pypi_answer, projects, planning.py, kind=KIND_PYPI)
    try:
        pypi_plan = planning.resolve(KIND_PYPI, offer)
    except NoPlanError as exc:
        options = [o for o in exc.detail.splitlines()[1:] if o.strip()]
        raise IndexRefusal(
            planning.host,
            f"no PyTorch wheel index answers from this host ({tried}), and PyPI's build does not "
            f"fit: {exc.detail.splitlines()[0]}"
            + "".join(f"\n{o}" for o in options)
            + "\n  option: --relay (this machine downloads the wheels), --proxy/--network-turbo, "
            "or --index-url of a reachable PyTorch wheel mirror",
            list(getattr(exc, "reasons", [])),
        ) from None
    cfg = build_index_config(opts, plan_index_url=None, variant=pypi_plan.variant,
                             reachable_torch_index=None, fallback_to_pypi=True)  # fmt: skip
    cfg.warnings.append(
        f"no PyTorch wheel index answered from the host ({tried}); installing PyPI's "
        f"{pypi_plan.variant} build, which the resolver says fits"
    )
    return cfg, pypi_plan
