"""Networking facts: interfaces (addresses, MTU, speed, kind), default routes, InfiniBand/RoCE
devices, and what NCCL/gloo will see (NCCL_*/GLOO_* already set, GPUDirect RDMA modules).

Everything comes from /sys and /proc, so a call costs file reads and no subprocess: IPv4
addresses from /proc/net/fib_trie (the kernel's LOCAL entries) matched to interfaces by the
subnet routes in /proc/net/route, IPv6 from /proc/net/if_inet6. Only when an IPv4 address
can't be matched to an interface that way (an address without a subnet route) is
`ip -j addr` asked, bounded; docs/facts.md says which source was used ("addresses_from").

Kinds: loopback, infiniband (IPoIB), roce (an Ethernet netdev of an RDMA device whose port's
link layer is Ethernet), docker (docker0, br-*, cni*, podman*, virbr*, ...), bridge, veth,
tunnel (tun/wireguard/ipip/gre/sit), ethernet. `virtual` is true for interfaces with no device
behind them (a container's eth0 is a virtual ethernet: still a real path to other hosts).
"""

from __future__ import annotations

import os

from provision.agent.facts._util import list_dir, read_text, run, which

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

ARPHRD_KINDS = {"772": "loopback", "32": "infiniband", "65534": "tunnel", "768": "tunnel",
                "769": "tunnel", "776": "tunnel", "778": "tunnel", "823": "tunnel"}  # fmt: skip
DOCKER_PREFIXES = ("docker", "br-", "cni", "podman", "virbr", "flannel", "cali", "weave", "kube-", "lxc")
GPUDIRECT_MODULES = ("nvidia_peermem", "nv_peer_mem", "nvidia_fs")
ENV_PREFIXES = ("NCCL_", "GLOO_", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES", "MASTER_ADDR", "MASTER_PORT")
IP_TIMEOUT_S = 3.0
MAX_INTERFACES = 256


def gather(root: str = "/", environ: Optional[Dict[str, str]] = None, use_ip: Optional[bool] = None) -> Dict[str, Any]:
    """`root`: where /sys and /proc are (a test tree); `use_ip`: may `ip -j addr` be asked (by
    default only on the real root)."""
    if use_ip is None:
        use_ip = root == "/"
    sys_net = os.path.join(root, "sys/class/net")
    ib_devices = infiniband_devices(root)
    netdev_ib = {}  # netdev -> (rdma device, link layer)
    for dev in ib_devices:
        for port in dev["ports"]:
            if port.get("netdev"):
                netdev_ib[port["netdev"]] = (dev["name"], port.get("link_layer"))
    routes_v4 = parse_route(read_text(os.path.join(root, "proc/net/route")) or "")
    v4 = assign_ipv4(parse_fib_trie(read_text(os.path.join(root, "proc/net/fib_trie")) or ""), routes_v4)
    addresses_from = "proc"
    if use_ip and (None in v4 or not v4):
        from_ip = ip_addresses(IP_TIMEOUT_S)
        if from_ip is not None:
            v4, addresses_from = from_ip, "ip"
    v4.pop(None, None)
    v6 = parse_if_inet6(read_text(os.path.join(root, "proc/net/if_inet6")) or "")
    interfaces = []
    for path in list_dir(sys_net)[:MAX_INTERFACES]:
        name = os.path.basename(path)
        interfaces.append(_interface(path, name, netdev_ib.get(name), v4.get(name, []), v6.get(name, [])))
    routes_v6 = parse_ipv6_route(read_text(os.path.join(root, "proc/net/ipv6_route")) or "")
    env = os.environ if environ is None else environ
    return {
        "interfaces": interfaces,
        "default_routes": [r for r in routes_v4 + routes_v6 if r["default"]],
        "ib_devices": ib_devices,
        "nccl_env": {k: env[k] for k in sorted(env) if k.startswith(ENV_PREFIXES)},
        "gpudirect_rdma": {m: os.path.isdir(os.path.join(root, "sys/module", m)) for m in GPUDIRECT_MODULES},
        "addresses_from": addresses_from,
    }


def _int(text: Optional[str]) -> Optional[int]:
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def _interface(path: str, name: str, rdma: Optional[Tuple[str, Any]], v4: List[Dict[str, Any]],
               v6: List[Dict[str, Any]]) -> Dict[str, Any]:
    arphrd = (read_text(os.path.join(path, "type")) or "").strip()
    try:  # /sys/class/net/NAME links to ../../devices/(virtual|pci...)/.../net/NAME
        target = os.readlink(path)
    except OSError:
        target = ""
    virtual = "/virtual/" in target or not os.path.exists(os.path.join(path, "device"))
    kind = ARPHRD_KINDS.get(arphrd)
    if kind is None:
        if os.path.isdir(os.path.join(path, "bridge")):
            kind = "docker" if name.startswith(DOCKER_PREFIXES) else "bridge"
        elif name.startswith(DOCKER_PREFIXES):
            kind = "docker"
        elif name.startswith("veth"):
            kind = "veth"
        elif os.path.exists(os.path.join(path, "tun_flags")) or name.startswith(("tun", "tap", "wg")):
            kind = "tunnel"
        elif rdma is not None and str(rdma[1]).lower() == "ethernet":
            kind = "roce"
        else:
            kind = "ethernet"
    speed = _int(read_text(os.path.join(path, "speed")))  # EINVAL (None) when down or virtual
    entry = {
        "name": name,
        "kind": kind,
        "virtual": virtual,
        "operstate": (read_text(os.path.join(path, "operstate")) or "unknown").strip(),
        "mtu": _int(read_text(os.path.join(path, "mtu"))),
        "speed_mbps": speed if speed and speed > 0 else None,
        "mac": (read_text(os.path.join(path, "address")) or "").strip() or None,
        "ipv4": v4,
        "ipv6": v6,
    }
    if rdma is not None:
        entry["rdma_device"] = rdma[0]
    return entry


# -- IPv4: fib_trie + route ----------------------------------------------------------------------


def _hex_ip4(text: str) -> int:
    """/proc/net/route's little-endian hex to an integer in network order."""
    value = int(text, 16)
    return int.from_bytes(value.to_bytes(4, "little"), "big")


def _dotted(value: int) -> str:
    return ".".join(str((value >> s) & 255) for s in (24, 16, 8, 0))


def _parse_dotted(text: str) -> Optional[int]:
    parts = text.split(".")
    if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts):
        return None
    return (int(parts[0]) << 24) | (int(parts[1]) << 16) | (int(parts[2]) << 8) | int(parts[3])


