"""Which network a set of hosts meets on for torch.distributed, and on which port.

`choose_fabric` is pure: from each host's `network` facts (provision/agent/facts/network.py) it
ranks the networks every host has an address on. `select_fabric` then checks the best one for
real: the master listens on a port, every other host connects to it by TCP (bounded, see
probe.py), and the first candidate every host reaches wins. The SSH address is never trusted by
itself: on rentals it is often a port-forwarding gateway shared by many machines.

Ranking (docs/train.md "Fabric"): InfiniBand, then RoCE, then private Ethernet (10/8, 172.16/12,
192.168/16, 100.64/10 and 198.18/15, the benchmarking range the test fleet lives in), then any
other subnet all hosts share, then each host's default route. Loopback is used only when every
host is the same machine (one host); docker/bridge/veth/virtual bridges and link-local
addresses are skipped. Hosts keep their order: rank i is the i-th host, with `--master`'s host
moved to rank 0.
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from provision.distributed.probe import probe_candidate
from provision.errors import ConfigError

if TYPE_CHECKING:  # the agent handle is only needed by select_fabric's callers
    from provision.remote.agent import Agent

# kinds (from the facts) in order of preference; what is not here is never a candidate
KIND_RANK = {"infiniband": 0, "roce": 1, "ethernet": 2, "bridge": 3}
SKIPPED_KINDS = {"loopback", "docker", "veth", "virtual", "tunnel"}
PRIVATE_NETS = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "198.18.0.0/15")
)
LINK_LOCAL = ipaddress.ip_network("169.254.0.0/16")
DEFAULT_PORT_RANGE = (29500, 29999)
MAX_CANDIDATES_PROBED = 4  # each probe round is bounded; this bounds the rounds


@dataclass(frozen=True)
class Candidate:
    """One network every host has an address on (or, kind "routed", each host's default route)."""

    master_host: str
    master_addr: str
    ifaces: dict[str, str]  # host -> interface
    addrs: dict[str, str]  # host -> its own address on this network
    kind: str  # infiniband | roce | ethernet | loopback | routed
    network: str  # "198.18.5.0/24", or "default route"
    private: bool
    ib: bool
    note: str  # why it ranks where it does, one clause

    @property
    def label(self) -> str:
        return f"{self.network} ({self.kind}, {self.ifaces.get(self.master_host)} on {self.master_host})"


@dataclass(frozen=True)
class Fabric:
    master_host: str  # inventory name of the rank-0 host
    master_addr: str  # the address every host reaches the master on
    master_port: int  # a free port on the master (checked free, and reached by every host)
    ifaces: dict[str, str]  # host name -> interface that host uses (NCCL/GLOO_SOCKET_IFNAME)
    kind: str  # "infiniband" | "roce" | "ethernet" | "loopback" | "routed"
    ib: bool
    reason: str  # shown to users: why this network, what was rejected
    probes: list[dict[str, Any]] = field(default_factory=list)  # {from, to, addr, port, ok, ms, error}
    hosts: list[str] = field(default_factory=list)  # rank order: hosts[0] is master_host
    network: str = ""  # "10.16.0.0/16", or "default route" when the hosts share no subnet
    addrs: dict[str, str] = field(default_factory=dict)  # host -> its own address there (--local-addr)

    def rank(self, host: str) -> int:
        return self.hosts.index(host)

    def env(self, host: str) -> dict[str, str]:
        """What rank processes on `host` need to meet the others on this fabric."""
        if host not in self.ifaces:
            raise ConfigError(f"{host} is not one of this fabric's hosts ({', '.join(self.ifaces)})")
        iface = self.ifaces[host]
        env = {
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
            "NCCL_SOCKET_IFNAME": iface,
            "GLOO_SOCKET_IFNAME": iface,
        }
        if not self.ib:
            env["NCCL_IB_DISABLE"] = "1"
        return env

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# -- overrides ---------------------------------------------------------------------------------


def parse_master(text: str) -> tuple[str, int | None]:
    """`--master HOST[:PORT]`: HOST is an inventory name or an address of one of the hosts;
    IPv6 with a port is `[addr]:port`."""
    value = (text or "").strip()
    if not value:
        raise ConfigError("--master: empty value; give HOST or HOST:PORT (e.g. gpu1 or gpu1:29500)")
    host, port_text = value, None
    if value.startswith("["):
        close = value.find("]")
        if close < 0:
            raise ConfigError(f"--master {text!r}: '[' without ']'; write IPv6 as [addr]:port")
        host, rest = value[1:close], value[close + 1:]
        if rest:
            if not rest.startswith(":"):
                raise ConfigError(f"--master {text!r}: expected ':PORT' after ']'")
            port_text = rest[1:]
    elif value.count(":") == 1:
        host, port_text = value.split(":")
    if not host:
        raise ConfigError(f"--master {text!r}: no host before the port")
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ConfigError(f"--master {text!r}: port {port_text!r} is not a number in 1..65535")
    return host, int(port_text)


def _resolve_master(master: str | None, hosts: list[str], facts: dict[str, dict]) -> tuple[str, str | None]:
    """(master host name, forced master address or None). `master` may carry a port."""
    if master is None:
        return hosts[0], None
    master = parse_master(master)[0]
    if master in hosts:
        return master, None
    for name in hosts:
        for entry in _interfaces(facts.get(name) or {}, name):
            if master in [a["address"] for a in entry.get("ipv4") or []]:
                return name, master
    raise ConfigError(
        f"--master {master!r} is neither one of the hosts ({', '.join(hosts)}) nor an address on "
        "one of their interfaces; name a host from the targets, or one of its addresses "
        "(`provision facts HOST` lists them)"
    )


# -- the choice (pure) -------------------------------------------------------------------------


def _interfaces(host_facts: dict[str, Any], name: str) -> list[dict[str, Any]]:
    network = host_facts.get("network")
    if not isinstance(network, dict) or "interfaces" not in network:
        detail = network.get("error") if isinstance(network, dict) else "missing"
        raise ConfigError(
            f"{name}: no network facts ({detail}); gather them with `provision facts {name}` "
            "(the agent's facts must include 'network')"
        )
    return list(network.get("interfaces") or [])


def _networks(host_facts: dict[str, Any], name: str) -> dict[str, tuple[dict[str, Any], str, Any]]:
    """subnet -> (interface, address, ipaddress network) for each usable IPv4 address."""
    out: dict[str, tuple[dict[str, Any], str, Any]] = {}
    for entry in _interfaces(host_facts, name):
        for addr in entry.get("ipv4") or []:
            try:
                iface = ipaddress.ip_interface(f"{addr['address']}/{addr.get('prefix', 32)}")
            except (KeyError, ValueError):
                continue
            out.setdefault(str(iface.network), (entry, str(iface.ip), iface.network))
    return out


def _ib_active(host_facts: dict[str, Any]) -> bool:
    network = host_facts.get("network") or {}
    return any(
        str(port.get("state", "")).upper().endswith("ACTIVE")
        for dev in network.get("ib_devices") or []
        for port in dev.get("ports") or []
    )


def _skip_reason(entry: dict[str, Any], net: Any, single_host: bool) -> str | None:
    kind = entry.get("kind") or "ethernet"
    if kind == "loopback" or net.is_loopback:
        return None if single_host else "loopback"
    if net.version == 4 and net.subnet_of(LINK_LOCAL):
        return "link-local"
    if kind in SKIPPED_KINDS or kind not in KIND_RANK:
        return f"{kind} interface"
    if str(entry.get("operstate") or "").lower() in ("down", "lowerlayerdown", "notpresent"):
        return "interface down"
    return None


def survey(
    facts: dict[str, dict], *, master: str | None = None, iface: str | None = None
) -> tuple[list[Candidate], list[str]]:
    """(ranked candidates, why other networks were skipped). Hosts in `facts` order = rank order."""
    hosts = list(facts)
    if not hosts:
        raise ConfigError("no hosts to choose a network for")
    master_host, forced_addr = _resolve_master(master, hosts, facts)
    single = len(hosts) == 1
    per_host = {name: _networks(facts[name], name) for name in hosts}
    if iface is not None:
        for name in hosts:
            names = [e.get("name") for e in _interfaces(facts[name], name)]
            if iface not in names:
                raise ConfigError(
                    f"--iface {iface}: {name} has no interface {iface!r} (it has: {', '.join(map(str, names))})"
                )
            if not any(entry.get("name") == iface for entry, _, _ in per_host[name].values()):
                raise ConfigError(f"--iface {iface}: {name}'s {iface} has no IPv4 address")
    skipped: list[str] = []
    found: list[tuple[tuple, Candidate]] = []
    for subnet, (m_entry, m_addr, net) in per_host[master_host].items():
        if forced_addr is not None and m_addr != forced_addr:
            continue
        if iface is not None and m_entry.get("name") != iface:
            continue
        missing = [n for n in hosts if subnet not in per_host[n]]
        if missing:
            skipped.append(f"{subnet} ({m_entry.get('name')}): not on {', '.join(missing)}")
            continue
        entries = {n: per_host[n][subnet][0] for n in hosts}
        if iface is not None and any(e.get("name") != iface for e in entries.values()):
            continue
        reasons = [r for r in (_skip_reason(entries[n], net, single) for n in hosts) if r]
        if reasons and forced_addr is None and iface is None:
            skipped.append(f"{subnet} ({m_entry.get('name')}): {reasons[0]}")
            continue
        kinds = {str(e.get("kind") or "ethernet") for e in entries.values()}
        kind = "loopback" if net.is_loopback else (kinds.pop() if len(kinds) == 1 else "ethernet")
        if kind not in ("infiniband", "roce", "loopback"):  # a bridge, or a forced docker/veth link
            kind = "ethernet"
        private = any(net.subnet_of(p) for p in PRIVATE_NETS) if net.version == 4 else False
        ib = all(_ib_active(facts[n]) for n in hosts)
        speed = min(int(e.get("speed_mbps") or 0) for e in entries.values())
        mtu = min(int(e.get("mtu") or 0) for e in entries.values())
        bridged = any(e.get("kind") == "bridge" for e in entries.values())
        note = {
            "infiniband": "IPoIB on every host",
            "roce": "RoCE on every host",
            "loopback": "one machine: loopback",
        }.get(kind, "private subnet on every host" if private else "a public subnet every host shares")
        score = (0 if kind == "loopback" else KIND_RANK[kind], 0 if private else 1, bridged, -speed, -mtu)
        cand = Candidate(
            master_host=master_host, master_addr=m_addr,
            ifaces={n: str(entries[n].get("name")) for n in hosts},
            addrs={n: per_host[n][subnet][1] for n in hosts},
            kind=kind, network=subnet, private=private, ib=ib, note=note,
        )  # fmt: skip
        found.append((score, cand))
    found.sort(key=lambda item: item[0])
    ranked = [c for _, c in found]
    routed = _routed(facts, hosts, master_host, forced_addr, iface)
    if routed is not None and all(c.master_addr != routed.master_addr for c in ranked):
        ranked.append(routed)
    return ranked, skipped


def _routed(facts: dict[str, dict], hosts: list[str], master_host: str, forced_addr: str | None,
            iface: str | None) -> Candidate | None:
    """Last resort: each host's default-route interface, master on its address there (works
    when the hosts are routed to each other but share no subnet, e.g. public addresses)."""
    if len(hosts) < 2:
        return None
    ifaces: dict[str, str] = {}
    addrs: dict[str, str] = {}
    for name in hosts:
        network = facts[name].get("network") or {}
        routes = [r for r in network.get("default_routes") or [] if r.get("family", "inet") == "inet"]
        dev = iface or (routes[0].get("iface") if routes else None)
        if not dev:
            return None
        entry = next((e for e in network.get("interfaces") or [] if e.get("name") == dev), None)
        v4 = [a["address"] for a in (entry or {}).get("ipv4") or [] if a.get("address")]
        if not v4:
            return None
        ifaces[name], addrs[name] = str(dev), v4[0]
    master_addr = addrs[master_host] = forced_addr or addrs[master_host]
    ip = ipaddress.ip_address(master_addr)
    if ip.is_loopback or ip.is_link_local:
        return None
    return Candidate(
        master_host=master_host, master_addr=master_addr, ifaces=ifaces, addrs=addrs,
        kind="routed", network="default route", private=ip.is_private, ib=all(_ib_active(facts[n]) for n in hosts),
        note="no subnet every host shares: each host's default route",
    )  # fmt: skip


def choose_fabric(facts: dict[str, dict], *, master: str | None = None, iface: str | None = None) -> list[Candidate]:
    """Ranked candidates from the hosts' network facts (pure; nothing is probed)."""
    return survey(facts, master=master, iface=iface)[0]


# -- the check (probes) ------------------------------------------------------------------------


def select_fabric(
    agents: dict[str, Agent],
    facts: dict[str, dict],
    *,
    master: str | None = None,
    port: int | None = None,
    iface: str | None = None,
    timeout_s: float = 5.0,
) -> Fabric:
    """The first candidate on which every host reaches the master's port (probed by TCP, bounded
    by `timeout_s` per connection). `master` may be "HOST[:PORT]" (then its port is used unless
    `port` is given). Raises ConfigError naming hosts, addresses and what to do when none works."""
    if master is not None and port is None:
        master, port = parse_master(master)
    elif master is not None:
        master = parse_master(master)[0]
    hosts = [name for name in facts]
    missing = [n for n in hosts if n not in agents]
    if missing:
        raise ConfigError(f"no agent for host(s) {', '.join(missing)}")
    facts = _with_network(agents, facts)
    candidates, skipped = survey(facts, master=master, iface=iface)
    if not candidates:
        raise ConfigError(
            "no network that every host has an address on"
            + (f" ({'; '.join(skipped)})" if skipped else "")
            + ": give --iface NAME for an interface the hosts reach each other on, or --master HOST:PORT"
        )
    master_host = candidates[0].master_host
    order = [master_host] + [n for n in hosts if n != master_host]
    all_probes: list[dict[str, Any]] = []
    failed: list[str] = []
    for cand in candidates[:MAX_CANDIDATES_PROBED]:
        chosen_port, probes, error = probe_candidate(agents, cand, order, port=port, timeout_s=timeout_s)
        all_probes.extend(probes)
        if error is None:
            return Fabric(
                master_host=master_host, master_addr=cand.master_addr, master_port=chosen_port,
                ifaces={n: cand.ifaces[n] for n in order}, kind="ethernet" if cand.kind == "routed" else cand.kind,
                ib=cand.ib, reason=_reason(cand, skipped, failed) + _overridden(facts, cand),
                probes=all_probes, hosts=order, network=cand.network, addrs={n: cand.addrs[n] for n in order},
            )  # fmt: skip
        if port is not None and error.startswith(f"{master_host} could not listen"):
            raise ConfigError(f"--master {master_host}:{port}: {error}")  # no other network will help
        failed.append(f"{cand.master_addr} on {cand.label}: {error}")
    raise ConfigError(
        "the hosts could not reach each other on any network: " + "; ".join(failed)
        + ". Check that the port is open between the hosts (firewall, security group), or give "
        "--iface NAME / --master HOST:PORT for the network they share"
    )


def _with_network(agents: dict[str, Agent], facts: dict[str, dict]) -> dict[str, dict]:
    """The facts, with `network` asked of each host whose facts were gathered without it."""
    out = dict(facts)
    for name, host_facts in facts.items():
        network = (host_facts or {}).get("network")
        if not (isinstance(network, dict) and "interfaces" in network):
            fetched = agents[name].call("facts", {"only": ["network"]})
            out[name] = {**(host_facts or {}), "network": fetched.get("network")}
    return out


def _overridden(facts: dict[str, dict], cand: Candidate) -> str:
    """Hosts whose own environment names another interface (the fabric's env replaces it)."""
    notes = []
    for name, chosen in cand.ifaces.items():
        env = ((facts.get(name) or {}).get("network") or {}).get("nccl_env") or {}
        for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
            if env.get(var) and env[var] != chosen:
                notes.append(f"{name} sets {var}={env[var]}")
    if not notes:
        return ""
    return f" Note: {', '.join(notes)} in its environment; the fabric's interface is used instead."


def _reason(cand: Candidate, skipped: list[str], failed: list[str]) -> str:
    text = f"{cand.master_addr} on {cand.network} ({cand.kind}; {cand.note}; interface "
    names = sorted(set(cand.ifaces.values()))
    text += f"{names[0]})" if len(names) == 1 else f"{', '.join(names)})"
    text += "; every host reached the master" if len(cand.ifaces) > 1 else ""
    if failed:
        text += ". Fell back from " + "; ".join(failed)
    skipped = [s for s in skipped if not s.endswith(": loopback")]  # not worth a word
    if skipped:
        text += ". Skipped " + "; ".join(skipped[:4]) + (" ..." if len(skipped) > 4 else "")
    return text + "."
