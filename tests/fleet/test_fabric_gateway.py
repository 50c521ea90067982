"""Gateway-style rentals (issue 13): the SSH address is one shared gateway address with a port
per host, forwarded to each host's sshd; the hosts' only network is the back network. The
fabric must be that network, and the bench's all-reduce (gloo, this machine's CPU torch through
the `conda` kind) must meet on it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from provision.connection.ssh import SSHConnection
from provision.distributed.fabric import select_fabric
from provision.remote.agent import Agent
from provision.remote.facts import gather_facts

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def gateway_pair(make_fleet):
    return make_fleet(2, kinds=[{"gateway", "backnet", "conda"}] * 2)


def test_gateway_hosts_meet_on_the_back_network(gateway_pair, ssh_options) -> None:
    fleet = gateway_pair
    gpu1, gpu2 = fleet.hosts
    assert gpu1.address == gpu2.address and gpu1.port != gpu2.port  # one gateway, a port each
    conns = [SSHConnection(h.as_host(), ssh_options) for h in fleet.hosts]
    try:
        agents = {c.host.name: Agent(c) for c in conns}
        facts = {name: gather_facts(a) for name, a in agents.items()}
        addresses = {a["address"] for i in facts["gpu1"]["network"]["interfaces"] for a in i["ipv4"]}
        assert gpu1.address not in addresses  # the SSH address is on no interface of the host
        fabric = select_fabric(agents, facts, timeout_s=3)
    finally:
        for c in conns:
            c.close()
    assert (fabric.master_host, fabric.master_addr) == ("gpu1", gpu1.back_address)
    assert fabric.ifaces == {"gpu1": "eth1", "gpu2": "eth1"}
    [probe] = fabric.probes
    assert probe["ok"] and probe["from"] == "gpu2" and probe["source"] == gpu2.back_address


def _bench(fleet, tmp_path: Path, ssh_config_file: Path, *extra: str) -> subprocess.CompletedProcess:
    inventory = fleet.write_inventory(tmp_path / "inventory.ini")
    cmd = [sys.executable, "-m", "provision", "bench", "gpu1", "gpu2", "-i", str(inventory),
           "--ssh-config", str(ssh_config_file), "--known-hosts", "accept-new", "--quick",
           "--sections", "distributed", "--out", str(tmp_path / "reports"), "--json", *extra]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)


def test_bench_allreduce_meets_on_the_back_network(gateway_pair, tmp_path, ssh_config_file) -> None:
    fleet = gateway_pair
    proc = _bench(fleet, tmp_path, ssh_config_file, "--allreduce")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "all-reduce fabric: " in proc.stderr
    doc = json.loads(proc.stdout)
    hosts = doc["hosts"]
    assert doc["fabric"]["master_addr"] == fleet.host("gpu1").back_address and doc["fabric"]["probes"][0]["ok"]
    ranks = []
    for h in fleet.hosts:
        multi = hosts[h.name]["bench"]["distributed"]["multi_host"]
        assert multi["status"] == "ok", multi
        assert multi["backend"] == "gloo" and multi["world_size"] == 2 and multi["busbw_gbs"] > 0
        master_addr, _, port = multi["master"].partition(":")
        assert master_addr == fleet.host("gpu1").back_address and port.isdigit()
        assert multi["interface"] == "eth1" and multi["local_ip"] == h.back_address
        assert multi["fabric_env"]["GLOO_SOCKET_IFNAME"] == "eth1"
        ranks.append(multi["rank"])
    assert sorted(ranks) == [0, 1]


def test_bench_overrides_are_checked_before_anything_runs(gateway_pair, tmp_path, ssh_config_file) -> None:
    bad_iface = _bench(gateway_pair, tmp_path, ssh_config_file, "--allreduce", "--iface", "eth0")
    assert bad_iface.returncode == 2, bad_iface.stderr[-3000:]
    assert "--iface eth0: gpu1 has no interface 'eth0' (it has: eth1, lo)" in bad_iface.stderr
    bad_port = _bench(gateway_pair, tmp_path, ssh_config_file, "--allreduce", "--master", "gpu2:http")
    assert bad_port.returncode == 2 and "port 'http' is not a number in 1..65535" in bad_port.stderr
    alone = _bench(gateway_pair, tmp_path, ssh_config_file, "--iface", "eth1")
    assert alone.returncode == 2 and "add --allreduce" in alone.stderr
