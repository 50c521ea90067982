"""Output framing (issue 9.2): on a host whose login shell prints on every command (~/.bashrc,
which bash sources for ssh commands, and ~/.profile; to stdout and stderr, with and without a
trailing newline), results hold exactly what the command printed: run(), stream() lines,
put/get of binary data, stdin reaching the command intact, the agent's JSON lines, and the
`stdout`, `stdout_lines`, `rc` a playbook registers equal what ansible-playbook registers on the
same host.

The rc files are written here over ns_exec (the host's own /root tmpfs), so these tests do not
depend on a fleet kind; what they print is random per test and asserted absent from results.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from provision.engine.runner import run_playbook
from provision.remote.agent import Agent

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")


def make_noisy(fleet: Any, host: Any) -> tuple[str, str]:
    """~/.bashrc and ~/.profile that print on both streams on every command; returns the two
    texts so tests can assert they never reach a result."""
    out, err = f"BANNER-{secrets.token_hex(4)}", f"WARN-{secrets.token_hex(4)}"
    bashrc = textwrap.dedent(
        f"""\
        echo "{out} welcome to the rental"
        echo "{err} conda init note" >&2
        printf '{out}-no-newline'
        printf '{err}-no-newline' >&2
        """
    )
    profile = f'echo "{out} from .profile"\necho "{err} from .profile" >&2\n'
    fleet.ns_exec(host, ["sh", "-c", 'cat > /root/.bashrc'], input=bashrc)
    fleet.ns_exec(host, ["sh", "-c", 'cat > /root/.profile'], input=profile)
    return out, err


@pytest.fixture
def noisy(make_fleet: Any, connect: Any) -> tuple[Any, Any, Any, tuple[str, str]]:
    fleet = make_fleet(1)
    host = fleet.hosts[0]
    noise = make_noisy(fleet, host)
    return fleet, host, connect(host.as_host()), noise


def test_the_noise_is_really_there(noisy) -> None:
    """The rc files do print for an ssh command (else the other tests prove nothing)."""
    fleet, host, _, (out, err) = noisy
    proc = subprocess.run(
        ["ssh", "-i", host.key_file, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "BatchMode=yes", f"root@{host.address}", "nproc"],
        capture_output=True, text=True, timeout=60,
    )
    assert out in proc.stdout and err in proc.stderr, (proc.stdout, proc.stderr)


def test_run_returns_exactly_what_the_command_printed(noisy) -> None:
    fleet, host, conn, (out, err) = noisy
    nproc = fleet.ns_exec(host, "nproc").stdout  # the host's own answer, outside SSH

    result = conn.run("nproc; echo oops >&2; exit 3")

    assert (result.exit_code, result.stdout, result.stderr) == (3, nproc, "oops\n")
    empty = conn.run("true")
    assert (empty.exit_code, empty.stdout, empty.stderr) == (0, "", "")
    no_newline = conn.run("printf 'a b'")
    assert no_newline.stdout == "a b"


def test_stdin_reaches_the_command_intact(noisy) -> None:
    fleet, host, conn, (out, err) = noisy
    payload = bytes(range(256)) * 64 + b"\nlast line without newline"

    result = conn.run("sha256sum", stdin=payload)

    assert result.stdout.split()[0] == hashlib.sha256(payload).hexdigest()


def test_stream_lines_and_binary_files_are_clean(noisy) -> None:
    fleet, host, conn, (out, err) = noisy
    lines: list[str] = []
    result = conn.stream("cat; echo tail", source=[b"one\ntwo\n"], on_stdout_line=lines.append)
    assert result.ok and lines == ["one", "two", "tail"]

    blob = os.urandom(200_000) + bytes(range(256))
    conn.put(blob, "~/blob.bin", mode=0o600)
    on_host = fleet.ns_exec(host, "sha256sum /root/blob.bin").stdout.split()[0]
    assert on_host == hashlib.sha256(blob).hexdigest()  # the file holds our bytes, no banner
    assert conn.get("~/blob.bin") == blob  # and get() returns them, no banner either


def test_agent_answers_through_the_noise(noisy) -> None:
    fleet, host, conn, (out, err) = noisy
    facts = Agent(conn).call("facts")
    assert facts["hostname"] == fleet.ns_exec(host, "hostname").stdout.strip()
    assert Agent(conn).call("ping") is not None


def test_a_command_that_never_starts_still_says_why(noisy) -> None:
    """If the shell fails before the command (here: ~/.bashrc exits), the result keeps what the
    shell said instead of an empty string."""
    fleet, host, conn, (out, err) = noisy
    fleet.ns_exec(host, ["sh", "-c", "cat >> /root/.bashrc"], input='echo "rc says no" >&2; exit 42\n')

    result = conn.run("echo never")

    assert result.exit_code == 42 and "never" not in result.stdout
    assert "rc says no" in result.stderr


# -- against Ansible ---------------------------------------------------------------------------
PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - command: nproc
      register: n
      changed_when: false
    - shell: "printf 'a\\nb\\n\\nc'; echo to-stderr >&2"
      register: lines
    - shell: "echo before; exit 3"
      register: failing
      ignore_errors: true
    - command: cat
      args:
        stdin: "from stdin"
      register: fed
    - copy:
        dest: "{{ out }}"
        content: "{{ {'n': n, 'lines': lines, 'failing': failing, 'fed': fed, 'cores': n.stdout | int} | to_json }}"
"""
KEYS = ("stdout", "stdout_lines", "stderr", "rc")


