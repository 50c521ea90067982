"""Where multi-host ranks meet (issue 13 part A), on real fleet hosts with a second network.

Hosts `backnet` have eth1 on a back network the controller has no address on; with `gateway`
their SSH address is a shared port-forwarding gateway and the back network is all they have,
so the SSH address can't carry rank traffic. Facts, the choice, the TCP probes (host to host,
through each host's agent) and the overrides are all real.
"""

from __future__ import annotations

import re

import pytest
from polling import wait_until

from provision.connection.ssh import SSHConnection
from provision.distributed.fabric import choose_fabric, select_fabric
from provision.errors import ConfigError
from provision.remote.agent import Agent
from provision.remote.facts import gather_facts


def _open(fleet, ssh_options, opened):
    agents, facts = {}, {}
    for h in fleet.hosts:
        conn = SSHConnection(h.as_host(), ssh_options)
        opened.append(conn)
        agents[h.name] = Agent(conn)
        facts[h.name] = gather_facts(agents[h.name])
    return agents, facts


@pytest.fixture
def three_backnet(make_fleet, ssh_options):
    """3 hosts: eth0 on the fleet bridge (their SSH address), eth1 on the back network."""
    fleet = make_fleet(3, kinds="backnet")
    opened: list[SSHConnection] = []
    agents, facts = _open(fleet, ssh_options, opened)
    yield fleet, agents, facts
    for conn in opened:
        conn.close()


def test_network_facts_of_a_real_host(three_backnet) -> None:
    fleet, _, facts = three_backnet
    for h in fleet.hosts:
        net = facts[h.name]["network"]
        by_name = {i["name"]: i for i in net["interfaces"]}
        assert by_name["lo"]["kind"] == "loopback"
        assert {"address": h.address, "prefix": 24} in by_name["eth0"]["ipv4"]
        assert {"address": h.back_address, "prefix": 24} in by_name["eth1"]["ipv4"]
        assert by_name["eth1"]["mtu"] == 9000 and by_name["eth1"]["kind"] == "ethernet"
        assert [r["iface"] for r in net["default_routes"] if r["family"] == "inet"] == ["eth0"]
        assert net["addresses_from"] == "proc" and net["ib_devices"] == []


def test_backnet_is_chosen_and_probed(three_backnet) -> None:
    fleet, agents, facts = three_backnet
    fabric = select_fabric(agents, facts, timeout_s=3)
    gpu1 = fleet.host("gpu1")
    assert fabric.master_host == "gpu1" and fabric.master_addr == gpu1.back_address
    assert fabric.ifaces == {"gpu1": "eth1", "gpu2": "eth1", "gpu3": "eth1"}
    assert fabric.hosts == ["gpu1", "gpu2", "gpu3"] and fabric.kind == "ethernet" and not fabric.ib
    assert fabric.addrs == {h.name: h.back_address for h in fleet.hosts}
    assert [(p["from"], p["ok"]) for p in fabric.probes] == [("gpu2", True), ("gpu3", True)]
    assert {p["source"] for p in fabric.probes} == {fleet.host("gpu2").back_address, fleet.host("gpu3").back_address}
    assert {p["port"] for p in fabric.probes} == {fabric.master_port}  # the port really probed
    env = fabric.env("gpu2")
    assert env == {"MASTER_ADDR": gpu1.back_address, "MASTER_PORT": str(fabric.master_port),
                   "NCCL_SOCKET_IFNAME": "eth1", "GLOO_SOCKET_IFNAME": "eth1", "NCCL_IB_DISABLE": "1"}
    assert f"{fleet.back_subnet}.0/24" in fabric.reason


