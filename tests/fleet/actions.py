"""What tests do to fleet hosts from outside SSH: run as root in a host's namespaces, pull its
cable, shape its link, restart its sshd, replace its key, give a user a password, hide python.
Mixed into Fleet (tests/fleet/fleet.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from typing import TYPE_CHECKING

from netns import (
    _DEAD_OCTET,
    _UNOWNED_MAC,
    SESSION_PATH,
    FleetError,
    ShapingUnavailable,
    _netem_available,
    _run,
)

if TYPE_CHECKING:
    from fleet import FleetHost


class HostActions:
    def ns_exec(
        self,
        host: FleetHost | str,
        cmd: str | list[str],
        check: bool = True,
        input: str | None = None,
    ) -> subprocess.CompletedProcess:
        """Run as root inside the host's network, mount and UTS namespaces, outside SSH."""
        host = self.host(host) if isinstance(host, str) else host
        assert host.keeper is not None
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        chroot = ["-r", "-w"] if host.rootfs else []  # inside the host's own root filesystem
        full = ["nsenter", "-t", str(host.keeper.pid), "-n", "-m", "-u", *chroot, "--", *argv]
        proc = subprocess.run(
            full, input=input, capture_output=True, text=True, env={"PATH": SESSION_PATH}
        )
        if check and proc.returncode != 0:
            raise FleetError(
                f"{host.name}: {cmd!r} failed ({proc.returncode}): {proc.stderr.strip()}"
            )
        return proc

    def link_down(self, host: FleetHost | str) -> None:
        """Pull the host's cable (from inside its namespace): packets to it vanish, connects time out."""
        self.ns_exec(host, "ip link set eth0 down")

    def link_up(self, host: FleetHost | str) -> None:
        host = self.host(host) if isinstance(host, str) else host
        self.ns_exec(
            host, f"ip link set eth0 up && ip route replace default via {self.controller_address}"
        )

    @property
    def netem_available(self) -> bool:
        return _netem_available()

    def shape(
        self, host: FleetHost | str, rate: str | None = "200mbit", delay: str | None = "10ms"
    ) -> None:
        """Limit the host's link in BOTH directions: the qdisc goes on the root-namespace veth end
        (controller -> host) and on the host's eth0 (host -> controller). So `delay` is added once
        each way (RTT grows by 2 x delay). Delay needs tc netem; rate alone uses tbf, which every
        kernel with traffic control has."""
        host = self.host(host) if isinstance(host, str) else host
        if delay:
            if not _netem_available():
                raise ShapingUnavailable(
                    "tc netem is not available in this kernel (CONFIG_NET_SCH_NETEM is off and "
                    "modules cannot be loaded), so no delay can be added. Rate-only shaping works: "
                    "fleet.shape(host, rate='200mbit', delay=None)."
                )
            qdisc = f"netem delay {delay}" + (f" rate {rate}" if rate else "") + " limit 100000"
        elif rate:
            qdisc = f"tbf rate {rate} burst 256kb latency 100ms"
        else:
            raise ValueError("shape() needs a rate, a delay or both")
        _run(["tc", "qdisc", "replace", "dev", host.veth, "root", *qdisc.split()])
        self.ns_exec(host, f"tc qdisc replace dev eth0 root {qdisc}")

    def unshape(self, host: FleetHost | str) -> None:
        host = self.host(host) if isinstance(host, str) else host
        _run(["tc", "qdisc", "del", "dev", host.veth, "root"], check=False)
        self.ns_exec(host, "tc qdisc del dev eth0 root", check=False)

    def restart_sshd(self, host: FleetHost | str) -> None:
        """Stop and start the host's sshd; files on the host (its tmpfs) are kept."""
        host = self.host(host) if isinstance(host, str) else host
        if host.sshd is not None:
            host.sshd.kill()
            host.sshd.wait(timeout=5)
        # the listener is gone once the process is; wait for a new banner, not the old one
        self._spawn_sshd(host)
        self._wait_ready([host])

    def replace_host_key(self, host: FleetHost | str) -> str:
        """Give the host a new host key (as a re-imaged rental would) and restart its sshd.
        Returns the new fingerprint."""
        host = self.host(host) if isinstance(host, str) else host
        self._new_host_key(host)
        # a re-imaged machine keeps no connection either: its sessions (and so any SSH
        # connection kept across runs, --persist) end with the old sshd
        sessions = _descendants(host.sshd.pid) if host.sshd is not None else []
        self.restart_sshd(host)
        for pid in sessions:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return host.host_key_fingerprint

    def dead_address(self) -> str:
        """An address in the fleet subnet where connects TIME OUT (not refused): it has a
        permanent neighbour entry to a MAC nobody owns, so SYNs go out and nothing answers.
        (For "connection refused", use a fleet host's address with a port nothing listens on.)"""
        address = f"{self.subnet}.{_DEAD_OCTET}"
        if not self._dead_neigh:
            _run(
                [
                    "ip",
                    "neigh",
                    "replace",
                    address,
                    "lladdr",
                    _UNOWNED_MAC,
                    "dev",
                    self.bridge,
                    "nud",
                    "permanent",
                ]
            )
            self._dead_neigh = True
        return address

    def set_password(self, host: FleetHost | str, user: str, password: str) -> None:
        """Enable password auth for `user` on this host only. The machine's /etc/passwd and
        /etc/shadow are untouched: the host gets private copies, bind-mounted in its own mount
        namespace. A user that does not exist is created (home in the host's own /home).
        The password reaches openssl on stdin, never argv."""
        host = self.host(host) if isinstance(host, str) else host
        hashed = _run(["openssl", "passwd", "-6", "-stdin"], input=password + "\n").stdout.strip()
        files = {name: host.workdir / name for name in ("passwd", "shadow", "group")}
        first = not files["passwd"].exists()
        if first:
            for name, path in files.items():
                shutil.copyfile(f"/etc/{name}", path)
            os.chmod(files["shadow"], 0o600)
        passwd = files["passwd"].read_text().splitlines()
        shadow = files["shadow"].read_text().splitlines()
        group = files["group"].read_text().splitlines()
        if not any(line.split(":")[0] == user for line in passwd):
            uids = [int(line.split(":")[2]) for line in passwd if line.count(":") >= 6]
            uid = max([u for u in uids if 1000 <= u < 60000], default=999) + 1
            passwd.append(f"{user}:x:{uid}:{uid}::/home/{user}:/bin/bash")
            group.append(f"{user}:x:{uid}:")
            shadow.append(f"{user}:!:19000:0:99999:7:::")
            home = f"/home/{user}"
            setup_home = f"mkdir -p {home}/.ssh && chown -R {uid}:{uid} {home} && chmod 700 {home}"
        else:
            setup_home = ""
        shadow = [
            ":".join([f[0], hashed, *f[2:]]) if f[0] == user else line
            for line in shadow
            for f in [line.split(":")]
        ]
        # rewrite in place: a bind mount follows the inode, a new file would not be seen
        for name, lines in (("passwd", passwd), ("shadow", shadow), ("group", group)):
            with open(files[name], "r+") as fh:
                fh.truncate(0)
                fh.write("\n".join(lines) + "\n")
        if first:
            mounts = " && ".join(
                f"mount --bind {files[n]} /etc/{n}" for n in ("passwd", "shadow", "group")
            )
            self.ns_exec(host, mounts)
        if setup_home:
            self.ns_exec(host, setup_home)
        host.password_users[user] = password
        self._write_sshd_config(host, password=True, root_password="root" in host.password_users)
        self.restart_sshd(host)

    def remove_python(self, host: FleetHost | str) -> None:
        """Make python3 vanish from the host (an overlay with whiteouts over /usr/bin, in the
        host's mount namespace only). Undo with restore_python()."""
        host = self.host(host) if isinstance(host, str) else host
        self.ns_exec(
            host,
            "set -e; mkdir -p /run/nopython/upper /run/nopython/work; "
            "for f in /usr/bin/python3 /usr/bin/python3.*; do "
            '  [ -e "$f" ] || [ -L "$f" ] || continue; mknod "/run/nopython/upper/${f##*/}" c 0 0; done; '
            "mount -t overlay nopython -o lowerdir=/usr/bin,upperdir=/run/nopython/upper,"
            "workdir=/run/nopython/work /usr/bin; "
            "! command -v python3 >/dev/null",
        )

    def restore_python(self, host: FleetHost | str) -> None:
        host = self.host(host) if isinstance(host, str) else host
        # lazy: the shell running this (/bin/sh is /usr/bin/sh) executes from the overlay
        self.ns_exec(
            host, "umount -l /usr/bin && rm -rf /run/nopython && command -v python3 >/dev/null"
        )


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (the host's sshd listener: its connections and their sessions)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
