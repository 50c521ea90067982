"""Packing the agent (provision/remote/agent_bundle.py) and unpacking it on the host
(provision/agent/bootstrap.py, run here by real interpreters as the host would run it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from provision.remote import agent_bundle
from provision.remote.agent import bootstrap_args

PYENV = Path("/root/.pyenv/versions")


def _records(data: bytes) -> dict[str, bytes]:
    raw, out, pos = zlib.decompress(data), {}, 0
    while pos < len(raw):
        end = raw.index(b"\n", pos)
        size, name = raw[pos:end].split(b" ", 1)
        out[name.decode()] = raw[end + 1 : end + 1 + int(size)]
        pos = end + 1 + int(size)
    return out


def test_core_holds_what_the_light_commands_import_and_nothing_heavy():
    names = agent_bundle.core_names(agent_bundle.sources())
    assert {"provision/__init__.py", "provision/agent/__init__.py", "provision/agent/protocol.py",
            "provision/agent/health.py", "provision/agent/facts/__init__.py",
            "provision/agent/nvidia/__init__.py"} <= set(names)
    heavy = ("provision/agent/datasets/", "provision/agent/bench/", "provision/agent/train/",
             "provision/agent/torch_verify.py")
    assert not [n for n in names if n.startswith(heavy)]
    assert len(names) < len(agent_bundle.sources())


def test_the_import_scan_follows_imports_at_any_depth_and_their_packages():
    files = {
        "provision/__init__.py": b"",
        "provision/agent/__init__.py": b"",
        "provision/agent/protocol.py": b"",
        "provision/agent/health.py": b"def f():\n    from provision.agent.bench import timing as t  # lazy\n",
        "provision/agent/facts/__init__.py": b"from provision.agent.facts import (\n    a,\n    b as c,\n)\n",
        "provision/agent/facts/a.py": b"import provision.agent.datasets.deps\n",
        "provision/agent/facts/b.py": b"",
        "provision/agent/bench/__init__.py": b"",
        "provision/agent/bench/timing.py": b"",
        "provision/agent/bench/other.py": b"",
        "provision/agent/datasets/__init__.py": b"",
        "provision/agent/datasets/deps.py": b"",
        "provision/agent/train/run.py": b"",
    }
    names = set(agent_bundle.core_names(files))
    assert {"provision/agent/bench/timing.py", "provision/agent/bench/__init__.py",
            "provision/agent/datasets/deps.py", "provision/agent/datasets/__init__.py"} <= names
    assert not names & {"provision/agent/bench/other.py", "provision/agent/train/run.py"}


def test_a_bundle_carries_sources_bytecode_and_a_manifest_last():
    bundle = agent_bundle.bundle("core")
    records = _records(bundle.data)
    assert list(records)[-1] == "MANIFEST" and list(records)[0] == "__main__.py"
    tag = sys.implementation.cache_tag
    pyc = records[f"provision/agent/__pycache__/protocol.{tag}.pyc"]
    import importlib.util

    assert pyc[:4] == importlib.util.MAGIC_NUMBER and pyc[4:8] == (1).to_bytes(4, "little")
    assert pyc[8:16] == importlib.util.source_hash(records["provision/agent/protocol.py"])
    manifest = dict(reversed(line.split(" ", 1)) for line in records["MANIFEST"].decode().splitlines())
    assert set(manifest) == set(records) - {"MANIFEST"}
    assert all(int(manifest[n]) == len(records[n]) for n in manifest)


def test_the_content_hash_covers_main_and_every_file(monkeypatch):
    before = (agent_bundle.digest("core"), agent_bundle.digest("full"))
    agent_bundle.reset()
    monkeypatch.setattr(agent_bundle, "MAIN", agent_bundle.MAIN + b"# changed\n")
    try:
        assert agent_bundle.digest("core") != before[0] and agent_bundle.digest("full") != before[1]
    finally:
        monkeypatch.undo()
        agent_bundle.reset()
    assert (agent_bundle.digest("core"), agent_bundle.digest("full")) == before


def test_bundles_are_cached_on_the_controller_and_a_damaged_cache_is_rebuilt(provision_env):
    agent_bundle.reset()
    built = agent_bundle.bundle("core")
    cache = agent_bundle._cache_file("core", built.digest)
    assert cache.read_bytes() == built.data
    cache.write_bytes(built.data[: len(built.data) // 2])  # torn
    agent_bundle.reset()
    assert agent_bundle.bundle("core").data == built.data
    assert cache.read_bytes() == built.data


# -- the bootstrap, as the host runs it ---------------------------------------------------------
def _boot(python: str, folder: Path, command: str, blob: bytes | None, request: bytes = b"{}\n",
          env: dict | None = None) -> subprocess.CompletedProcess:
    head = b"PROVISION-BUNDLE %d\n" % len(blob or b"")
    return subprocess.run(
        [python, "-S", *bootstrap_args(str(folder), command, "agent-keepme")],
        input=head + (blob or b"") + request, capture_output=True, timeout=120, env=env,
    )


def test_no_bundle_and_no_agent_exits_97_and_a_cut_bundle_is_refused(tmp_path):
    folder = tmp_path / "cache" / "agent-x"
    assert _boot(sys.executable, folder, "ping", None).returncode == 97
    textless = bootstrap_args(str(folder), "ping", with_text=False)  # as a warm call sends it
    missing = subprocess.run([sys.executable, "-S", *textless], input=b"PROVISION-BUNDLE 0\n{}\n",
                             capture_output=True, timeout=60)
    assert missing.returncode == 97, missing.stderr
    blob = agent_bundle.bundle("core").data
    cut = subprocess.run(
        [sys.executable, "-S", *bootstrap_args(str(folder), "ping")],
        input=b"PROVISION-BUNDLE %d\n" % len(blob) + blob[:100], capture_output=True, timeout=60,
    )
    assert cut.returncode == 2 and b"cut short" in cut.stderr and not folder.exists()


def test_unpack_runs_the_command_and_prunes_only_old_other_versions(tmp_path):
    cache = tmp_path / "cache"
    for name in ("agent-old", "agent-keepme", "agent-recent", "agent-y.tmp-1", "other"):
        (cache / name).mkdir(parents=True)
    for name in ("agent-old", "agent-keepme", "agent-y.tmp-1", "other"):
        os.utime(cache / name, (1, 1))
    result = _boot(sys.executable, cache / "agent-x", "ping", agent_bundle.bundle("core").data)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(b'{"event": "unpacked"}\n') and b'"protocol": 1' in result.stdout
    assert sorted(p.name for p in cache.iterdir()) == ["agent-keepme", "agent-recent", "agent-x", "other"]


def test_concurrent_first_contacts_from_several_processes_all_succeed(tmp_path):
    folder = tmp_path / "cache" / "agent-x"
    blob = agent_bundle.bundle("core").data
    head = b"PROVISION-BUNDLE %d\n" % len(blob)
    procs = [
        subprocess.Popen([sys.executable, "-S", *bootstrap_args(str(folder), "ping")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(6)
    ]
    for proc in procs:  # all started before any gets its bundle: they race for the rename
        proc.stdin.write(head + blob + b"{}\n")
        proc.stdin.close()
    outs = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    assert [code for code, _, _ in outs] == [0] * 6, [err for _, _, err in outs]
    assert all(b'"protocol": 1' in out for _, out, _ in outs)
    assert sum(out.startswith(b'{"event": "unpacked"}') for _, out, _ in outs) >= 1
    assert sorted(p.name for p in folder.parent.iterdir()) == ["agent-x"]  # no temp folders left


@pytest.mark.parametrize("version", ["3.8", "3.9"])
def test_an_older_host_python_ignores_the_bytecode_and_runs_facts_cold(tmp_path, version):
    found = sorted(PYENV.glob(f"{version}.*/bin/python{version}"))
    if not found:
        pytest.skip(f"no Python {version} on this machine")
    python = str(found[-1])
    folder = tmp_path / "cache" / "agent-x"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    result = _boot(python, folder, "facts", agent_bundle.bundle("core").data,
                   b'{"only": ["hostname", "python"]}\n', env=env)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert b'"event": "result"' in result.stdout
    own_tag = f"cpython-{version.replace('.', '')}"
    written = {p.name for p in folder.rglob(f"*.{own_tag}.pyc")}
    assert "protocol." + own_tag + ".pyc" in written  # compiled from source, cached for next time
    shutil.rmtree(folder)


def test_a_warm_call_runs_the_folders_bootstrap_and_a_broken_one_falls_back_to_argv(tmp_path):
    folder = tmp_path / "cache" / "agent-x"
    assert _boot(sys.executable, folder, "-", agent_bundle.bundle("core").data).returncode == 0
    args = bootstrap_args(str(folder), "ping", with_text=False)
    warm = subprocess.run([sys.executable, "-S", *args], input=b"PROVISION-BUNDLE 0\n{}\n",
                          capture_output=True, timeout=60)
    assert warm.returncode == 0 and b'"protocol": 1' in warm.stdout  # from the folder's bytecode
    shutil.rmtree(folder / "__pycache__")
    (folder / "provision_boot.py").write_text("def run(:\n")  # broken, and not the size it should be
    again = _boot(sys.executable, folder, "ping", agent_bundle.bundle("core").data)
    assert again.returncode == 0 and again.stdout.startswith(b'{"event": "unpacked"}')
    assert (folder / "provision_boot.py").read_bytes() == agent_bundle.sources()["provision/agent/bootstrap.py"]
