"""Choosing where multi-host ranks meet (provision/distributed/fabric.py): the pure ranking
from network facts, the overrides and their errors, and select_fabric's real TCP probes
between agents on this machine's loopback."""

from __future__ import annotations

import socket

import pytest

from provision.connection.local import LocalConnection
from provision.distributed.fabric import Fabric, choose_fabric, parse_master, select_fabric, survey
from provision.errors import ConfigError
from provision.inventory.model import Host
from provision.remote.agent import Agent


def iface(name: str, cidr: str | None, kind: str = "ethernet", *, mtu: int = 1500, speed: int | None = None,
          state: str = "up") -> dict:
    addr, _, prefix = (cidr or "").partition("/")
    return {"name": name, "kind": kind, "virtual": False, "operstate": state, "mtu": mtu, "speed_mbps": speed,
            "ipv4": [{"address": addr, "prefix": int(prefix)}] if cidr else [], "ipv6": []}  # fmt: skip


def host(*ifaces: dict, default: str | None = None, ib: bool = False) -> dict:
    ports = [{"port": 1, "state": "ACTIVE", "link_layer": "InfiniBand", "netdev": "ib0"}] if ib else []
    return {"network": {
        "interfaces": [iface("lo", "127.0.0.1/8", "loopback"), *ifaces],
        "default_routes": [{"family": "inet", "iface": default, "gateway": "x", "default": True}] if default else [],
        "ib_devices": [{"name": "mlx5_0", "ports": ports}] if ib else [],
    }}  # fmt: skip


def docker(n: int) -> dict:
    return iface("docker0", "172.17.0.1/16", "docker")  # the same on every host: a classic trap


def test_infiniband_beats_ethernet_and_docker_is_skipped() -> None:
    facts = {
        f"gpu{n}": host(iface("eth0", f"10.1.0.{n}/24", speed=25000), iface("ib0", f"10.16.0.{n}/16", "infiniband"),
                        docker(n), ib=True)
        for n in (1, 2, 3)
    }  # fmt: skip
    ranked, skipped = survey(facts)
    assert [(c.kind, c.master_addr) for c in ranked] == [("infiniband", "10.16.0.1"), ("ethernet", "10.1.0.1")]
    assert ranked[0].ifaces == {"gpu1": "ib0", "gpu2": "ib0", "gpu3": "ib0"} and ranked[0].ib
    assert any("172.17.0.0/16 (docker0): docker interface" in s for s in skipped)
    assert any("loopback" in s for s in skipped)


def test_roce_then_private_then_public() -> None:
    facts = {
        f"h{n}": host(iface("eth0", f"203.0.113.{n}/24", speed=100000, mtu=9000), iface("eth1", f"192.168.7.{n}/24"),
                      iface("ens1f0", f"10.9.0.{n}/24", "roce"))
        for n in (1, 2)
    }  # fmt: skip
    assert [(c.kind, c.private, c.ifaces["h2"]) for c in choose_fabric(facts)] == [
        ("roce", True, "ens1f0"), ("ethernet", True, "eth1"), ("ethernet", False, "eth0")]
    assert not choose_fabric(facts)[0].ib  # RoCE netdev facts alone: no active RDMA port was seen


def test_test_fleet_range_counts_as_private_and_mtu_breaks_ties() -> None:
    facts = {f"h{n}": host(iface("eth0", f"198.19.4.{n}/24"), iface("eth1", f"198.18.9.{n}/24", mtu=9000))
             for n in (2, 3)}  # fmt: skip
    ranked = choose_fabric(facts)
    assert [(c.ifaces["h2"], c.private) for c in ranked] == [("eth1", True), ("eth0", True)]