def parse_route(text: str) -> List[Dict[str, Any]]:
    """/proc/net/route rows: iface, destination/prefix, gateway, metric, default."""
    rows = []
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 8:
            continue
        try:
            dest, gateway, flags = _hex_ip4(cols[1]), _hex_ip4(cols[2]), int(cols[3], 16)
            metric, mask = int(cols[6]), _hex_ip4(cols[7])
        except ValueError:
            continue
        if not flags & 1:  # RTF_UP
            continue
        prefix = bin(mask).count("1")
        rows.append({
            "family": "inet", "iface": cols[0], "destination": "%s/%d" % (_dotted(dest), prefix),
            "gateway": _dotted(gateway) if flags & 2 else None, "metric": metric, "default": prefix == 0,
        })  # fmt: skip
    return rows


def _subnet(destination: str) -> Tuple[int, int]:
    """"10.0.0.0/8" -> (network, mask) as integers."""
    address, _, prefix = destination.partition("/")
    bits = int(prefix or 32)
    mask = ((1 << 32) - 1) ^ ((1 << (32 - bits)) - 1)
    return (_parse_dotted(address) or 0) & mask, mask


def parse_fib_trie(text: str) -> List[str]:
    """The host's own IPv4 addresses: leaves of /proc/net/fib_trie marked `/32 host LOCAL`."""
    found = []
    leaf = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("|--"):
            leaf = stripped[3:].strip()
        elif leaf and stripped.startswith("/32") and stripped.endswith("LOCAL"):
            if leaf not in found:
                found.append(leaf)
    return found


def assign_ipv4(addresses: List[str], routes: List[Dict[str, Any]]) -> Dict[Any, List[Dict[str, Any]]]:
    """iface -> [{address, prefix}] by the longest subnet route containing each address;
    127/8 goes to loopback. Unmatched addresses are listed under the key None."""
    out: Dict[Any, List[Dict[str, Any]]] = {}
    for text in addresses:
        value = _parse_dotted(text)
        if value is None:
            continue
        best = None  # (mask, iface) of the longest subnet route holding the address
        for route in routes:
            dest, mask = _subnet(route["destination"])
            if mask and value & mask == dest and (best is None or mask > best[0]):
                best = (mask, route["iface"])
        if best is not None:
            iface, prefix = best[1], bin(best[0]).count("1")
        elif value >> 24 == 127:
            iface, prefix = "lo", 8
        else:
            iface, prefix = None, 32
        out.setdefault(iface, []).append({"address": text, "prefix": prefix})
    return out


def ip_addresses(timeout: float) -> Optional[Dict[Any, List[Dict[str, Any]]]]:
    """iface -> IPv4 addresses from `ip -j addr` (iproute2), or None when it can't tell."""
    if not which("ip"):
        return None
    code, out = run(["ip", "-j", "-4", "addr", "show"], timeout=timeout)
    if code != 0:
        return None
    return parse_ip_json(out)


