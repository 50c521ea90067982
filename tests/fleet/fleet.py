"""A fleet of real OpenSSH test hosts on this machine, one network namespace each.

    controller (root namespace)                        host gpuN (netns pf-RID-gpuN)
    bridge pfRIDbr  198.x.y.1/24  ──── veth pfRIDhN ──── eth0 198.x.y.(N+1)/24
                                                          own mount + UTS namespace:
                                                          hostname gpuN, tmpfs /root (authorized_keys),
                                                          tmpfs /root/autodl-tmp (the "local SSD"),
                                                          own /tmp /run /home, sshd -D -e on :22

Why namespaces and not containers: nothing to pull, starts 32 hosts in a couple of seconds, and
every host is a real sshd with real auth, host keys, PATH and a Debian /usr/bin/python3.

Each host's namespaces are held by a `sleep infinity` "keeper"; sshd is started next to it with
nsenter, so sshd can be restarted (new host key, password auth) without losing the host's files.
Children get PR_SET_PDEATHSIG=SIGKILL, and a run whose controller died is cleaned up by the next
run (lock files under /run/provision-fleet name its namespaces and bridge).

Hosts can look like rentals (noisy shells, a gateway's high ports, sudo users, a jump host,
conda, no python3, a Debian 11 root filesystem): `Fleet(n, kinds=...)`, see tests/fleet/kinds.py.
The namespaces and addresses are in netns.py, what tests do to hosts in actions.py.

Needs root, iproute2, util-linux (unshare, nsenter) and openssh-server. Usable as a script too:
`python3 tests/fleet/fleet.py up -n 32` (prints an inventory, waits for Ctrl-C),
`python3 tests/fleet/fleet.py time -n 32`, `python3 tests/fleet/fleet.py cleanup`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hostfs
import kinds as kinds_mod
from actions import HostActions
from netns import (  # noqa: F401  (re-exported: tests import them from fleet)
    _DEAD_OCTET,
    _GATEWAY_OCTET,
    _JUMP_OCTET,
    _MAX_FLEET,
    _MAX_HOSTS,
    _SUBNETS,
    _UNOWNED_MAC,
    LOCK_DIR,
    SESSION_PATH,
    SSHD,
    FleetError,
    ShapingUnavailable,
    _ed25519_keypair,
    _encrypted_keypair,
    _free_run_id,
    _install_sigterm_handler,
    _netem_available,
    _pdeathsig,
    _remove_network,
    _run,
    _subnets_in_use,
    _write_private,
    cleanup_stale,
    generate_keypair,
    preflight,
)


@dataclass
class FleetHost:
    """One test host. `name`, `address`, `port`, `user`, `key_file` are what a controller needs."""

    name: str
    index: int
    address: str
    key_file: str
    host_key_fingerprint: str  # SHA256:... as `ssh-keygen -lf` prints it
    port: int = 22
    user: str = "root"
    netns: str = ""
    veth: str = ""  # root-namespace end of the host's link
    workdir: Path = field(default_factory=Path)
    keeper: subprocess.Popen | None = field(default=None, repr=False)
    sshd: subprocess.Popen | None = field(default=None, repr=False)
    host_public_key: str = ""  # "ssh-ed25519 AAAA..."
    password_users: dict[str, str] = field(default_factory=dict, repr=False)
    kinds: frozenset[str] = frozenset()  # rental-like traits (tests/fleet/kinds.py)
    rootfs: str = ""  # bullseye, ownroot: the lower layer of the root its sshd is chrooted into
    back_address: str = ""  # backnet: its eth1 address on the back network (Fleet.back_subnet)
    # login -> sudo password, for the `sudo` kind's user whose sudo asks for one
    sudo_passwords: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def log_file(self) -> Path:
        return self.workdir / "sshd.log"

    def as_host(self, **overrides: Any):
        """This host as provision's inventory Host (imported lazily: the fleet itself needs no
        provision code)."""
        from provision.inventory.model import Host

        fields = dict(
            name=self.name,
            address=self.address,
            port=self.port,
            user=self.user,
            key_file=self.key_file,
        )
        fields.update(overrides)
        return Host(**fields)

    def in_host(self, path: str | os.PathLike) -> str:
        """A file of this host's workdir as the host sees it (chrooted hosts mount it at /fleet)."""
        if self.rootfs:
            return "/fleet/" + Path(path).relative_to(self.workdir).as_posix()
        return str(path)

    def known_hosts_line(self) -> str:
        name = self.address if self.port == 22 else f"[{self.address}]:{self.port}"
        return f"{name} {self.host_public_key}\n"


