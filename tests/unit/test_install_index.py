"""Installing what the index really has (issue 9.3): the lister that asks an index which wheels it
lists, the offer the resolver gets from that, the refusal of a multi-GB CUDA build on a CPU host,
and the whole install plan against a REAL lagging index (the tests' PEP 503 server holding only
torch 2.13.0, not the newest known 2.14.0) on LocalConnection.

Facts are a CPU host's view (this machine's facts with the GPUs taken out) wherever a plan is
asserted, so the tests mean the same on a GPU server.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provision.agent.index_list import wheel_names
from provision.compat import (
    GpuFact,
    HostFacts,
    InstallPlan,
    NoPlan,
    TorchRequest,
    resolve_install_plan,
)
from provision.compat.offer import PLAIN, PLAIN_PYPI, IndexOffer
from provision.connection.local import LocalConnection
from provision.install import index_choice
from provision.install.index_query import builds_of, list_from_here, list_from_host, offer_of
from provision.install.installer import InstallError, InstallOptions, install
from provision.install.mirrors import IndexOptions, build_index_config
from provision.install.planning import PythonInfo
from provision.remote.agent import Agent
from tests.support.package_index import PackageIndex, lagging_torch_index_dir

PY311 = PythonInfo("python3", "3.11.2", "x86_64", "2.36")
CPU_HOST = HostFacts(python_version="3.11")
RTX3090 = HostFacts(
    gpus=(GpuFact(name="NVIDIA GeForce RTX 3090", cc="8.6"),),
    driver_version="580.65.06",
    python_version="3.11",
)


def offer(*builds: tuple[str, str], where: str = "http://idx/simple/", **kw) -> IndexOffer:
    return IndexOffer(where, {"torch": frozenset(builds)}, **kw)


# -- reading an index's pages ---------------------------------------------------------------------


def test_wheel_names_from_html_json_and_flat_pages() -> None:
    html = (
        '<a href="/files/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=ab">'
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl</a>\n"
        '<a href="../torchvision-0.28.0+cpu-cp311-cp311-linux_x86_64.whl">tv</a>'
    )
    assert wheel_names(html, "torch") == ["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert wheel_names(html, "torchvision") == [
        "torchvision-0.28.0+cpu-cp311-cp311-linux_x86_64.whl"
    ]
    pep691 = (
        '{"files": [{"filename": "torch-2.12.1%2Bcu126-cp312-cp312-manylinux_2_28_x86_64.whl"}]}'
    )
    assert wheel_names(pep691, "torch") == [
        "torch-2.12.1+cu126-cp312-cp312-manylinux_2_28_x86_64.whl"
    ]
    assert wheel_names("pytorch-1.0-py3-none-any.whl torch-1.0.tar.gz", "torch") == []


def test_only_wheels_the_hosts_python_and_platform_take_count() -> None:
    files = [
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.13.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl",  # another Python
        "torch-2.14.0+cpu-cp311-cp311-manylinux_2_40_x86_64.whl",  # needs a newer glibc
        "torch-2.14.0+cpu-cp311-cp311-manylinux_2_28_aarch64.whl",  # another machine
        "torch-2.12.0-py3-none-any.whl",
        "not-a-wheel.whl",
    ]
    assert builds_of(files, PY311) == {("2.13.0", "cpu"), ("2.12.0", PLAIN)}
    assert ("2.14.0", "cpu") in builds_of(files, None)  # nothing known about the host: all


# -- the resolver, given what the index has ----------------------------------------------------


def test_the_newest_that_fits_and_exists_is_chosen_and_the_gap_is_said() -> None:
    plan = resolve_install_plan(
        CPU_HOST, TorchRequest(offer=offer(("2.13.0", "cpu"), ("2.12.1", "cpu")))
    )
    assert isinstance(plan, InstallPlan) and plan.pin == "2.13.0+cpu"
    newest = resolve_install_plan(CPU_HOST, TorchRequest())
    assert isinstance(newest, InstallPlan) and newest.torch != "2.13.0"  # the table knows newer
    said = f"torch {newest.torch} not on http://idx/simple/; newest there that fits: 2.13.0"
    assert said in plan.warnings and said in plan.reasons
    # an index that has the newest: nothing to say
    full = resolve_install_plan(CPU_HOST, TorchRequest(offer=offer((newest.torch, "cpu"))))
    assert isinstance(full, InstallPlan) and full.torch == newest.torch
    assert not any("not on" in w for w in full.warnings)


def test_an_index_without_a_fitting_build_is_named_with_what_it_has() -> None:
    # a GPU host and an index holding only the CPU build
    result = resolve_install_plan(RTX3090, TorchRequest(offer=offer(("2.13.0", "cpu"))))
    assert isinstance(result, NoPlan)
    assert "fits this host, but http://idx/simple/ has no build that fits" in result.explanation
    assert "(it has torch 2.13.0+cpu)" in result.explanation
    assert any("--relay" in o for o in result.options)
    # a request the index can't serve
    pinned = resolve_install_plan(
        CPU_HOST, TorchRequest(spec="2.12", offer=offer(("2.13.0", "cpu")))
    )
    assert isinstance(pinned, NoPlan) and "torch 2.12" in pinned.explanation


def test_a_missing_companion_rules_a_version_out() -> None:
    both = IndexOffer(
        "http://idx/simple/",
        {
            "torch": frozenset({("2.13.0", "cpu"), ("2.12.0", "cpu")}),
            "torchvision": frozenset({("0.27.0", "cpu")}),
        },
    )
    plan = resolve_install_plan(CPU_HOST, TorchRequest(spec="2.12", offer=both))
    # the table pairs torchvision 0.27.0 with torch 2.12.0
    assert isinstance(plan, InstallPlan) and (plan.torch, plan.torchvision) == ("2.12.0", "0.27.0")
    result = resolve_install_plan(CPU_HOST, TorchRequest(spec="2.13", offer=both))
    assert isinstance(result, NoPlan)
    assert any("torchvision" in r and "is not" in r for r in result.reasons), result.reasons


def test_a_plain_version_on_pypi_is_its_default_build() -> None:
    pypi = offer(("2.13.0", PLAIN), plain=PLAIN_PYPI, where="https://pypi.org/simple")
    plan = resolve_install_plan(RTX3090, TorchRequest(mirror="pypi", offer=pypi))
    assert (
        isinstance(plan, InstallPlan) and plan.torch == "2.13.0" and plan.variant.startswith("cu")
    )
    # a per-build index speaks only for its build
    scoped = offer(("2.13.0", PLAIN), variants=frozenset({"cu126"}))
    assert not scoped.has("torch", "2.13.0", "cu130", None) and scoped.has(
        "torch", "2.13.0", "cu126", None
    )


def test_no_cuda_build_on_a_cpu_host_unless_asked() -> None:
    refused = resolve_install_plan(CPU_HOST, TorchRequest(mirror="pypi"))
    assert isinstance(refused, NoPlan)
    assert any(o.startswith("--allow-cuda-build-on-cpu") for o in refused.options)
    assert any("download.pytorch.org/whl/cpu" in o for o in refused.options)
    allowed = resolve_install_plan(
        CPU_HOST, TorchRequest(mirror="pypi", allow_cuda_build_on_cpu=True)
    )
    assert isinstance(allowed, InstallPlan) and allowed.mode == "cuda-build-on-cpu"
    # asking for the build by name is asking
    named = resolve_install_plan(CPU_HOST, TorchRequest(variant="cu126"))
    assert isinstance(named, InstallPlan) and named.variant == "cu126"


# -- asking a real index, from the "host" (LocalConnection) ---------------------------------------


@pytest.fixture(scope="module")
def lagging(tmp_path_factory: pytest.TempPathFactory):
    """The tests' PEP 503 index holding torch 2.13.0 (+cpu) only: no 2.14.0."""
    with PackageIndex(lagging_torch_index_dir(tmp_path_factory.mktemp("lagging"))) as index:
        yield index


