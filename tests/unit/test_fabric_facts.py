"""Networking facts (provision/agent/facts/network.py) read from /sys and /proc trees laid out
as the kernel lays them out: a GPU server with an InfiniBand HCA (IPoIB ib0), a RoCE NIC, a
plain Ethernet port, docker0 and a container's veth."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provision.agent.facts import network

PCI = "devices/pci0000:00/0000:00:02.0"

ROUTE = """Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0132A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth0\t0032A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0
ib0\t0000100A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
ens1f0\t0001000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
"""

FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.0.0.0/11 2 0 2
        +-- 10.0.1.0/24 2 0 2
           |-- 10.0.1.0
              /24 link UNICAST
           |-- 10.0.1.7
              /32 host LOCAL
        +-- 10.16.0.0/16 2 0 2
           |-- 10.16.0.0
              /16 link UNICAST
           |-- 10.16.3.7
              /32 host LOCAL
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     |-- 172.17.0.1
        /32 host LOCAL
     +-- 192.168.50.0/24 2 0 2
        |-- 192.168.50.0
           /24 link UNICAST
        |-- 192.168.50.23
           /32 host LOCAL
        |-- 192.168.50.255
           /32 link BROADCAST
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 10.0.1.7
        /32 host LOCAL
"""

IF_INET6 = """00000000000000000000000000000001 01 80 10 80       lo
fe80000000000000021a2bfffe3c4d5e 03 40 20 80   ens1f0
20010db8000000000000000000000017 02 40 00 00     eth0
"""