class Fleet(HostActions):
    """N sshd hosts gpu1..gpuN. Use as a context manager, or start()/stop()."""

    def __init__(
        self,
        size: int = 8,
        *,
        # tmpfs takes memory only for what is written; 4g because the facts agent passes over a
        # known data dir (/root/autodl-tmp) with less than 1 GiB free, as a full rental disk is
        ssd_size: str = "4g",
        root_size: str = "1g",
        start_timeout: float = 30.0,
        # rental-like hosts (tests/fleet/kinds.py): one kind for all, or one (set) per host
        kinds: str | Iterable[str | Iterable[str]] | None = None,
    ) -> None:
        if not 1 <= size <= _MAX_FLEET:
            raise ValueError(f"fleet size must be 1..{_MAX_FLEET}, got {size}")
        self.size = size
        self.kinds = kinds_mod.parse_kinds(kinds, size)
        self.jump: FleetHost | None = None  # the jump host, when a host is `behind-jump`
        self.jump_key_file = ""  # the only key the jump host authorizes
        self.passphrase_key_file = ""  # authorized everywhere; encrypted with key_passphrase
        self.key_passphrase = ""
        self.inner_subnet = ""  # behind-jump hosts' link: no route to it from here
        self._inner_lock: Path | None = None
        self.back_subnet = ""  # backnet hosts' second network: no address on it from here
        self._back_lock: Path | None = None
        self._forwarder: subprocess.Popen | None = None  # gateway+backnet: the port forwarder
        self._torch_prefix: tuple[str, str] | None = None  # (base prefix, site-packages)
        self.ssd_size = ssd_size
        self.root_size = root_size
        self.start_timeout = start_timeout
        self.rid = ""
        self.subnet = ""  # first three octets, e.g. "198.19.37"
        # past _MAX_HOSTS hosts: one more /24 on the same bridge per 200 (scale benchmarks)
        self.more_subnets: list[str] = []
        self._more_locks: list[Path] = []
        self.hosts: list[FleetHost] = []
        self.workdir = Path()
        self.key_file = ""
        self.public_key = ""
        self.start_seconds = 0.0
        self._lock: Path | None = None
        self._stopped = True
        self._dead_neigh = False
        self._mutex = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def controller_address(self) -> str:
        """The bridge's address: where hosts reach the controller (e.g. a package index)."""
        return f"{self.subnet}.1"

    @property
    def bridge(self) -> str:
        return f"pf{self.rid}br"

    def __enter__(self) -> Fleet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Fleet:
        reason = preflight()
        if reason:
            raise FleetError(reason)
        started = time.monotonic()
        cleanup_stale()
        self._stopped = False
        atexit.register(self.stop)
        _install_sigterm_handler()
        try:
            self._claim_subnet()
            self._make_keys()
            self._make_network()
            self._start_keepers()
            self._start_forwarder()
            for host in self._all_hosts():
                self._spawn_sshd(host)
            self._wait_ready(self._all_hosts())
            self._wait_links_up()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - started
        return self

    def _wait_links_up(self, timeout: float = 15.0) -> None:
        """Every backnet host's eth1 reports operstate "up" (the kernel's linkwatch may take up to
        a second after both veth ends are up; facts read then would call the link down)."""
        back = [h for h in self.hosts if "backnet" in h.kinds]
        deadline = time.monotonic() + timeout
        while back and time.monotonic() < deadline:
            back = [h for h in back
                    if self.ns_exec(h, "cat /sys/class/net/eth1/operstate", check=False).stdout.strip() != "up"]
            if back:
                time.sleep(0.1)
        if back:
            raise FleetError(f"eth1 not up within {timeout:g}s on: {', '.join(h.name for h in back)}")

    def _claim_subnet(self) -> None:
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        used = _subnets_in_use()
        first = (os.getpid() * 7919) % len(_SUBNETS)
        for step in range(len(_SUBNETS)):
            subnet = _SUBNETS[(first + step) % len(_SUBNETS)]
            if subnet in used:
                continue
            lock = LOCK_DIR / f"{subnet}.json"
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue  # another live run has it (dead runs were cleaned above)
            self.rid = _free_run_id()
            self.subnet = subnet
            self.workdir = Path(
                tempfile.mkdtemp(prefix=f"provision-fleet-{self.rid}-", dir="/var/tmp")
            )
            netns = [f"pf-{self.rid}-gpu{i}" for i in range(1, self.size + 1)]
            with os.fdopen(fd, "w") as fh:
                json.dump(
                    {
                        "pid": os.getpid(),
                        "rid": self.rid,
                        "netns": netns,
                        "workdir": str(self.workdir),
                    },
                    fh,
                )
            self._lock = lock
            for _ in range((self.size - 1) // _MAX_HOSTS):
                more, lock = self._claim_extra_subnet(used | {subnet, *self.more_subnets}, 6151, None)
                self.more_subnets.append(more)
                self._more_locks.append(lock)
            used = used | set(self.more_subnets)
            if any("behind-jump" in k for k in self.kinds):
                self._claim_inner_subnet(used | {subnet})
            if any("backnet" in k for k in self.kinds):
                self.back_subnet, self._back_lock = self._claim_extra_subnet(
                    used | {subnet, self.inner_subnet}, 7877, None)
            return
        raise FleetError("no free /24 in 198.18.0.0/15 for a test fleet (all 512 taken?)")

    def _claim_inner_subnet(self, used: set[str]) -> None:
        """A second /24 for the jump host's inner link (its lock names the same run)."""
        self.inner_subnet, self._inner_lock = self._claim_extra_subnet(
            used, 104729, "unreachable {}.0/24")

    def _claim_extra_subnet(self, used: set[str], seed: int, route: str | None) -> tuple[str, Path]:
        """Another /24 of this run (its lock names the same run, and the route to drop later)."""
        assert self._lock is not None
        info = self._lock.read_text()
        first = (os.getpid() * seed) % len(_SUBNETS)
        for step in range(len(_SUBNETS)):
            subnet = _SUBNETS[(first + step) % len(_SUBNETS)]
            if subnet in used:
                continue
            lock = LOCK_DIR / f"{subnet}.json"
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as fh:
                extra = {"route": route.format(subnet)} if route else {}
                json.dump({**json.loads(info), **extra}, fh)
            return subnet, lock
        raise FleetError("no second free /24 in 198.18.0.0/15 for the jump host's or the back network")

    def _address(self, i: int) -> str:
        """Host i's address: .2-.201 of the first /24, then of the next ones."""
        subnet = [self.subnet, *self.more_subnets][(i - 1) // _MAX_HOSTS]
        return f"{subnet}.{(i - 1) % _MAX_HOSTS + 2}"

    def _make_keys(self) -> None:
        private, self.public_key, _ = _ed25519_keypair()
        self.key_file = str(self.workdir / "id_ed25519")
        _write_private(Path(self.key_file), private)
        (self.workdir / "id_ed25519.pub").write_text(self.public_key + "\n")
        self.passphrase_key_file = str(self.workdir / "id_passphrase")
        self.key_passphrase = "fleet-" + secrets.token_hex(8)
        self._passphrase_public = _encrypted_keypair(Path(self.passphrase_key_file), self.key_passphrase)
        gateway_ports = iter(range(kinds_mod.GATEWAY_FIRST_PORT, kinds_mod.GATEWAY_FIRST_PORT + _MAX_HOSTS))
        for i in range(1, self.size + 1):
            traits = self.kinds[i - 1]
            hostdir = self.workdir / f"gpu{i}"
            hostdir.mkdir(mode=0o700)
            host = FleetHost(
                name=f"gpu{i}",
                index=i,
                address=self._address(i),
                key_file=self.key_file,
                host_key_fingerprint="",
                netns=f"pf-{self.rid}-gpu{i}",
                veth=f"pf{self.rid}h{i}",
                workdir=hostdir,
                kinds=traits,
            )
            if "gateway" in traits:  # one address, a port per instance, one network namespace
                host.address, host.port = f"{self.subnet}.{_GATEWAY_OCTET}", next(gateway_ports)
                host.netns, host.veth = f"pf-{self.rid}-gw", f"pf{self.rid}hgw"
            if "behind-jump" in traits:
                host.address, host.veth = f"{self.inner_subnet}.{i + 1}", ""
            if "backnet" in traits:
                host.back_address = f"{self.back_subnet}.{i + 1}"
                if "gateway" in traits:  # a machine of its own, reached through the forwarder only
                    host.netns, host.veth = f"pf-{self.rid}-gpu{i}", ""
            if "sudo" in traits:
                host.user = kinds_mod.SUDO_NOPASSWD_USER
                host.sudo_passwords[kinds_mod.SUDO_PASSWORD_USER] = "sudo-" + secrets.token_hex(6)
            if "bullseye" in traits:
                host.rootfs = str(kinds_mod.bullseye_rootfs())
            if "ownroot" in traits:  # an overlay over this machine's own root filesystem
                host.rootfs = "/"
            self._new_host_key(host)
            self._write_sshd_config(host)
            self.hosts.append(host)
        if any("behind-jump" in h.kinds for h in self.hosts):
            private, self._jump_public, _ = _ed25519_keypair()
            self.jump_key_file = str(self.workdir / "id_jump")
            _write_private(Path(self.jump_key_file), private)
            jumpdir = self.workdir / "jump"
            jumpdir.mkdir(mode=0o700)
            self.jump = FleetHost(
                name="jump", index=0, address=f"{self.subnet}.{_JUMP_OCTET}",
                key_file=self.jump_key_file, host_key_fingerprint="",
                netns=f"pf-{self.rid}-jump", veth=f"pf{self.rid}hj", workdir=jumpdir,
            )  # fmt: skip
            self._new_host_key(self.jump)
            self._write_sshd_config(self.jump)
        if any("conda" in h.kinds for h in self.hosts):
            self._torch_prefix = kinds_mod.torch_prefix()

    def _new_host_key(self, host: FleetHost) -> None:
        private, public, fingerprint = _ed25519_keypair()
        _write_private(host.workdir / "ssh_host_ed25519_key", private)
        (host.workdir / "ssh_host_ed25519_key.pub").write_text(public + "\n")
        host.host_public_key = public
        host.host_key_fingerprint = fingerprint

    def _write_sshd_config(
        self, host: FleetHost, *, password: bool = False, root_password: bool = False
    ) -> None:
        lines = [
            f"Port {host.port}",
            "ListenAddress 0.0.0.0",
            f"HostKey {host.in_host(host.workdir / 'ssh_host_ed25519_key')}",
            "PidFile none",
            f"PermitRootLogin {'yes' if root_password else 'prohibit-password'}",
            "PubkeyAuthentication yes",
            "AuthorizedKeysFile .ssh/authorized_keys",
            f"PasswordAuthentication {'yes' if password else 'no'}",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes yes",  # /root is a 0700 tmpfs owned by root: the strict checks pass
            "UseDNS no",
            "MaxStartups 200",  # the benchmark opens 32 connections at once
            "MaxSessions 64",
            f"SetEnv PATH={SESSION_PATH}",
            "AcceptEnv LANG LC_*",
            "Subsystem sftp /usr/lib/openssh/sftp-server",
            "LogLevel VERBOSE",
        ]
        (host.workdir / "sshd_config").write_text("\n".join(lines) + "\n")

    def _make_network(self) -> None:
        br = self.bridge
        batch = [
            f"link add {br} type bridge",
            f"addr add {self.controller_address}/24 dev {br}",
            *[f"addr add {more}.1/24 dev {br}" for more in self.more_subnets],
            f"link set {br} up",
        ]
        wired = set()
        gw_ns = f"pf-{self.rid}-gw"
        if any("gateway" in h.kinds for h in self.hosts):  # the gateway box, even with no sshd of its own
            wired.add(gw_ns)
            batch += [f"netns add {gw_ns}", f"link add pf{self.rid}hgw type veth peer name eth0 netns {gw_ns}",
                      f"link set pf{self.rid}hgw master {br} up"]  # fmt: skip
        for host in [*self.hosts, *([self.jump] if self.jump else [])]:
            if host.netns in wired:
                continue  # gateway hosts share one namespace and one link
            wired.add(host.netns)
            batch.append(f"netns add {host.netns}")
            if host.veth:
                batch += [
                    f"link add {host.veth} type veth peer name eth0 netns {host.netns}",
                    f"link set {host.veth} master {br} up",
                ]
        if self.jump:  # inner links: jump host <-> each host behind it, nothing on this side
            batch += [
                f"link add j{h.index} netns {self.jump.netns} type veth peer name eth0 netns {h.netns}"
                for h in self.hosts if "behind-jump" in h.kinds
            ]  # fmt: skip
        back = [h for h in self.hosts if "backnet" in h.kinds]
        switch = f"pf-{self.rid}-bn"  # the back network's switch: a bridge in a namespace of its own
        if back:
            batch.append(f"netns add {switch}")
            batch += [f"link add b{h.index} netns {switch} type veth peer name eth1 netns {h.netns}" for h in back]
            if any("gateway" in h.kinds for h in back):
                batch.append(f"link add bgw netns {switch} type veth peer name eth1 netns {gw_ns}")
        _run(["ip", "-batch", "-"], input="\n".join(batch) + "\n")
        if back:
            mtu = kinds_mod.BACKNET_MTU
            legs = [f"b{h.index}" for h in back] + (["bgw"] if any("gateway" in h.kinds for h in back) else [])
            switch_batch = ["link add back type bridge", f"link set back mtu {mtu} up"]
            switch_batch += [f"link set {leg} mtu {mtu} master back up" for leg in legs]
            _run(["ip", "-n", switch, "-batch", "-"], input="\n".join(switch_batch) + "\n")
            if "bgw" in legs:
                _run(["ip", "-n", gw_ns, "addr", "add", f"{self.back_subnet}.{_GATEWAY_OCTET}/24", "dev", "eth1"])
                _run(["ip", "-n", gw_ns, "link", "set", "eth1", "mtu", str(mtu), "up"])
        if self.jump:  # "no route to host" at once here, not a connect leaving by the default route
            _run(["ip", "route", "add", "unreachable", f"{self.inner_subnet}.0/24"])
        gateway = next((h for h in self.hosts if "gateway" in h.kinds), None)
        if gateway:
            ns = ["ip", "-n", gw_ns]
            _run([*ns, "addr", "add", f"{gateway.address}/24", "dev", "eth0"])
            _run([*ns, "link", "set", "eth0", "up"])
            _run([*ns, "link", "set", "lo", "up"])
            _run([*ns, "route", "add", "default", "via", self.controller_address])

    def _keeper_script(self, host: FleetHost) -> str:
        q = shlex.quote
        traits = host.kinds
        if host is self.jump:
            keys = [self._jump_public]
        else:
            keys = [self.public_key, self._passphrase_public]
        lines = ["set -e", f"hostname {host.name}", "ip link set lo up"]
        if "behind-jump" in traits:
            lines += [
                f"ip addr add {host.address}/24 dev eth0",
                "ip link set eth0 up",
                f"ip route add default via {self.inner_subnet}.1",
            ]
        elif "gateway" not in traits:  # the gateway's shared namespace is set up once, in _make_network
            lines += [
                f"ip addr add {host.address}/24 dev eth0",
                "ip link set eth0 up",
                f"ip route add default via {host.address.rsplit('.', 1)[0]}.1",  # the bridge, in its /24
            ]
        if "backnet" in traits:
            lines += [f"ip addr add {host.back_address}/24 dev eth1", f"ip link set eth1 mtu {kinds_mod.BACKNET_MTU} up"]
            if "gateway" in traits:  # its only network: out through the gateway box
                lines.append(f"ip route add default via {self.back_subnet}.{_GATEWAY_OCTET}")
        if host is self.jump:
            inner = [h for h in self.hosts if "behind-jump" in h.kinds]
            lines += ["ip link add inner type bridge", f"ip addr add {self.inner_subnet}.1/24 dev inner",
                      "ip link set inner up"]  # fmt: skip
            lines += [f"ip link set j{h.index} master inner up" for h in inner]
        # this machine's torch for the conda kind: staged before /root is covered, mounted back after
        binds: list[str] = []
        if "conda" in traits and self._torch_prefix:
            python, site = self._torch_prefix
            prefix = str(Path(python).parent.parent)
            binds = [prefix] + ([site] if not site.startswith(prefix + "/") else [])
            binds = [b for b in binds if kinds_mod.hidden_by_host(b)]
        for n, path in enumerate(binds):
            stage = host.workdir / f"bind{n}"
            stage.mkdir(exist_ok=True)
            lines.append(f"mount --bind {q(path)} {q(str(stage))}")
        root = ""  # the host's / as this machine sees it ("" = this machine's own /)
        if host.rootfs:
            root = str(host.workdir / "root")
            ovl = host.workdir / "ovl"
            (host.workdir / "root").mkdir(exist_ok=True)
            ovl.mkdir(exist_ok=True)
            # writes land in a tmpfs, never in the cached root filesystem
            lines += [
                f"mount -t tmpfs -o size=512m fleet-ovl {ovl}",
                f"mkdir {ovl}/upper {ovl}/work",
                f"mount -t overlay fleet-rootfs -o lowerdir={q(host.rootfs)},upperdir={ovl}/upper,"
                f"workdir={ovl}/work {root}",
                f"mount -t proc proc {root}/proc",
                # /sys read-only, as Docker gives it: the kernel's settings are this machine's
                f"mount --rbind /sys {root}/sys",
                f"mount -o remount,bind,ro {root}/sys",
                f"mkdir -p {root}/fleet",
                f"mount --bind {host.workdir} {root}/fleet",
            ]
        lines += hostfs.own_dev(root)  # never this machine's device nodes (hostfs.py)
        lines += [
            # a host of its own: nothing of the controller's /root (pyenv, ~/.ssh) shows through
            f"mount -t tmpfs -o mode=700,size={self.root_size} fleet-root {root}/root",
            f"mkdir -m 700 {root}/root/.ssh {root}/root/autodl-tmp",
            f"printf '%s\\n' {' '.join(q(k) for k in keys)} > {root}/root/.ssh/authorized_keys",
            f"chmod 600 {root}/root/.ssh/authorized_keys",
            f"mount -t tmpfs -o mode=755,size={self.ssd_size} fleet-ssd {root}/root/autodl-tmp",
            f"mount -t tmpfs -o mode=1777,size=1g fleet-tmp {root}/tmp",
            f"mount -t tmpfs -o mode=755,size=64m fleet-run {root}/run",
            f"mkdir -m 755 {root}/run/sshd",  # sshd's privilege separation directory
            f"mount -t tmpfs -o mode=755,size={self.root_size} fleet-home {root}/home",
        ]
        if "smallshm" in traits:  # Docker's default --shm-size: this host's /dev/shm only
            lines.append(f"mount -t tmpfs -o mode=1777,size={kinds_mod.SMALL_SHM} fleet-shm {root}/dev/shm")
        if not root:
            # /opt as the host's own: an overlay over this machine's (its wheels stay visible),
            # writes (`install --become`'s /opt/provision/envs) into a tmpfs of this host
            opt = host.workdir / "opt"
            opt.mkdir(exist_ok=True)
            lines += [
                f"mount -t tmpfs -o size={self.root_size} fleet-opt {opt}",
                f"mkdir {opt}/upper {opt}/work",
                f"mount -t overlay fleet-opt -o lowerdir=/opt,upperdir={opt}/upper,workdir={opt}/work /opt",
            ]
        for n, path in enumerate(binds):
            lines += [f"mkdir -p {q(path)}", f"mount --bind {q(str(host.workdir / f'bind{n}'))} {q(path)}"]
        if "noisy" in traits:
            rc = q(kinds_mod.noisy_rc())
            lines += [f"printf '%s' {rc} > {root}/root/.bashrc", f"printf '%s' {rc} > {root}/root/.profile"]
        if "hostile" in traits:
            peer = f"root@{self.controller_address}:{kinds_mod.HOSTILE_PEER_PORT}"
            lines += kinds_mod.hostile_script(root, host, peer, str(self.hostile_canary(host)))
        if "conda" in traits and self._torch_prefix:
            python, site = self._torch_prefix
            lines.append(f"sh -c {q(kinds_mod.conda_script(python, site))}")
            if "nopython" not in traits:  # else: installed, never initialised (not on PATH)
                # `conda init` puts the base env first on PATH for every (ssh) bash
                lines.append(f"echo 'export PATH={kinds_mod.CONDA_PREFIX}/bin:$PATH' >> {root}/root/.bashrc")
        lines += hostfs.own_etc(root, host.workdir)  # its own /etc/hosts, /etc/resolv.conf
        lines.append("echo ready")
        lines.append(f"exec chroot {root} sleep infinity" if root else "exec sleep infinity")
        return "\n".join(lines)

    def hostile_canary(self, host: FleetHost | str) -> Path:
        """The controller-side file a hostile host's templates would create (tests/fleet/kinds.py)."""
        host = self.host(host) if isinstance(host, str) else host
        return host.workdir / "CANARY"

    def hostile_on(self, host: FleetHost | str, attack: str, text: str = "") -> None:
        """Turn on one of a hostile host's flagged attacks (kinds.py: endless, endless-err, home,
        lie-path); `hostile_off` ends it."""
        self.ns_exec(host, f"printf '%s' {shlex.quote(text)} > {kinds_mod.HOSTILE_FLAGS}/{attack}")

    def hostile_off(self, host: FleetHost | str, attack: str) -> None:
        self.ns_exec(host, f"rm -f {kinds_mod.HOSTILE_FLAGS}/{attack}")

    def hostile_os_release(self, host: FleetHost | str, text: str | None) -> None:
        """What the host's /etc/os-release says (kinds.HOSTILE_OS_RELEASE); None: the real one again."""
        real = f"cat {kinds_mod.HOSTILE_OS_RELEASE}.orig"
        source = real if text is None else f"printf '%s' {shlex.quote(text)}"
        # in place (same inode): the bind mount over /etc/os-release shows it
        self.ns_exec(host, f"{source} > {kinds_mod.HOSTILE_OS_RELEASE}")

    def _start_keepers(self) -> None:
        for host in self._all_hosts():
            host.keeper = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    host.netns,
                    "unshare",
                    "--mount",
                    "--uts",
                    "--propagation",
                    "private",
                    "/bin/sh",
                    "-c",
                    self._keeper_script(host),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                preexec_fn=_pdeathsig,
            )
        for host in self._all_hosts():
            assert host.keeper and host.keeper.stdout and host.keeper.stderr
            line = host.keeper.stdout.readline()
            if line.strip() != b"ready":
                err = (
                    host.keeper.stderr.read().decode(errors="replace")
                    if host.keeper.poll() is not None
                    else ""
                )
                raise FleetError(
                    f"{host.name}: setting up its namespaces failed: {err.strip() or line!r}"
                )
            host.keeper.stdout.close()
            host.keeper.stderr.close()
        for host in self.hosts:
            if "sudo" in host.kinds:
                self._add_sudo_users(host)
            if "nopython" in host.kinds:
                self.remove_python(host)

    def _start_forwarder(self) -> None:
        """gateway+backnet hosts: the gateway address's port for each, forwarded to its sshd."""
        behind = [h for h in self.hosts if {"gateway", "backnet"} <= h.kinds]
        if not behind:
            return
        script = str(Path(__file__).with_name("portfwd.py"))
        pairs = [f"{h.port}={h.back_address}" for h in behind]
        self._forwarder = subprocess.Popen(
            ["ip", "netns", "exec", f"pf-{self.rid}-gw", sys.executable, script, behind[0].address, *pairs],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_pdeathsig,
        )  # fmt: skip
        assert self._forwarder.stdout is not None
        if self._forwarder.stdout.readline().strip() != b"ready":
            err = self._forwarder.stderr.read().decode(errors="replace") if self._forwarder.poll() is not None else ""
            raise FleetError(f"the gateway's port forwarder did not start: {err.strip()}")

    def _all_hosts(self) -> list[FleetHost]:
        return [*self.hosts, *([self.jump] if self.jump else [])]

    def _spawn_sshd(self, host: FleetHost) -> None:
        assert host.keeper is not None
        log = open(host.log_file, "ab")
        with log:
            host.sshd = subprocess.Popen(
                [
                    "nsenter",
                    "-t",
                    str(host.keeper.pid),
                    "-n",
                    "-m",
                    "-u",
                    *(["-r", "-w"] if host.rootfs else []),  # the host's own root filesystem
                    "--",
                    SSHD,
                    "-D",
                    "-e",
                    "-f",
                    host.in_host(host.workdir / "sshd_config"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={"PATH": SESSION_PATH, "LANG": "C.UTF-8"},
                preexec_fn=_pdeathsig,
            )

    def _wait_ready(self, hosts: list[FleetHost]) -> None:
        """Until every sshd sends its banner; bounded by start_timeout."""
        deadline = time.monotonic() + self.start_timeout
        pending = list(hosts)
        while pending:
            still = []
            for host in pending:
                assert host.sshd is not None
                if host.sshd.poll() is not None:
                    raise FleetError(
                        f"{host.name}: sshd exited with {host.sshd.returncode}; its log "
                        f"({host.log_file}):\n{self._log_tail(host)}"
                    )
                if not self._answers(host):
                    still.append(host)
            pending = still
            if pending:
                if time.monotonic() > deadline:
                    host = pending[0]
                    raise FleetError(
                        f"{len(pending)} host(s) did not answer on port 22 within {self.start_timeout:g}s "
                        f"(first: {host.name} {host.address}); sshd log:\n{self._log_tail(host)}"
                    )
                time.sleep(0.05)

    def _answers(self, host: FleetHost) -> bool:
        """sshd sent its banner. Hosts behind the jump host are asked from inside their own
        network (nothing here routes to them)."""
        if "behind-jump" in host.kinds:
            probe = f"exec 3<>/dev/tcp/{host.address}/{host.port} && head -c 4 <&3"
            proc = self.ns_exec(host, ["timeout", "2", "bash", "-c", probe], check=False)
            return proc.stdout.startswith("SSH-")
        try:
            with socket.create_connection((host.address, host.port), timeout=1) as sock:
                return sock.recv(64).startswith(b"SSH-")
        except OSError:
            return False

    def _add_sudo_users(self, host: FleetHost) -> None:
        script = kinds_mod.sudo_users_script(host, [self.public_key, self._passphrase_public])
        self.ns_exec(host, script)

    @staticmethod
    def _log_tail(host: FleetHost, lines: int = 20) -> str:
        try:
            return "\n".join(host.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Kill every process, delete namespaces, veths and bridge. Safe to call twice."""
        with self._mutex:
            if self._stopped:
                return
            self._stopped = True
        procs = [p for h in self._all_hosts() for p in (h.sshd, h.keeper) if p is not None]
        procs += [self._forwarder] if self._forwarder is not None else []
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        if self.rid:
            _remove_network(self.rid, [h.netns for h in self._all_hosts()])
        if self.jump and self.inner_subnet:
            _run(["ip", "route", "del", "unreachable", f"{self.inner_subnet}.0/24"], check=False)
        if self.workdir != Path() and self.workdir.is_dir():
            shutil.rmtree(self.workdir, ignore_errors=True)
        for lock in (self._lock, self._inner_lock, self._back_lock, *self._more_locks):
            if lock is not None:
                lock.unlink(missing_ok=True)
        with contextlib.suppress(ValueError):
            atexit.unregister(self.stop)

    # -- helpers for tests -------------------------------------------------------------------
    def host(self, name: str) -> FleetHost:
        for host in self._all_hosts():
            if host.name == name:
                return host
        raise KeyError(f"no fleet host {name!r}; have {', '.join(h.name for h in self.hosts)}")

    def provision_hosts(self, **overrides: Any) -> list:
        return [h.as_host(**overrides) for h in self.hosts]

    def write_inventory(
        self, path: str | os.PathLike, fmt: str = "ini", group: str = "gpus"
    ) -> Path:
        """An Ansible-style inventory of the fleet (`ini` or `yaml`)."""
        path = Path(path)
        if fmt == "ini":
            lines = [f"[{group}]"]
            for h in self.hosts:
                lines.append(
                    f"{h.name} ansible_host={h.address} ansible_port={h.port} ansible_user={h.user} "
                    f"ansible_ssh_private_key_file={h.key_file}"
                )
            path.write_text("\n".join(lines) + "\n")
        elif fmt == "yaml":
            import yaml

            doc = {
                "all": {
                    "children": {
                        group: {
                            "hosts": {
                                h.name: {
                                    "ansible_host": h.address,
                                    "ansible_port": h.port,
                                    "ansible_user": h.user,
                                    "ansible_ssh_private_key_file": h.key_file,
                                }
                                for h in self.hosts
                            }
                        }
                    }
                }
            }
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
        else:
            raise ValueError(f"inventory format must be 'ini' or 'yaml', got {fmt!r}")
        return path

    def write_known_hosts(self, path: str | os.PathLike) -> Path:
        """A known_hosts file with every host's current key (for `strict` tests)."""
        path = Path(path)
        path.write_text("".join(h.known_hosts_line() for h in self._all_hosts()))
        return path

    def write_ssh_config(self, path: str | os.PathLike, *, proxy_jump: bool = True) -> Path:
        """An ssh_config: alias `jump` (with its own key) and, with `proxy_jump`, every host
        behind it under its name with `ProxyJump jump`, as a user would write it."""
        lines = []
        if self.jump:
            lines += ["Host jump", f"  HostName {self.jump.address}", "  User root",
                      f"  IdentityFile {self.jump_key_file}", ""]  # fmt: skip
            if proxy_jump:
                for h in self.hosts:
                    if "behind-jump" in h.kinds:
                        lines += [f"Host {h.name}", f"  HostName {h.address}", f"  User {h.user}",
                                  f"  IdentityFile {h.key_file}", "  ProxyJump jump", ""]  # fmt: skip
        path = Path(path)
        path.write_text("\n".join(lines) + "\n")
        return path


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a fleet, print an inventory, wait for Ctrl-C")
    up.add_argument("-n", "--size", type=int, default=8)
    up.add_argument("--inventory", help="also write the inventory (INI) here")
    up.add_argument("--kinds", help="one per host, comma-separated; '+' joins kinds (noisy,conda+noisy)")
    timing = sub.add_parser("time", help="start and stop a fleet, print how long start took")
    timing.add_argument("-n", "--size", type=int, default=8)
    timing.add_argument("--repeat", type=int, default=1)
    sub.add_parser("cleanup", help="remove leftovers of fleets whose controller died")
    args = parser.parse_args(argv)
    if args.cmd == "cleanup":
        print("cleaned:", ", ".join(cleanup_stale()) or "nothing")
        return 0
    if args.cmd == "time":
        for _ in range(max(1, min(args.repeat, 10))):
            fleet = Fleet(args.size).start()
            stopping = time.monotonic()
            fleet.stop()
            print(
                f"{args.size} hosts: up in {fleet.start_seconds:.2f}s, "
                f"torn down in {time.monotonic() - stopping:.2f}s",
                flush=True,
            )
        return 0
    kinds = [set(k.split("+")) for k in args.kinds.split(",")] if args.kinds else None
    with Fleet(len(kinds) if kinds else args.size, kinds=kinds) as fleet:
        inventory = Path(args.inventory) if args.inventory else fleet.workdir / "inventory.ini"
        fleet.write_inventory(inventory)
        print(inventory.read_text(), end="")
        print(
            f"# {args.size} hosts up in {fleet.start_seconds:.2f}s; inventory {inventory}; Ctrl-C stops",
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
