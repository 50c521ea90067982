"""`provision facts` end to end: the real CLI in a subprocess, real SSH to the test fleet.

Each test runs `python -m provision facts ...` exactly as a user would and reads only what a
user sees: the exit code, stdout (one JSON document with --json, else nothing) and stderr.
The per-test PROVISION_KNOWN_HOSTS (tests/conftest.py) starts empty, so every test records the
hosts' keys afresh under accept-new.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import truth
from fleet import Fleet, generate_keypair

REPO = Path(__file__).resolve().parents[2]
NAMES = [f"gpu{i}" for i in range(1, 9)]
CONNECT_TIMEOUT = 2


def provision_facts(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run the CLI as a user would. `timeout` only stops a hung run from hanging the suite."""
    full_env = dict(os.environ)  # carries the per-test PROVISION_* paths from provision_env
    full_env["COLUMNS"] = "200"  # rich wraps at 80 columns without a terminal
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "provision", "facts", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=full_env,
        timeout=timeout,
    )


def json_hosts(proc: subprocess.CompletedProcess) -> dict[str, dict]:
    """stdout must be exactly one JSON document {"hosts": {...}}: json.loads of the whole of it
    fails on a second document or on any stray line."""
    assert proc.stdout.strip(), f"no JSON on stdout; stderr:\n{proc.stderr}"
    document = json.loads(proc.stdout)
    assert list(document) == ["hosts"]
    return document["hosts"]


