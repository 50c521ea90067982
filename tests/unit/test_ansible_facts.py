"""`ansible_facts` and the `ansible_*` names as Ansible's `setup` gives them: the same host
(the controller, connection local) asked by `ansible -m setup` and by provision's fact gathering;
every key provision claims must be one setup returns, with the same type, and the values that
don't move between two calls must be equal. Nothing here asserts what this machine is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from provision.engine.runner import run_playbook
from provision.inventory.model import Host
from provision.modules.facts_ansible import namespaced, parse_probe

ANSIBLE = shutil.which("ansible") or str(Path(sys.executable).parent / "ansible")

# keys whose value is the same in two calls a moment apart on one host
STABLE = (
    "os_family",
    "distribution",
    "distribution_version",
    "distribution_major_version",
    "distribution_release",
    "architecture",
    "machine",
    "system",
    "kernel",
    "kernel_version",
    "hostname",
    "nodename",
    "domain",
    "user_id",
    "user_uid",
    "user_gid",
    "user_dir",
    "user_shell",
    "user_gecos",
    "effective_user_id",
    "real_user_id",
    "pkg_mgr",
    "service_mgr",
    "processor_vcpus",
    "processor_count",
    "processor_cores",
    "processor_nproc",
    "processor_threads_per_core",
    "processor",
    "memtotal_mb",
    "swaptotal_mb",
    "python_version",
    "python",
    "selinux",
    "apparmor",
    "lsb",
    "machine_id",
    "fips",
    "userspace_bits",
    "userspace_architecture",
    "dns",
    "default_ipv4",
)  # all_ipv4_addresses / interfaces: other tests' fleets add and remove bridges meanwhile
# keys roles read that provision must have whenever setup has them
REQUIRED = {
    "os_family",
    "distribution",
    "distribution_version",
    "distribution_major_version",
    "architecture",
    "python",
    "python_version",
    "processor",
    "processor_count",
    "processor_cores",
    "processor_vcpus",
    "memtotal_mb",
    "env",
    "user_id",
    "user_dir",
    "user_uid",
    "hostname",
    "fqdn",
    "nodename",
    "default_ipv4",
    "interfaces",
    "mounts",
    "pkg_mgr",
    "service_mgr",
    "selinux",
    "system",
    "kernel",
    "lsb",
    "date_time",
    "distribution_release",
}


def _ansible_setup(tmp_path: Path) -> dict[str, Any]:
    env = dict(
        os.environ,
        ANSIBLE_LOCAL_TEMP=str(tmp_path / ".ansible-tmp"),
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_STDOUT_CALLBACK="minimal",
    )
    proc = subprocess.run(
        [ANSIBLE, "localhost", "-i", "localhost,", "-c", "local", "-m", "setup"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    head, sep, body = proc.stdout.partition("=>")  # "localhost | SUCCESS => {...}"
    assert sep and "SUCCESS" in head, proc.stdout[-2000:] + proc.stderr[-2000:]
    facts = json.loads(body)["ansible_facts"]
    return {k.removeprefix("ansible_"): v for k, v in facts.items()}


def _ours(tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "facts.json"
    pb = tmp_path / "facts.yml"
    pb.write_text(
        "- hosts: all\n  tasks:\n"
        f"    - copy: {{dest: {out}, content: '{{{{ ansible_facts | to_json }}}}'}}\n"
        "    - assert:\n        that:\n"
        "          - ansible_facts.os_family == ansible_os_family\n"
        "          - ansible_facts['python']['version']['major'] == ansible_python.version.major\n"
        "          - hostvars[inventory_hostname].ansible_facts.hostname == ansible_hostname\n"
    )
    result = run_playbook(pb, hosts=[Host("localhost", local=True)])
    assert result.exit_code() == 0, [r.msg for r in result.results if r.status == "failed"]
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.skipif(not os.access(ANSIBLE, os.X_OK), reason="ansible-core not installed")
def test_facts_match_ansible_setup_on_the_same_host(tmp_path: Path) -> None:
    theirs = _ansible_setup(tmp_path)
    ours = _ours(tmp_path)
    missing = sorted(k for k in REQUIRED if k in theirs and k not in ours)
    assert not missing, f"setup has these, provision doesn't: {missing}"
    ours_only = {
        "provision_facts",
        "provision_user",
        "provision_data_dir",
    }
    extra = sorted(
        k for k in ours if k not in theirs and k not in ours_only and not isinstance(ours[k], dict)
    )  # per-interface dicts may differ: interfaces come and go (other tests' namespaces)
    assert not extra, f"provision claims keys setup doesn't have: {extra}"
    for key in sorted(set(ours) & set(theirs)):
        assert type(ours[key]) is type(theirs[key]), (key, ours[key], theirs[key])
    for key in STABLE:
        if key in theirs:
            assert ours.get(key) == theirs[key], (key, ours.get(key), theirs[key])
    assert set(ours["interfaces"]) & set(theirs["interfaces"])
    assert {m["mount"] for m in ours["mounts"]} <= {m["mount"] for m in theirs["mounts"]}
    for name in ("HOME", "PATH", "USER"):
        if name in theirs["env"]:
            assert name in ours["env"]
    assert set(ours["date_time"]) <= set(theirs["date_time"])


def test_namespace_strips_the_prefix_and_keeps_module_fact_names() -> None:
    facts = {"ansible_os_family": "Debian", "mount_points": {"/": {}}, "ansible_facts": {"x": 1}}
    assert namespaced(facts) == {"os_family": "Debian", "mount_points": {"/": {}}}


def test_probe_values_are_data() -> None:
    text = 'user=$(id)\ncodename="bookworm"\nns=1.1.1.1\nns=8.8.8.8\nnoequals\nuser=second\n'
    info = parse_probe(text)
    assert info["user"] == "$(id)" and info["codename"] == "bookworm"
    assert info["ns"] == ["1.1.1.1", "8.8.8.8"]