IPV6_ROUTE = """20010db8000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _netdev(root: Path, name: str, *, arphrd: int, mtu: int, speed: int | None, pci: str | None,
            mac: str = "0c:42:a1:00:00:01", bridge: bool = False) -> None:
    """/sys/class/net/NAME -> ../../devices/.../net/NAME, as sysfs links it."""
    real = root / (f"{PCI}/{pci}/net/{name}" if pci else f"devices/virtual/net/{name}")
    for field, value in (("type", arphrd), ("mtu", mtu), ("operstate", "up"), ("address", mac)):
        _write(real / field, f"{value}\n")
    if speed is not None:
        _write(real / "speed", f"{speed}\n")
    if pci:
        os.symlink(root / PCI / pci, real / "device")
    if bridge:
        (real / "bridge").mkdir()
    link = root / "sys/class/net" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(real, link.parent), link)


def _rdma(root: Path, name: str, pci: str, *, link_layer: str, rate: str, state: str = "4: ACTIVE",
          ndev: str | None = None) -> None:
    real = root / PCI / pci / "infiniband" / name
    _write(real / "hca_type", "MT4123\n")
    _write(real / "fw_ver", "20.31.1014\n")
    _write(real / "node_guid", "0c42:a103:0016:0a2e\n")
    port = real / "ports/1"
    _write(port / "state", f"{state}\n")
    _write(port / "phys_state", "5: LinkUp\n")
    _write(port / "rate", f"{rate}\n")
    _write(port / "link_layer", f"{link_layer}\n")
    if ndev:
        _write(port / "gid_attrs/ndevs/0", f"{ndev}\n")
    os.symlink(root / PCI / pci, real / "device")
    link = root / "sys/class/infiniband" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(real, link.parent), link)


@pytest.fixture
def server(tmp_path: Path) -> Path:
    root = tmp_path
    _netdev(root, "lo", arphrd=772, mtu=65536, speed=None, pci=None, mac="00:00:00:00:00:00")
    _netdev(root, "eth0", arphrd=1, mtu=1500, speed=25000, pci="0000:19:00.0")
    _netdev(root, "ib0", arphrd=32, mtu=4092, speed=200000, pci="0000:3b:00.0")
    _netdev(root, "ens1f0", arphrd=1, mtu=9000, speed=100000, pci="0000:5e:00.0")
    _netdev(root, "docker0", arphrd=1, mtu=1500, speed=None, pci=None, bridge=True)
    _netdev(root, "veth1a2b3c", arphrd=1, mtu=1500, speed=10000, pci=None)
    _rdma(root, "mlx5_0", "0000:3b:00.0", link_layer="InfiniBand", rate="200 Gb/sec (4X HDR)")
    _rdma(root, "mlx5_1", "0000:5e:00.0", link_layer="Ethernet", rate="100 Gb/sec (2X HDR)", ndev="ens1f0")
    for rel, text in (("proc/net/route", ROUTE), ("proc/net/fib_trie", FIB_TRIE),
                      ("proc/net/if_inet6", IF_INET6), ("proc/net/ipv6_route", IPV6_ROUTE)):  # fmt: skip
        _write(root / rel, text)
    (root / "sys/module/nvidia_peermem").mkdir(parents=True)
    return root


def test_interfaces_kinds_addresses(server: Path) -> None:
    facts = network.gather(str(server), environ={"NCCL_DEBUG": "INFO", "HOME": "/root", "GLOO_SOCKET_IFNAME": "ib0"})
    by = {i["name"]: i for i in facts["interfaces"]}
    assert {n: i["kind"] for n, i in by.items()} == {
        "lo": "loopback", "eth0": "ethernet", "ib0": "infiniband", "ens1f0": "roce",
        "docker0": "docker", "veth1a2b3c": "veth",
    }  # fmt: skip
    assert by["ib0"]["ipv4"] == [{"address": "10.16.3.7", "prefix": 16}] and by["ib0"]["rdma_device"] == "mlx5_0"
    assert by["ens1f0"]["ipv4"] == [{"address": "10.0.1.7", "prefix": 24}] and by["ens1f0"]["rdma_device"] == "mlx5_1"
    assert by["eth0"]["ipv4"] == [{"address": "192.168.50.23", "prefix": 24}]
    assert by["docker0"]["ipv4"] == [{"address": "172.17.0.1", "prefix": 16}]
    assert by["lo"]["ipv4"] == [{"address": "127.0.0.1", "prefix": 8}]
    assert by["eth0"]["ipv6"] == [{"address": "2001:db8::17", "prefix": 64, "scope": "global"}]
    assert by["ens1f0"]["ipv6"] == [{"address": "fe80::21a:2bff:fe3c:4d5e", "prefix": 64, "scope": "link"}]
    assert (by["eth0"]["mtu"], by["eth0"]["speed_mbps"], by["eth0"]["virtual"]) == (1500, 25000, False)
    assert by["docker0"]["virtual"] and by["lo"]["virtual"] and by["docker0"]["speed_mbps"] is None
    assert facts["addresses_from"] == "proc"
    assert facts["default_routes"] == [
        {"family": "inet", "iface": "eth0", "destination": "0.0.0.0/0", "gateway": "192.168.50.1", "metric": 100,
         "default": True},
        {"family": "inet6", "iface": "eth0", "destination": "::/0", "gateway": "fe80::1", "metric": 1024,
         "default": True},
    ]  # fmt: skip
    assert facts["nccl_env"] == {"GLOO_SOCKET_IFNAME": "ib0", "NCCL_DEBUG": "INFO"}
    assert facts["gpudirect_rdma"] == {"nvidia_peermem": True, "nv_peer_mem": False, "nvidia_fs": False}


def test_rdma_devices_ports_and_netdevs(server: Path) -> None:
    devices = {d["name"]: d for d in network.gather(str(server), environ={})["ib_devices"]}
    [ib] = devices["mlx5_0"]["ports"]
    assert ib == {"port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "rate": "200 Gb/sec (4X HDR)",
                  "rate_gbps": 200.0, "link_layer": "InfiniBand", "netdev": "ib0"}  # fmt: skip
    [roce] = devices["mlx5_1"]["ports"]
    assert (roce["link_layer"], roce["netdev"], roce["rate_gbps"]) == ("Ethernet", "ens1f0", 100.0)
    assert devices["mlx5_0"]["fw_ver"] == "20.31.1014" and devices["mlx5_0"]["hca_type"] == "MT4123"


def test_an_empty_tree_gives_empty_facts(tmp_path: Path) -> None:
    facts = network.gather(str(tmp_path), environ={})
    assert facts["interfaces"] == [] and facts["ib_devices"] == [] and facts["default_routes"] == []


def test_ip_json_is_the_fallback_for_addresses_without_a_subnet_route() -> None:
    text = ('[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],"mtu":65536,"operstate":"UNKNOWN",'
            '"addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8,"scope":"host","label":"lo"}]},'
            '{"ifindex":4,"ifname":"eth0","mtu":1400,"operstate":"UP","addr_info":[{"family":"inet",'
            '"local":"192.0.2.2","prefixlen":24,"broadcast":"192.0.2.255","scope":"global","label":"eth0"},'
            '{"family":"inet","local":"203.0.113.9","prefixlen":32,"scope":"global","label":"eth0"}]}]')  # fmt: skip
    assert network.parse_ip_json(text) == {
        "lo": [{"address": "127.0.0.1", "prefix": 8}],
        "eth0": [{"address": "192.0.2.2", "prefix": 24}, {"address": "203.0.113.9", "prefix": 32}],
    }
    assert network.parse_ip_json("not json") is None
    unmatched = network.assign_ipv4(["203.0.113.9"], network.parse_route(ROUTE))
    assert unmatched == {None: [{"address": "203.0.113.9", "prefix": 32}]}


def test_this_hosts_own_facts_are_well_formed() -> None:
    """Shape only (the values are this machine's, which no test may assert)."""
    kinds = {"loopback", "infiniband", "tunnel", "ethernet", "roce", "docker", "bridge", "veth"}
    for entry in network.gather()["interfaces"]:
        assert entry["name"] and entry["kind"] in kinds
        assert all(0 <= a["prefix"] <= 32 for a in entry["ipv4"])


def test_provision_facts_shows_the_network(server: Path) -> None:
    from rich.console import Console

    from provision.cli.facts import facts_table

    console = Console(record=True, width=200)
    console.print(facts_table("gpu1", {"network": network.gather(str(server), environ={"NCCL_DEBUG": "INFO"})}))
    text = console.export_text()
    assert "Net ib0" in text and "10.16.3.7/16 · infiniband · 200 Gb/s · MTU 4092" in text
    assert "192.168.50.23/24, 2001:db8::17/64 · ethernet · 25 Gb/s · MTU 1500 · default route" in text
    assert "RDMA mlx5_1/1" in text and "ACTIVE · 100 Gb/sec (2X HDR) · Ethernet → ens1f0" in text
    assert "nvidia_peermem loaded" in text and "NCCL_DEBUG=INFO" in text
    assert "Net lo" not in text and "Net veth1a2b3c" not in text  # loopback, and no address