def describe(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


@pytest.fixture
def empty_ssh_config(tmp_path: Path) -> str:
    """Given to every run so the controller's ~/.ssh/config never takes part."""
    path = tmp_path / "ssh_config"
    path.write_text("")
    return str(path)


@pytest.fixture
def inventory(fleet: Fleet, tmp_path: Path) -> str:
    return str(fleet.write_inventory(tmp_path / "inventory.ini"))


def _inventory_with(fleet: Fleet, path: Path, extra_lines: list[str], **key_for: str) -> str:
    """The fleet's INI inventory with some hosts' key replaced and extra host lines added."""
    lines = ["[gpus]"]
    for h in fleet.hosts:
        key = key_for.get(h.name, h.key_file)
        lines.append(
            f"{h.name} ansible_host={h.address} ansible_port={h.port} ansible_user={h.user} "
            f"ansible_ssh_private_key_file={key}"
        )
    path.write_text("\n".join(lines + extra_lines) + "\n")
    return str(path)


def _agent_cache_listing(fleet: Fleet, host) -> str:
    """Names, inodes and mtimes in ~/.cache/provision on the host, read outside SSH."""
    return fleet.ns_exec(
        host, "ls -lai --time-style=full-iso /root/.cache/provision 2>/dev/null || true"
    ).stdout


# -- the happy path ------------------------------------------------------------------------------
def test_json_facts_from_8_hosts_in_parallel(fleet: Fleet, inventory: str, empty_ssh_config: str):
    proc = provision_facts(
        "all", "-i", inventory, "--forks", "8", "--json", "--ssh-config", empty_ssh_config
    )
    assert proc.returncode == 0, describe(proc)
    hosts = json_hosts(proc)
    assert sorted(hosts) == sorted(NAMES)
    assert sorted(f["hostname"] for f in hosts.values()) == sorted(NAMES)  # 8 distinct machines
    for name, facts in hosts.items():
        assert facts["hostname"] == name  # gpuN's own UTS namespace, reached over SSH
        for key in (
            "os",
            "cpu",
            "memory",
            "disks",
            "python",
            "gpus",
            "nvidia",
            "data_dir",
            "torch",
        ):
            assert key in facts, f"{name}: no {key!r} in facts"
        # the host's tmpfs "local SSD", found as AutoDL's known layout
        assert facts["data_dir"]["path"] == "/root/autodl-tmp", facts["data_dir"]
        assert facts["data_dir"]["network"] is False
        assert facts["data_dir"]["free_bytes"] > 0
        # consistent with what the host itself says (any machine: GPUs or not, any distro)
        agent_python = facts["python"]["agent"]
        path, version = truth.python3(fleet, name)
        assert agent_python["executable"] == path  # the host's, not this machine's pyenv
        assert agent_python["version"] == version
        gpus = truth.nvidia_gpu_names(fleet, name)
        assert [g["name"] for g in facts["gpus"]] == gpus
        if not gpus:
            assert "no NVIDIA GPU" in facts["nvidia"]["reason"]
        assert facts["cpu"]["effective_cpus"] >= 1
        assert facts["cpu"]["logical_cpus"] >= truth.nproc(fleet, name)
        assert facts["memory"]["total_bytes"] > 0
        release = truth.os_release(fleet, name)
        assert facts["os"]["id"] == release["ID"]
        assert facts["os"]["version_id"] == release.get("VERSION_ID")


def test_human_output_goes_to_stderr_only(fleet: Fleet, inventory: str, empty_ssh_config: str):
    proc = provision_facts("gpu1", "gpu2", "-i", inventory, "--ssh-config", empty_ssh_config)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == ""
    for name in ("gpu1", "gpu2"):
        assert f"{name} — {name}" in proc.stderr  # each host's table title: name — hostname
    assert "/root/autodl-tmp" in proc.stderr
    assert "GPU" in proc.stderr
    if not truth.nvidia_gpu_names(fleet, "gpu1"):
        assert "none" in proc.stderr


def test_localhost_runs_without_ssh(tmp_path: Path):
    # strict host-key checking with empty known_hosts: any SSH connection would be refused
    proc = provision_facts("localhost", "--json", "--known-hosts", "strict")
    assert proc.returncode == 0, describe(proc)
    facts = json_hosts(proc)["localhost"]
    assert facts["hostname"] == os.uname().nodename
    # LocalConnection runs the agent with the controller's own interpreter
    assert os.path.realpath(facts["python"]["agent"]["executable"]) == os.path.realpath(
        sys.executable
    )


# -- one host bad, the others go on ------------------------------------------------------------
def test_wrong_key_fails_that_host_only(fleet: Fleet, tmp_path: Path, empty_ssh_config: str):
    stranger = tmp_path / "stranger_key"
    generate_keypair(stranger)  # a key no fleet host authorizes
    inventory = _inventory_with(fleet, tmp_path / "inv.ini", [], gpu3=str(stranger))
    proc = provision_facts("all", "-i", inventory, "--json", "--ssh-config", empty_ssh_config)
    assert proc.returncode == 1, describe(proc)  # a host failed (not merely unreachable)
    hosts = json_hosts(proc)
    assert set(hosts["gpu3"]) == {"error", "unreachable"}
    assert hosts["gpu3"]["unreachable"] is False
    assert "permission denied" in hosts["gpu3"]["error"]
    assert fleet.host("gpu3").address in hosts["gpu3"]["error"]
    for name in NAMES:
        if name != "gpu3":
            assert hosts[name]["hostname"] == name


def test_dead_address_is_unreachable_and_others_succeed(
    fleet: Fleet, tmp_path: Path, empty_ssh_config: str
):
    dead = fleet.dead_address()
    inventory = _inventory_with(
        fleet,
        tmp_path / "inv.ini",
        [
            f"dead ansible_host={dead} ansible_user=root ansible_ssh_private_key_file={fleet.key_file}"
        ],
    )
    proc = provision_facts(
        "all",
        "-i",
        inventory,
        "--json",
        "--connect-timeout",
        str(CONNECT_TIMEOUT),
        "--ssh-config",
        empty_ssh_config,
    )
    assert proc.returncode == 4, describe(proc)  # unreachable, nothing failed otherwise
    hosts = json_hosts(proc)
    assert hosts["dead"]["unreachable"] is True
    # it gave up because the connect timeout ran out (a timeout is never retried)
    assert f"no answer within {CONNECT_TIMEOUT}s (--connect-timeout)" in hosts["dead"]["error"]
    assert dead in hosts["dead"]["error"]
    assert [hosts[n]["hostname"] for n in NAMES] == NAMES


# -- host keys ----------------------------------------------------------------------------------
def test_changed_host_key_refused_unless_off(make_fleet, provision_env, empty_ssh_config: str):
    own = make_fleet(1)  # its host key gets replaced: not the shared fleet
    host = own.hosts[0]
    target = f"root@{host.address}"
    common = ["--key", own.key_file, "--json", "--ssh-config", empty_ssh_config]

    first = provision_facts(target, *common)  # accept-new records the key
    assert first.returncode == 0, describe(first)
    assert host.address in provision_env.known_hosts.read_text()

    own.replace_host_key(host)  # a re-imaged rental on the same IP:port
    for policy in ("accept-new", "strict"):
        proc = provision_facts(target, *common, "--known-hosts", policy)
        assert proc.returncode == 1, f"--known-hosts {policy}: " + describe(proc)
        (result,) = json_hosts(proc).values()
        assert result["unreachable"] is False
        assert f"host key for {host.address} CHANGED" in result["error"], policy
        assert "--known-hosts off" in result["error"]  # the remedy is named
        assert "hostname" not in result

    proc = provision_facts(target, *common, "--known-hosts", "off")
    assert proc.returncode == 0, describe(proc)
    (facts,) = json_hosts(proc).values()
    assert facts["hostname"] == host.name
    assert "host key checking is OFF" in proc.stderr  # accepted, but not silently


# -- the agent is shipped once per content hash --------------------------------------------------
def test_second_run_does_not_upload_the_agent(make_fleet, empty_ssh_config: str, tmp_path: Path):
    own = make_fleet(2)  # fresh hosts: nothing uploaded yet, whatever ran before
    inventory = str(own.write_inventory(tmp_path / "inv.ini"))
    args = ["all", "-i", inventory, "--json", "-v", "--ssh-config", empty_ssh_config]
    assert _agent_cache_listing(own, own.hosts[0]).strip() == ""

    first = provision_facts(*args)
    assert first.returncode == 0, describe(first)
    assert first.stderr.count("uploading agent") == 2  # once per host
    listings = [_agent_cache_listing(own, h) for h in own.hosts]
    for host in own.hosts:  # one agent folder per host, unpacked and runnable
        agent_main = own.ns_exec(host, "ls /root/.cache/provision/agent-*/__main__.py").stdout
        assert agent_main.count("__main__.py") == 1, listings

    second = provision_facts(*args)
    assert second.returncode == 0, describe(second)
    assert "uploading agent" not in second.stderr
    # the same file, untouched: same inode and mtime, no temp files left behind
    assert [_agent_cache_listing(own, h) for h in own.hosts] == listings
    assert json_hosts(second).keys() == {"gpu1", "gpu2"}


# -- target forms --------------------------------------------------------------------------------
TARGET_FORMS = ["user@addr", "ssh-url", "pasted-ssh-command", "ssh-config-alias"]


@pytest.mark.parametrize("form", TARGET_FORMS)
def test_target_forms(fleet: Fleet, tmp_path: Path, empty_ssh_config: str, form: str):
    host = fleet.hosts[TARGET_FORMS.index(form)]  # a different host per form
    key = fleet.key_file
    ssh_config = empty_ssh_config
    if form == "user@addr":
        args = [f"root@{host.address}", "--key", key]
    elif form == "ssh-url":
        args = [f"ssh://root@{host.address}:22", "--key", key]
    elif form == "pasted-ssh-command":  # as a rental console shows it, pasted as ONE argument
        args = [f"ssh -p 22 -i {shlex.quote(key)} root@{host.address}"]
    else:
        ssh_config = str(tmp_path / "ssh_config")
        Path(ssh_config).write_text(
            f"Host rental-box\n  HostName {host.address}\n  Port 22\n  User root\n"
            f"  IdentityFile {key}\n"
        )
        args = ["rental-box"]
    proc = provision_facts(*args, "--json", "--ssh-config", ssh_config)
    assert proc.returncode == 0, describe(proc)
    hosts = json_hosts(proc)
    assert len(hosts) == 1
    ((name, facts),) = hosts.items()
    assert facts["hostname"] == host.name
    if form == "ssh-config-alias":
        assert name == "rental-box"  # the user's name for it, not the address


# -- passwords -----------------------------------------------------------------------------------
def test_password_from_env_works_and_is_never_shown(make_fleet, empty_ssh_config: str):
    own = make_fleet(1)
    host = own.hosts[0]
    password = "Pw-6f1e-correct-horse"
    own.set_password(host, "renter", password)
    target = f"renter@{host.address}"
    common = [target, "--password-env", "RENTAL_PW", "--ssh-config", empty_ssh_config]

    proc = provision_facts(*common, "--json", "-vv", env={"RENTAL_PW": password})
    assert proc.returncode == 0, describe(proc)
    (facts,) = json_hosts(proc).values()
    assert facts["hostname"] == host.name
    assert password not in proc.stdout and password not in proc.stderr

    wrong = provision_facts(*common, "--json", env={"RENTAL_PW": "not-" + password})
    assert wrong.returncode == 1, describe(wrong)
    (result,) = json_hosts(wrong).values()
    assert "permission denied" in result["error"] and result["unreachable"] is False
    assert password not in wrong.stdout + wrong.stderr


# -- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("filename", "text", "line"),
    [
        ("bad.ini", "[gpus]\ngpu1 ansible_host=198.18.0.2\ngpu2 ansible_port=notaport\n", 3),
        (
            "bad.yml",
            "all:\n  hosts:\n    gpu1:\n      ansible_host: 198.18.0.2\n    gpu2:\n   bad: indent\n",
            6,
        ),
    ],
)
def test_malformed_inventory_is_a_usage_error_with_file_and_line(
    tmp_path: Path, filename: str, text: str, line: int
):
    path = tmp_path / filename
    path.write_text(text)
    proc = provision_facts("all", "-i", str(path), "--json")
    assert proc.returncode == 2, describe(proc)
    assert proc.stdout == ""  # no document at all rather than a half-true one
    assert f"{path}:{line}" in proc.stderr.replace("\n", "")