def test_the_host_lists_what_each_index_has_bounded_and_failures_named(
    lagging: PackageIndex,
) -> None:
    with PackageIndex(lagging.directory) as closed:
        dead = closed.url
    answers = list_from_host(
        LocalConnection(),
        "python3",
        [(dead, "index"), (lagging.url, "index")],
        ["torch", "torchvision"],
        IndexOptions(probe_timeout=5),
    )
    assert [a.ok for a in answers] == [False, True]
    assert "Connection refused" in answers[0].detail or "URLError" in answers[0].detail
    assert answers[1].files["torchvision"] == []  # asked, and it has none
    offer_ = offer_of(answers, ["torch"], PY311, kind="custom")
    assert offer_ is not None and offer_.builds["torch"] == {("2.13.0", "cpu"), ("2.12.1", "cpu")}
    assert offer_.where == lagging.url
    assert "GET /simple/torch/ 200" in lagging.requests


def test_credentials_go_over_stdin_never_argv(tmp_path: Path, lagging: PackageIndex) -> None:
    secret = "s3cr3t-token-idx"
    with PackageIndex(lagging.directory, auth=("bob", secret), watch_secret=secret) as index:
        answers = list_from_host(
            LocalConnection(),
            "python3",
            [(index.url_with_credentials(), "index")],
            ["torch"],
            IndexOptions(probe_timeout=5),
        )
        assert answers[0].ok, answers[0].detail
        assert answers[0].files["torch"] and index.secret_seen_in == []
        assert secret not in answers[0].where
        # and from here (--offline, --relay): the same lister in-process
        here = list_from_here([(index.url_with_credentials(), "index")], ["torch"], IndexOptions())
        assert here[0].ok and here[0].files == answers[0].files