def test_overrides_iface_and_master(three_backnet) -> None:
    fleet, agents, facts = three_backnet
    front = select_fabric(agents, facts, iface="eth0", timeout_s=3)
    assert front.master_addr == fleet.host("gpu1").address and set(front.ifaces.values()) == {"eth0"}
    moved = select_fabric(agents, facts, master="gpu2:29123", timeout_s=3)
    assert (moved.master_host, moved.master_addr, moved.master_port) == ("gpu2", fleet.host("gpu2").back_address, 29123)
    assert moved.hosts == ["gpu2", "gpu1", "gpu3"] and moved.rank("gpu2") == 0
    by_addr = select_fabric(agents, facts, master=fleet.host("gpu3").address, timeout_s=3)
    assert (by_addr.master_host, by_addr.master_addr) == ("gpu3", fleet.host("gpu3").address)
    with pytest.raises(ConfigError, match=r"gpu1 has no interface 'eth9' \(it has: .*eth0.*eth1"):
        select_fabric(agents, facts, iface="eth9")
    with pytest.raises(ConfigError, match="'gpu9' is neither one of the hosts"):
        select_fabric(agents, facts, master="gpu9")
    with pytest.raises(ConfigError, match="port '99999' is not a number in 1..65535"):
        select_fabric(agents, facts, master="gpu1:99999")


def test_an_unreachable_network_falls_back_with_the_reason(three_backnet) -> None:
    fleet, agents, facts = three_backnet
    master_back = fleet.host("gpu1").back_address
    # gpu3 loses its way to the master on the back network (facts still show the subnet)
    fleet.ns_exec("gpu3", ["ip", "route", "add", "unreachable", f"{master_back}/32"])
    ranked = choose_fabric(facts)
    assert [c.ifaces["gpu3"] for c in ranked[:2]] == ["eth1", "eth0"]
    fabric = select_fabric(agents, facts, timeout_s=3)
    assert fabric.master_addr == fleet.host("gpu1").address and fabric.ifaces["gpu3"] == "eth0"
    assert f"Fell back from {master_back}" in fabric.reason and "gpu3 -> " in fabric.reason
    failed = [p for p in fabric.probes if not p["ok"]]
    assert [(p["from"], p["addr"]) for p in failed] == [("gpu3", master_back)]
    # nothing reaches anything: a clear error naming hosts and addresses
    fleet.ns_exec("gpu3", ["ip", "route", "add", "unreachable", f"{fleet.host('gpu1').address}/32"])
    with pytest.raises(ConfigError, match=r"could not reach each other on any network: .*gpu3 -> "):
        select_fabric(agents, facts, timeout_s=3)


def test_a_port_in_use_on_the_master_is_reported(three_backnet) -> None:
    fleet, agents, facts = three_backnet
    holder = fleet.ns_exec("gpu1", ["sh", "-c", "python3 -c 'import socket,time; s=socket.socket(); "
                                    "s.bind((\"0.0.0.0\", 29777)); s.listen(); time.sleep(30)' >/dev/null 2>&1 & echo $!"])
    try:
        # the holder is a background python: listening only once it has started (a fast check
        # could otherwise ask before the port is taken)
        wait_until("the holder listening on 29777", lambda: ":29777 " in fleet.ns_exec(
            "gpu1", ["ss", "-Hltn", "sport = :29777"], check=False).stdout + " ", timeout=20)
        with pytest.raises(ConfigError, match="port 29777 is not free"):
            select_fabric(agents, facts, master="gpu1:29777", timeout_s=3)
    finally:
        fleet.ns_exec("gpu1", ["kill", holder.stdout.strip()], check=False)


def test_provision_facts_shows_both_networks(make_fleet, tmp_path, ssh_config_file) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    fleet = make_fleet(1, kinds="backnet")
    inventory = fleet.write_inventory(tmp_path / "inventory.ini")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]), COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "provision", "facts", "gpu1", "-i", str(inventory),
                           "--ssh-config", str(ssh_config_file), "--known-hosts", "accept-new"],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    host = fleet.hosts[0]
    assert f"{host.address}/24 · ethernet" in out and "default route" in out
    # a veth's speed is whatever the kernel reports for it (10 Gb/s on recent ones), if anything
    assert re.search(rf"Net eth1[^\n]*? {re.escape(host.back_address)}/24 · ethernet( · [\d.]+ Gb/s)? · MTU 9000", out), out