def test_a_subnet_one_host_lacks_is_skipped_and_link_local_or_down_too() -> None:
    facts = {
        "a": host(iface("eth0", "10.0.0.1/24"), iface("eth1", "10.5.0.1/24"), iface("eth2", "169.254.3.1/16"),
                  iface("eth3", "10.7.0.1/24", state="down")),
        "b": host(iface("eth0", "10.0.0.2/24"), iface("eth2", "169.254.3.2/16"), iface("eth3", "10.7.0.2/24")),
    }  # fmt: skip
    ranked, skipped = survey(facts)
    assert [c.network for c in ranked] == ["10.0.0.0/24"]
    assert "10.5.0.0/24 (eth1): not on b" in skipped
    assert "169.254.0.0/16 (eth2): link-local" in skipped
    assert "10.7.0.0/24 (eth3): interface down" in skipped


def test_one_host_meets_on_loopback() -> None:
    [cand] = choose_fabric({"solo": host(docker(1))})
    assert (cand.kind, cand.master_addr, cand.ifaces) == ("loopback", "127.0.0.1", {"solo": "lo"})


def test_no_shared_subnet_falls_back_to_default_routes() -> None:
    facts = {"a": host(iface("eth0", "203.0.113.5/24"), default="eth0"),
             "b": host(iface("eth0", "198.51.100.9/24"), default="eth0")}  # fmt: skip
    [cand] = choose_fabric(facts)
    assert (cand.kind, cand.master_addr, cand.addrs) == ("routed", "203.0.113.5",
                                                         {"a": "203.0.113.5", "b": "198.51.100.9"})


def test_master_by_name_or_address_and_its_errors() -> None:
    facts = {f"gpu{n}": host(iface("eth0", f"10.0.0.{n}/24"), iface("eth1", f"10.1.0.{n}/24", mtu=9000))
             for n in (1, 2, 3)}  # fmt: skip
    assert {c.master_host for c in choose_fabric(facts, master="gpu2")} == {"gpu2"}
    assert {c.master_host for c in choose_fabric(facts, master="gpu3:29500")} == {"gpu3"}
    [by_addr] = [c for c in choose_fabric(facts, master="10.0.0.3") if c.kind != "routed"]
    assert (by_addr.master_host, by_addr.master_addr) == ("gpu3", "10.0.0.3")
    with pytest.raises(ConfigError, match=r"--master 'gpu7' is neither one of the hosts \(gpu1, gpu2, gpu3\)"):
        choose_fabric(facts, master="gpu7")


def test_iface_override_and_its_errors() -> None:
    facts = {f"gpu{n}": host(iface("eth0", f"10.0.0.{n}/24"), iface("eth1", f"10.1.0.{n}/24", mtu=9000),
                             iface("eth9", None))
             for n in (1, 2)}  # fmt: skip
    [cand] = [c for c in choose_fabric(facts, iface="eth0")]
    assert cand.ifaces == {"gpu1": "eth0", "gpu2": "eth0"} and cand.master_addr == "10.0.0.1"
    with pytest.raises(ConfigError, match=r"--iface ib0: gpu1 has no interface 'ib0' \(it has: lo, eth0, eth1, eth9\)"):
        choose_fabric(facts, iface="ib0")
    with pytest.raises(ConfigError, match="--iface eth9: gpu1's eth9 has no IPv4 address"):
        choose_fabric(facts, iface="eth9")


def test_missing_network_facts_name_the_host() -> None:
    with pytest.raises(ConfigError, match=r"gpu2: no network facts \(missing\); gather them with `provision facts gpu2`"):
        choose_fabric({"gpu1": host(iface("eth0", "10.0.0.1/24")), "gpu2": {"hostname": "x"}})


@pytest.mark.parametrize("text,expected", [
    ("gpu1", ("gpu1", None)), ("gpu1:29500", ("gpu1", 29500)), ("10.0.0.1:1", ("10.0.0.1", 1)),
    ("[fd00::1]:29400", ("fd00::1", 29400)), ("[fd00::1]", ("fd00::1", None)), ("fd00::1", ("fd00::1", None)),
])  # fmt: skip
def test_parse_master(text: str, expected: tuple) -> None:
    assert parse_master(text) == expected