def cpu_view(facts: dict) -> dict:
    """This machine's facts as a CPU host's (the plan then means the same on a GPU server)."""
    return dict(facts, gpus=[], nvidia={})


@pytest.fixture(scope="module")
def facts() -> dict:
    from provision.remote.facts import gather_facts

    return cpu_view(gather_facts(Agent(LocalConnection())))


def test_the_plan_is_re_resolved_for_a_lagging_index(lagging: PackageIndex, facts: dict) -> None:
    opts = IndexOptions(index_url=lagging.url)
    planning = index_choice.Planning(
        facts=facts, py=PY311, host="localhost", torch="latest", variant=None, with_=[],
        allow_minor_version_compat=True, allow_cuda_build_on_cpu=False,
    )  # fmt: skip
    first = planning.resolve("custom")
    cfg = build_index_config(
        opts, plan_index_url=None, variant=first.variant, reachable_torch_index=None
    )
    plan = index_choice.for_config(LocalConnection(), cfg, first, planning, opts, lambda m: None)
    assert plan.torch == "2.13.0" and plan.variant == "cpu"
    if first.torch != "2.13.0":
        assert (
            f"torch {first.torch} not on {lagging.url}; newest there that fits: 2.13.0"
            in plan.warnings
        )


def test_install_plans_what_the_lagging_index_has(
    lagging: PackageIndex, facts: dict, tmp_path: Path
) -> None:
    options = InstallOptions(
        torch="latest",
        env=str(tmp_path / "env"),
        index=IndexOptions(index_url=lagging.url),
        check_only=True,
    )
    result = install(LocalConnection(), Agent(LocalConnection()), options, facts=facts)
    assert result.action == "would-install", result.message
    assert result.plan["torch"] == "2.13.0" and "torch 2.13.0+cpu" in result.message
    assert "index" in result.timings and not (tmp_path / "env").exists()
    # a build the index lacks is refused before anything changes, naming the index
    options.variant = "cu126"
    with pytest.raises(InstallError) as err:
        install(LocalConnection(), Agent(LocalConnection()), options, facts=facts)
    assert err.value.result.action == "refused" and lagging.url in err.value.detail
    assert not (tmp_path / "env").exists()


# -- every command line shown is the complete one -----------------------------------------------


