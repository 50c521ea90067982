"""`provision facts` on every rental-like host kind (tests/fleet/rentals.py), and become for the
agent: every fact is compared with what the host itself says (its own python3, os-release,
nvidia-smi, nproc), never with this machine's values.
"""

from __future__ import annotations

import pytest
import truth
from kinds import NOISE_ERR, NOISE_OUT, SUDO_PASSWORD_USER
from rentals import CONDA_PYTHON, SUDO_PASSWORD_VAR, Rentals


@pytest.fixture(scope="module")
def facts_run(rentals: Rentals):
    run = rentals.provision("facts", "rentals", "--json", "--forks", "8")
    rentals.timings["facts, all kinds"] = run.seconds
    return run


def test_facts_on_every_kind_match_what_each_host_says(rentals: Rentals, facts_run) -> None:
    run = facts_run
    assert run.returncode == 0, run.describe()
    hosts = run.doc["hosts"]
    assert sorted(hosts) == sorted(rentals.names)
    fleet = rentals.fleet
    for name, facts in hosts.items():
        traits = rentals.kinds_of(name)
        assert facts["hostname"] == name, (name, facts.get("error"))
        # the python the agent ran on: conda's when it is first on PATH or named by the inventory
        agent = facts["python"]["agent"]
        if "conda" in traits:
            _, version = truth.python3(fleet, name, CONDA_PYTHON)
            assert agent["executable"].startswith("/root/miniconda3/bin/python"), agent
        else:
            path, version = truth.python3(fleet, name)
            assert agent["executable"] == path, agent
        assert agent["version"] == version
        release = truth.os_release(fleet, name)
        assert (facts["os"]["id"], facts["os"]["version_id"]) == (release["ID"], release.get("VERSION_ID"))
        gpus = truth.nvidia_gpu_names(fleet, name)
        assert [g["name"] for g in facts["gpus"]] == gpus
        assert facts["cpu"]["logical_cpus"] >= truth.nproc(fleet, name) >= 1
        if rentals.fleet.host(name).user == "root":  # `ubuntu` can't write root's data disk
            assert facts["data_dir"]["path"] == "/root/autodl-tmp"
        # a login shell's banner never gets into the facts
        assert NOISE_OUT not in run.stdout and NOISE_ERR not in run.stdout


def test_bullseye_host_has_its_own_python_and_glibc(rentals: Rentals, facts_run) -> None:
    if rentals.bullseye_missing:
        pytest.skip(rentals.bullseye_missing)
    facts = facts_run.doc["hosts"]["gpu8"]
    assert facts["os"]["version_id"] == "11" and facts["os"]["id"] == "debian"
    assert facts["python"]["agent"]["version"].startswith("3.9.")
    libc = rentals.fleet.ns_exec("gpu8", "ldd --version | head -n1").stdout
    assert facts["os"]["libc"] == "glibc " + libc.split()[-1]


def test_conda_prefix_and_its_torch_are_facts(rentals: Rentals, facts_run) -> None:
    fleet = rentals.fleet
    for name in ("gpu3", "gpu5", "gpu6", "gpu7"):
        facts = facts_run.doc["hosts"][name]
        torch_version = fleet.ns_exec(
            name, f"{CONDA_PYTHON} -c 'import importlib.metadata as m; print(m.version(\"torch\"))'"
        ).stdout.strip()
        assert facts["torch"]["installed"] is True and facts["torch"]["version"] == torch_version
        conda = facts["python"]["conda"]
        assert conda["base"] == "/root/miniconda3", conda
        assert any(str(env.get("path", env.get("prefix", ""))).endswith("envs/bare") for env in conda["envs"]), conda
        # the system python3 beside it is another interpreter, as on AutoDL's images
        system = [p["path"] for p in facts["python"]["system_pythons"]]
        if "nopython" in rentals.kinds_of(name):
            assert system == []  # hidden: conda's python is the only one there
        else:
            assert any(p.startswith("/usr/") for p in system), system


def test_host_without_python3_says_how_to_point_at_one(rentals: Rentals) -> None:
    run = rentals.provision("facts", "gpu7-bare", "--json")
    assert run.returncode == 1, run.describe()
    error = run.doc["hosts"]["gpu7-bare"]["error"]
    assert "no Python interpreter 'python3'" in error and "ansible_python_interpreter" in error


def test_become_runs_the_agent_as_root_with_passwordless_sudo(rentals: Rentals) -> None:
    plain = rentals.provision("facts", "gpu4", "--json")
    became = rentals.provision("facts", "gpu4", "--json", "--become")
    assert plain.returncode == 0 and became.returncode == 0, (plain.describe(), became.describe())
    # the same machine; as root the agent reads it from root's side (its home is /root)
    assert plain.doc["hosts"]["gpu4"]["hostname"] == became.doc["hosts"]["gpu4"]["hostname"] == "gpu4"
    # `sudo: unable to resolve host gpu4` (the host's name is in no /etc/hosts) breaks nothing
    assert "unable to resolve host" in rentals.fleet.ns_exec("gpu4", "sudo -n true 2>&1 || true").stdout
    root_agent = rentals.fleet.ns_exec("gpu4", "ls /root/.cache/provision").stdout
    assert root_agent.startswith("agent-"), root_agent


def test_sudo_that_needs_a_password_gets_it_over_stdin_or_says_how(rentals: Rentals) -> None:
    password = rentals.fleet.host("gpu4").sudo_passwords[SUDO_PASSWORD_USER]
    # no password anywhere: the error names both ways to give one
    missing = rentals.provision("facts", "ops-nopw", "--json", "--become")
    assert missing.returncode == 1, missing.describe()
    error = missing.doc["hosts"]["ops-nopw"]["error"]
    assert "sudo on ops-nopw needs a password" in error
    assert "--become-password-env" in error and "ansible_become_password" in error
    # from the env var --become-password-env names
    by_env = rentals.provision("facts", "ops-nopw", "--json", "--become", "--become-password-env", SUDO_PASSWORD_VAR)
    assert by_env.returncode == 0, by_env.describe()
    assert by_env.doc["hosts"]["ops-nopw"]["hostname"] == "gpu4"
    # from the inventory (ansible_become_password); never echoed
    by_inventory = rentals.provision("facts", "ops", "--json", "--become")
    assert by_inventory.returncode == 0, by_inventory.describe()
    for run in (missing, by_env, by_inventory):
        assert password not in run.stdout + run.stderr
    # a wrong one: said so, with where it came from
    wrong = rentals.provision(
        "facts", "ops-nopw", "--json", "--become", "--become-password-env", "WRONG_PW",
        env=rentals.env(WRONG_PW="not-the-password"),
    )  # fmt: skip
    assert wrong.returncode == 1, wrong.describe()
    error = wrong.doc["hosts"]["ops-nopw"]["error"]
    assert "rejected the become password from env var WRONG_PW" in error
    assert "not-the-password" not in wrong.stdout + wrong.stderr