def _ansible(host: Any, workdir: Path, playbook: Path, out: str) -> subprocess.CompletedProcess[str]:
    inventory = workdir / "ansible-hosts.ini"
    inventory.write_text(
        f"{host.name} ansible_host={host.address} ansible_user=root "
        f"ansible_ssh_private_key_file={host.key_file} ansible_python_interpreter=/usr/bin/python3 "
        "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'\n"
    )
    control = tempfile.mkdtemp(prefix="pvcp-", dir="/tmp")  # a unix socket path must be short
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(workdir / "none.cfg"),
        ANSIBLE_SSH_CONTROL_PATH_DIR=control,
        ANSIBLE_LOCAL_TEMP=str(workdir / ".ansible-tmp"),
        ANSIBLE_HOST_KEY_CHECKING="false",
        ANSIBLE_RETRY_FILES_ENABLED="false",
        ANSIBLE_NOCOLOR="1",
    )
    (workdir / "none.cfg").write_text("")
    try:
        return subprocess.run(
            [ANSIBLE, "-i", str(inventory), str(playbook), "-e", f"out={out}"],
            capture_output=True, text=True, env=env, cwd=workdir, timeout=300,
        )
    finally:
        shutil.rmtree(control, ignore_errors=True)


@pytest.mark.skipif(not os.access(ANSIBLE, os.X_OK), reason="ansible-core not installed")
def test_registered_results_equal_ansibles_on_a_noisy_host(noisy, tmp_path: Path, ssh_options) -> None:
    fleet, host, _, (out, err) = noisy
    playbook = tmp_path / "site.yml"
    playbook.write_text(PLAYBOOK.lstrip("\n"))

    theirs_run = _ansible(host, tmp_path, playbook, "/root/ansible.json")
    assert theirs_run.returncode == 0, theirs_run.stdout[-3000:] + theirs_run.stderr[-2000:]
    result = run_playbook(playbook, hosts=[host.as_host()], extra_vars={"out": "/root/provision.json"},
                          options=ssh_options)
    assert result.exit_code() == 0, [(r.task, r.status, r.msg) for r in result.results]

    theirs = json.loads(fleet.ns_exec(host, "cat /root/ansible.json").stdout)
    ours = json.loads(fleet.ns_exec(host, "cat /root/provision.json").stdout)
    for task in ("n", "lines", "failing", "fed"):
        assert {k: ours[task][k] for k in KEYS} == {k: theirs[task][k] for k in KEYS}, task
    assert ours["cores"] == theirs["cores"] == int(fleet.ns_exec(host, "nproc").stdout)
    text = json.dumps(ours)
    assert out not in text and err not in text
