"""Ansible's own module for a module provision does not implement (docs/playbooks.md, "Ansible's
own modules"), on the controller itself (a local host): the real ansible-core of the test
environment builds the payload in its own process, the host's python runs it, the JSON comes
back as the task's result. Over real SSH: tests/fleet/test_ansible_fallback_ssh.py."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from provision.ansible_bridge import payload
from provision.engine.runner import run_playbook
from provision.inventory.model import Host
from provision.modules.ansible_fallback import to_result

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from tiny_collection import write_tiny_collection  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KEY = "example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def playbook(tmp_path: Path, tasks: str) -> Path:
    body = textwrap.indent(textwrap.dedent(tasks).strip("\n"), "    ")
    pb = tmp_path / "site.yml"
    pb.write_text(f"- hosts: localhost\n  gather_facts: false\n  tasks:\n{body}\n")
    return pb


def results(pb: Path, **kw: object) -> dict[str, dict]:
    out = run_playbook(pb, hosts=[Host("localhost", local=True)], **kw)
    return {r.task: {**r.result, "_status": r.status} for r in out.results}


@pytest.fixture(autouse=True)
def _fresh_bridge() -> None:
    payload.forget()  # PATH and collections differ between tests


def test_a_builtin_module_provision_lacks_runs_as_ansibles_with_check_and_diff(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    pb = playbook(tmp_path, f"""
    - name: kh
      ansible.builtin.known_hosts: {{name: example.org, key: "{KEY}", path: "{path}"}}
      register: kh
    - copy: {{dest: "{tmp_path}/reg.json", content: "{{{{ kh | to_json }}}}"}}
    """)
    checked = results(pb, check=True, diff=True)["kh"]
    assert checked["_status"] == "changed" and not path.exists()  # check mode: nothing written
    diff = checked["diff"]  # (the key's value is masked: provision masks arguments named key)
    assert diff["before"] == "" and diff["after_header"] == str(path) and diff["after"].endswith("\n")
    first = results(pb)["kh"]
    assert first["_status"] == "changed"  # (diff kept: Ansible registers what the module returns)
    assert path.read_text() == KEY + "\n"
    reg = json.loads((tmp_path / "reg.json").read_text())
    assert reg["changed"] is True and reg["path"] == str(path) and "invocation" not in reg
    assert results(pb)["kh"]["_status"] == "ok"  # Ansible's module is idempotent; so are we


def test_a_collection_module_beside_the_playbook_and_one_without_check_mode(tmp_path: Path) -> None:
    write_tiny_collection(tmp_path / "collections")
    note = tmp_path / "note.txt"
    pb = playbook(tmp_path, f"""
    - name: note
      pvtest.tiny.note: {{path: "{note}", text: hello, token: s3cr3t-value}}
      register: n
    - name: fact
      copy: {{dest: "{tmp_path}/fact.txt", content: "{{{{ pv_note_len }}}} {{{{ n.token_given }}}}"}}
    - name: nocheck
      pvtest.tiny.nocheck:
    - name: fails
      pvtest.tiny.nocheck: {{fail: true}}
      ignore_errors: true
    """)
    checked = results(pb, check=True, diff=True)
    assert checked["note"]["check"] is True and checked["note"]["_status"] == "changed"
    assert checked["note"]["diff"]["after"] == "hello\n" and not note.exists()
    assert checked["nocheck"]["_status"] == "skipped"  # the module said so, as under Ansible
    assert "check mode" in checked["nocheck"]["msg"]
    first = results(pb)
    assert note.read_text() == "hello\n"
    assert (tmp_path / "fact.txt").read_text() == "6 True"  # ansible_facts became host vars
    assert first["nocheck"]["ran"] is True
    assert first["fails"]["_status"] == "failed" and first["fails"]["msg"] == "asked to fail"
    assert first["fails"]["rc"] == 3
    assert results(pb)["note"]["_status"] == "ok"
    # the payload cache holds no argument: arguments travel only inside the program on stdin
    cache = Path(os.environ["PROVISION_HOME"]) / "ansible-modules"
    files = list(cache.iterdir())
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert all("s3cr3t-value" not in f.read_text() for f in files)


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "provision", *args],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT, check=False,
    )


def test_without_ansible_the_error_names_the_module_the_line_and_the_install_commands(tmp_path: Path) -> None:
    pb = playbook(tmp_path, """
    - name: ufw
      community.general.ufw: {rule: allow, port: '22'}
    - name: kh
      known_hosts: {name: example.org, key: x}
    """)
    bare = tmp_path / "bin"
    bare.mkdir()  # a PATH with neither ansible-playbook nor a python3 that has ansible
    # (and a HOME without pipx or virtualenvs: provision looks there too)
    env = {**os.environ, "PATH": str(bare), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    env.pop("PROVISION_ANSIBLE_PYTHON", None)
    env.pop("VIRTUAL_ENV", None)
    done = _cli(["run", "--syntax-check", str(pb), "localhost"], env)
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert f"{pb}:5:7: unknown module 'community.general.ufw'" in out, out
    assert ("python3 -m pip install ansible-core && ansible-galaxy collection install community.general") in out
    assert f"{pb}:7:7: unknown module 'known_hosts'" in out
    assert out.count("python3 -m pip install ansible-core") == 2
    # with Ansible found, known_hosts loads and ufw's collection is what is missing
    env["PATH"] = os.environ["PATH"]
    done = _cli(["run", "--syntax-check", str(pb), "localhost"], env)
    out = done.stdout + done.stderr
    assert "unknown module 'known_hosts'" not in out
    assert "has no module 'community.general.ufw'" in out and "ansible-galaxy collection install community.general" in out


def test_provision_never_imports_ansible(tmp_path: Path) -> None:
    path = tmp_path / "kh"
    pb = playbook(tmp_path, f'- known_hosts: {{name: example.org, key: "{KEY}", path: "{path}"}}')
    code = (
        "import sys; from provision.engine.runner import run_playbook;"
        "from provision.inventory.model import Host;"
        f"r = run_playbook({str(pb)!r}, hosts=[Host('localhost', local=True)]); assert r.ok, r;"
        "bad = [m for m in sys.modules if m == 'ansible' or m.startswith(('ansible.', 'ansible_collections'))];"
        "assert not bad, bad"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert path.read_text() == KEY + "\n"
    # and the one file that imports ansible is the GPL builder, run as its own program
    importers = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "provision").rglob("*.py")
        if any(line.startswith(("import ansible", "from ansible")) for line in p.read_text().splitlines()
               if not line.startswith("from ansible_")) or "    from ansible" in p.read_text()
    ]
    assert importers == ["provision/ansible_bridge/gpl/build_payload.py"]
    assert "SPDX-License-Identifier: GPL-3.0-or-later" in (ROOT / importers[0]).read_text()


def test_module_answers_become_results_as_ansible_reads_them() -> None:
    r = to_result('noise\n{"changed": true, "rc": 2, "stdout": "a\\nb", "invocation": {"module_args": {}}}\n', "", 0)
    assert r.failed and r.changed and r.rc == 2 and r.stdout == "a\nb"  # rc != 0, no `failed`
    assert "invocation" not in r.as_dict() and r.as_dict()["stdout_lines"] == ["a", "b"]
    r = to_result('{"failed": false, "rc": 1, "diff": {"before": "x", "after": "y"}}', "", 0)
    assert not r.failed and r.diff == [{"before": "x", "after": "y"}]
    assert r.as_dict()["diff"] == {"before": "x", "after": "y"}  # registered as the module said
    r = to_result("Traceback (most recent call last):\n  boom\n", "ImportError: x", 1)
    assert r.failed and r.msg.startswith("MODULE FAILURE") and r.data["module_stderr"] == "ImportError: x"


def test_an_argument_provision_does_not_implement_runs_the_task_as_ansibles_module(tmp_path: Path) -> None:
    from provision.modules.ansible_fallback import run_unsupported
    from provision.modules.base import set_ansible_fallback

    set_ansible_fallback(run_unsupported)  # (other tests register hooks of their own)
    target = tmp_path / "touched"
    pb = playbook(tmp_path, f"""
    - name: touch
      file: {{path: "{target}", state: touch, mode: "0640", follow: false}}
      register: t
    """)
    got = results(pb)["touch"]
    assert got["_status"] == "changed" and got["state"] == "file"  # Ansible's file module's keys
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


@pytest.mark.parametrize("where", [".local/pipx/venvs/ansible-core", ".local/share/pipx/venvs/ansible", ".venv"])
def test_ansible_found_off_path_in_pipx_or_a_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """Ansible installed with pipx (its venv under ~/.local/pipx or ~/.local/share/pipx) or in a
    virtualenv, none on PATH: the fallback still finds it, and the message without it says
    where it looked."""
    payload.forget()
    real = payload.ansible_python()
    if real is None:
        pytest.skip("ansible-core not installed here")
    python = tmp_path / where / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to(real)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("PROVISION_ANSIBLE_PYTHON", raising=False)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("PIPX_HOME", raising=False)
    payload.forget()
    try:
        assert payload.ansible_python() == str(python)
        python.unlink()
        payload.forget()
        assert str(python) in payload.looked_for_ansible()
    finally:
        payload.forget()