def test_check_offline_prints_the_whole_pip_command_on_a_narrow_terminal(tmp_path: Path) -> None:
    import json
    import os
    import shlex
    import subprocess
    import sys

    def check(*args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, COLUMNS="60", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
        return subprocess.run(
            [sys.executable, "-m", "provision", "check", "--offline", "--python", "3.12", *args],
            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
        )  # fmt: skip

    plan = json.loads(check("--json").stdout)["plan"]
    assert "--index-url" in plan["pip_args"]
    shown = check().stderr
    whole = "python3 -m pip " + shlex.join(plan["pip_args"])
    assert len(whole) > 60 and f"run: {whole}\n" in shown  # one line, uncut, outside the box
    # a refusal's options wrap inside the box instead of being cut off
    refused = check("--mirror", "pypi").stderr
    assert "--allow-cuda-build-on-cpu" in refused and "multi-GB" in refused


# -- presets and the default: the PyTorch wheel indexes, then PyPI --------------------------------
# The candidates are redirected to real local indexes (the same lister, the same HTTP); traffic
# stays on loopback.


@pytest.fixture(autouse=True)
def no_pip_config_of_this_machine(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """choose() also asks the host's pip configuration: here the host is this machine, whose
    own pip.conf and PIP_* must not decide a test. Tests that want one set it."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)


def test_pip_config_sources_are_read_as_pip_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provision.agent.index_list import pip_config_sources

    xdg = tmp_path / "etc-xdg"
    (xdg / "pip").mkdir(parents=True)
    (xdg / "pip" / "pip.conf").write_text(
        "[global]\nextra-index-url = file:///srv/simple\n  https://mirror.example/simple\n"
    )
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text("[install]\nfind_links = /srv/wheels\n")
    named = tmp_path / "named.conf"
    named.write_text("[global]\nindex-url = https://private.example/simple\n[list]\nformat = json\n")
    (tmp_path / "broken.conf").write_text("[global\nnot ini")
    monkeypatch.setenv("XDG_CONFIG_DIRS", f"{xdg}:{tmp_path / 'missing'}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(named))
    env = {"PIP_FIND_LINKS": "/opt/wheels /srv/wheels"}
    got = [(url, usage) for url, usage, _ in pip_config_sources(env)]
    assert got == [
        ("file:///srv/simple", "index"),
        ("https://mirror.example/simple", "index"),
        ("/srv/wheels", "find-links"),
        ("https://private.example/simple", "index"),
        ("/opt/wheels", "find-links"),
    ]
    origins = {url: origin for url, _, origin in pip_config_sources(env)}
    assert origins["/opt/wheels"] == "PIP_FIND_LINKS"
    assert origins["/srv/wheels"].endswith("pip.conf [install] find-links")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # pip's "no config files"
    assert [u for u, _, _ in pip_config_sources({})] == []


def test_local_find_links_and_file_indexes_are_listed(tmp_path: Path) -> None:
    from provision.agent.index_list import list_all

    links = tmp_path / "wheels"
    links.mkdir()
    (links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    simple = tmp_path / "simple"
    (simple / "torch").mkdir(parents=True)
    (simple / "torch" / "index.html").write_text(
        '<a href="../../files/torch-2.12.0+cpu-cp311-cp311-linux_x86_64.whl">x</a>'
    )
    answers = list_all({"targets": [
        {"url": str(links), "flat": True, "projects": ["torch"]},
        {"url": simple.as_uri(), "flat": False, "projects": ["torch", "lmdb"]},
        {"url": str(tmp_path / "nowhere"), "flat": True, "projects": ["torch"]},
    ], "timeout": 2, "budget": 5})  # fmt: skip
    assert answers[0]["ok"] and answers[0]["files"]["torch"] == [
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    ]
    assert answers[1]["ok"] and answers[1]["files"] == {
        "torch": ["torch-2.12.0+cpu-cp311-cp311-linux_x86_64.whl"], "lmdb": []
    }
    assert not answers[2]["ok"] and "404" in answers[2]["detail"]


def test_the_hosts_pip_find_links_is_used_when_no_pytorch_index_answers(
    tmp_path: Path, facts: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CPU machine whose pip configuration holds torch+cpu in a find-links folder (and the
    PyTorch index out of reach, PyPI with only its CUDA build): that folder is used, and named."""
    from tests.support.package_index import build_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "torch", "2.13.0").rename(
        wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
    pypi_dir = tmp_path / "pypi"
    pypi_dir.mkdir()
    build_wheel(pypi_dir, "torch", "2.13.0").rename(
        pypi_dir / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nfind-links = {wheels}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    with PackageIndex(pypi_dir) as closed:
        dead = closed.url
    with PackageIndex(pypi_dir) as pypi:
        monkeypatch.setattr(index_choice, "torch_index_candidates", lambda o, v: [(dead, "index")])
        monkeypatch.setattr(index_choice, "PYPI_INDEX", pypi.url)
        planning = _planning(facts)
        said: list[str] = []
        cfg, plan = index_choice.choose(
            LocalConnection(), planning.resolve("pytorch"), planning, IndexOptions(), said.append
        )
    assert plan.torch == "2.13.0" and plan.variant == "cpu"
    assert str(wheels) in cfg.find_links
    assert "the host's pip configuration" in cfg.torch_source and str(conf) in cfg.torch_source
    assert any(line.startswith("torch 2.13.0 from ") for line in said)


def _planning(facts: dict, **kw) -> index_choice.Planning:
    base = dict(facts=facts, py=PY311, host="localhost", torch="latest", variant=None, with_=[],
                allow_minor_version_compat=True, allow_cuda_build_on_cpu=False)  # fmt: skip
    return index_choice.Planning(**{**base, **kw})


def test_a_dead_mirror_is_skipped_and_the_lagging_index_used(
    lagging: PackageIndex, facts: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PackageIndex(lagging.directory) as closed:
        dead = closed.url
    monkeypatch.setattr(
        index_choice,
        "torch_index_candidates",
        lambda o, v: [(dead, "index"), (lagging.url, "index")],
    )
    monkeypatch.setattr(index_choice, "PYPI_INDEX", dead)
    planning = _planning(facts)
    cfg, plan = index_choice.choose(
        LocalConnection(), planning.resolve("pytorch"), planning, IndexOptions(), lambda m: None
    )
    assert cfg.index_url == lagging.url and plan.torch == "2.13.0" and plan.variant == "cpu"
    assert any(w.startswith(f"skipped PyTorch wheel indexes: {dead}") for w in cfg.warnings)


def test_no_cuda_build_on_a_cpu_host_when_only_pypi_answers(
    tmp_path: Path, facts: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.package_index import build_wheel

    pypi_dir = tmp_path / "pypi"
    pypi_dir.mkdir()
    build_wheel(pypi_dir, "torch", "2.13.0").rename(
        pypi_dir / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
    with PackageIndex(pypi_dir) as closed:
        dead = closed.url
    with PackageIndex(pypi_dir) as pypi:
        monkeypatch.setattr(index_choice, "torch_index_candidates", lambda o, v: [(dead, "index")])
        monkeypatch.setattr(index_choice, "PYPI_INDEX", pypi.url)
        planning = _planning(facts)
        with pytest.raises(index_choice.IndexRefusal) as err:
            index_choice.choose(
                LocalConnection(),
                planning.resolve("pytorch"),
                planning,
                IndexOptions(),
                lambda m: None,
            )
        assert "no PyTorch wheel index answers from this host" in err.value.detail
        assert "--allow-cuda-build-on-cpu" in err.value.detail and dead in err.value.detail
        # asked for: PyPI's CUDA build of the version PyPI has
        allowed = _planning(facts, allow_cuda_build_on_cpu=True)
        cfg, plan = index_choice.choose(
            LocalConnection(), allowed.resolve("pytorch"), allowed, IndexOptions(), lambda m: None
        )
    assert cfg.kind == "pypi" and "PyPI's default build" in cfg.torch_source
    assert plan.mode == "cuda-build-on-cpu" and plan.torch == "2.13.0"
    assert any("no PyTorch wheel index answered" in w for w in cfg.warnings)