@pytest.mark.parametrize("text,message", [
    ("", "empty value"), ("gpu1:x", "port 'x' is not a number"), ("gpu1:0", "port '0' is not a number"),
    ("gpu1:65536", "in 1..65535"), ("[fd00::1", "'\\[' without '\\]'"), (":29500", "no host before the port"),
])  # fmt: skip
def test_parse_master_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_master(text)


def test_fabric_env_and_json() -> None:
    fabric = Fabric(master_host="a", master_addr="10.0.0.1", master_port=29501, ifaces={"a": "ib0", "b": "ib0"},
                    kind="infiniband", ib=True, reason="r", hosts=["a", "b"])  # fmt: skip
    assert fabric.env("b") == {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29501", "NCCL_SOCKET_IFNAME": "ib0",
                               "GLOO_SOCKET_IFNAME": "ib0"}  # fmt: skip
    no_ib = Fabric(**{**fabric.to_json(), "ib": False})
    assert no_ib.env("a")["NCCL_IB_DISABLE"] == "1" and no_ib.rank("b") == 1
    assert fabric.to_json()["probes"] == [] and fabric.to_json()["ifaces"] == {"a": "ib0", "b": "ib0"}
    with pytest.raises(ConfigError, match="c is not one of this fabric's hosts"):
        fabric.env("c")


# -- select_fabric: real agents (local), real sockets on loopback ---------------------------------


def _local_agents(*names: str) -> dict[str, Agent]:
    return {n: Agent(LocalConnection(Host(name=n, local=True))) for n in names}


def _loopback_facts(*names: str) -> dict[str, dict]:
    return {n: host() for n in names}


def test_select_fabric_probes_every_host() -> None:
    agents = _local_agents("a", "b", "c")
    fabric = select_fabric(agents, _loopback_facts("a", "b", "c"), iface="lo", timeout_s=2)
    assert (fabric.master_host, fabric.master_addr, fabric.kind) == ("a", "127.0.0.1", "loopback")
    assert [(p["from"], p["to"], p["ok"]) for p in fabric.probes] == [("b", "a", True), ("c", "a", True)]
    assert all(p["port"] == fabric.master_port and p["ms"] is not None for p in fabric.probes)
    assert "127.0.0.1 on 127.0.0.0/8" in fabric.reason


def test_select_fabric_fixed_port_and_a_port_in_use() -> None:
    agents = _local_agents("a", "b")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    fabric = select_fabric(agents, _loopback_facts("a", "b"), master=f"b:{free}", iface="lo", timeout_s=2)
    assert (fabric.master_host, fabric.master_port, fabric.hosts) == ("b", free, ["b", "a"])
    assert fabric.addrs == {"b": "127.0.0.1", "a": "127.0.0.1"} and fabric.network == "127.0.0.0/8"
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"--master a:{port}: a could not listen: .*port {port} is not free on"):
            select_fabric(agents, _loopback_facts("a", "b"), master=f"a:{port}", iface="lo", timeout_s=2)


def test_select_fabric_needs_an_agent_per_host() -> None:
    with pytest.raises(ConfigError, match="no agent for host"):
        select_fabric(_local_agents("a"), _loopback_facts("a", "b"))


def test_select_fabric_asks_for_network_facts_it_was_not_given() -> None:
    agents = _local_agents("a", "b")
    fabric = select_fabric(agents, {"a": {"hostname": "x"}, "b": {}}, iface="lo", timeout_s=2)
    assert fabric.ifaces == {"a": "lo", "b": "lo"} and all(p["ok"] for p in fabric.probes)


def test_a_host_environment_naming_another_interface_is_noted() -> None:
    facts = _loopback_facts("a", "b")
    facts["b"]["network"]["nccl_env"] = {"NCCL_SOCKET_IFNAME": "eth7"}
    fabric = select_fabric(_local_agents("a", "b"), facts, iface="lo", timeout_s=2)
    assert fabric.reason.endswith("Note: b sets NCCL_SOCKET_IFNAME=eth7 in its environment; the fabric's "
                                  "interface is used instead.")
    assert fabric.env("b")["NCCL_SOCKET_IFNAME"] == "lo"