def parse_ip_json(text: str) -> Optional[Dict[Any, List[Dict[str, Any]]]]:
    # lazy: the protocol module only for `ip -j` output (the agent starts per call)
    from provision.agent.protocol import loads

    try:
        links = loads(text)
    except ValueError:
        return None
    out: Dict[Any, List[Dict[str, Any]]] = {}
    for link in links if isinstance(links, list) else []:
        for info in link.get("addr_info") or []:
            if info.get("family") == "inet" and info.get("local"):
                out.setdefault(link.get("ifname"), []).append(
                    {"address": info["local"], "prefix": int(info.get("prefixlen", 32))}
                )
    return out


# -- IPv6 ----------------------------------------------------------------------------------------

_V6_SCOPES = {"00": "global", "10": "host", "20": "link", "40": "site", "05": "site", "0e": "global"}


def _v6(hex32: str) -> str:
    """RFC 5952 text of a 32-digit hex address, as inet_ntop writes it (without importing
    socket, which facts otherwise never needs)."""
    groups = [int(hex32[i:i + 4], 16) for i in range(0, 32, 4)]
    if groups[:6] == [0, 0, 0, 0, 0, 0xFFFF]:
        return "::ffff:%d.%d.%d.%d" % (groups[6] >> 8, groups[6] & 255, groups[7] >> 8, groups[7] & 255)
    best, start = (0, -1), -1
    for i, g in enumerate(groups + [1]):
        if g == 0 and start < 0:
            start = i
        elif g != 0 and start >= 0:
            if i - start > best[0]:
                best = (i - start, start)
            start = -1
    words = ["%x" % g for g in groups]
    if best[0] >= 2:
        left, right = words[:best[1]], words[best[1] + best[0]:]
        return ":".join(left) + "::" + ":".join(right)
    return ":".join(words)


def parse_if_inet6(text: str) -> Dict[str, List[Dict[str, Any]]]:
    out: Dict[str, List[Dict[str, Any]]] = {}
    for line in text.splitlines():
        cols = line.split()
        if len(cols) < 6 or len(cols[0]) != 32:
            continue
        try:
            out.setdefault(cols[5], []).append(
                {"address": _v6(cols[0]), "prefix": int(cols[2], 16), "scope": _V6_SCOPES.get(cols[3], cols[3])}
            )
        except ValueError:
            continue
    return out


def parse_ipv6_route(text: str) -> List[Dict[str, Any]]:
    """Default IPv6 routes (::/0 with a gateway) from /proc/net/ipv6_route."""
    rows = []
    for line in text.splitlines():
        cols = line.split()
        if len(cols) < 10 or cols[0] != "0" * 32 or cols[1] != "00" or cols[9] == "lo":
            continue
        try:
            gateway = _v6(cols[4])
            flags = int(cols[8], 16)
        except ValueError:
            continue
        if not flags & 1 or gateway == "::":
            continue
        rows.append({"family": "inet6", "iface": cols[9], "destination": "::/0", "gateway": gateway,
                     "metric": int(cols[5], 16), "default": True})  # fmt: skip
    return rows


# -- InfiniBand / RoCE ---------------------------------------------------------------------------


def _rate_gbps(text: str) -> Optional[float]:
    """"200 Gb/sec (4X HDR)" -> 200.0"""
    head = text.split()
    try:
        return float(head[0]) if head else None
    except ValueError:
        return None


def infiniband_devices(root: str = "/") -> List[Dict[str, Any]]:
    """Each RDMA device in /sys/class/infiniband with its ports (state, rate, link layer) and
    the netdev each port maps to (the PCI device's net/ folder, else the port's GID table)."""
    devices = []
    for path in list_dir(os.path.join(root, "sys/class/infiniband")):
        name = os.path.basename(path)
        netdevs = [os.path.basename(p) for p in list_dir(os.path.join(path, "device/net"))]
        ports = []
        for port_path in list_dir(os.path.join(path, "ports")):
            number = _int(os.path.basename(port_path))
            state = (read_text(os.path.join(port_path, "state")) or "").strip()
            rate = (read_text(os.path.join(port_path, "rate")) or "").strip()
            ndev = (read_text(os.path.join(port_path, "gid_attrs/ndevs/0"), 256) or "").strip()
            if not ndev and netdevs:
                index = (number or 1) - 1
                ndev = netdevs[index] if index < len(netdevs) else netdevs[0]
            ports.append({
                "port": number,
                "state": state.split(":", 1)[-1].strip() if state else None,
                "phys_state": ((read_text(os.path.join(port_path, "phys_state")) or "").split(":", 1)[-1].strip()
                               or None),
                "rate": rate or None,
                "rate_gbps": _rate_gbps(rate),
                "link_layer": (read_text(os.path.join(port_path, "link_layer")) or "").strip() or None,
                "netdev": ndev or None,
            })  # fmt: skip
        devices.append({
            "name": name,
            "hca_type": (read_text(os.path.join(path, "hca_type")) or "").strip() or None,
            "fw_ver": (read_text(os.path.join(path, "fw_ver")) or "").strip() or None,
            "node_guid": (read_text(os.path.join(path, "node_guid")) or "").strip() or None,
            "ports": ports,
        })  # fmt: skip
    return devices
