"""Ansible's fact names (`ansible_*`, and `ansible_facts` without the prefix) from the agent's
facts document plus one shell probe — what `setup` returns on the same host, for the keys roles
read (tests/unit/test_ansible_facts.py compares them with `ansible -m setup`).

The probe is one round trip of plain POSIX shell; every line is `key=value`, values the host
sent are data (parsed here, never run).
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping
from typing import Any

# Root needs no sudo probe; for others `sudo -n true` (and `hostname -d`) get PROBE_SECONDS:
# both resolve the host's own name first, and a container whose name doesn't resolve (no DNS in
# reach) made each wait ~20 s. A sudo that timed out is reported (`sudo_probe_timed_out`).
PROBE_SECONDS = 3
# One shell round trip for what the agent's facts don't carry: who we are and what we may do,
# and the few files Ansible's setup reads that the agent doesn't.
PROBE = r"""
echo "user=$(id -un 2>/dev/null)"
echo "uid=$(id -u)"
echo "gid=$(id -g)"
echo "ruid=$(id -ru)"
echo "rgid=$(id -rg)"
echo "home=$HOME"
echo "shell=${SHELL:-}"
getent passwd "$(id -un 2>/dev/null)" 2>/dev/null | head -n1 | sed 's/^[^:]*:[^:]*:[^:]*:[^:]*:\([^:]*\):\([^:]*\):\(.*\)$/gecos=\1\npw_dir=\2\npw_shell=\3/'
for m in apt-get dnf yum apk zypper pacman; do if command -v $m >/dev/null 2>&1; then echo "pkg=$m"; break; fi; done
if [ "$(id -u)" = 0 ]; then :; elif command -v sudo >/dev/null 2>&1; then echo "sudo=1"
  if command -v timeout >/dev/null 2>&1; then timeout -k 1 PROBE_SECONDS sudo -n true >/dev/null 2>&1; rc=$?
  else sudo -n true >/dev/null 2>&1; rc=$?; fi
  if [ "$rc" = 0 ]; then echo "sudo_nopasswd=1"; elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "sudo_timeout=1"; fi
fi
[ -r /etc/debian_version ] && echo "debian_version=$(head -n1 /etc/debian_version)"
[ -r /etc/os-release ] && sed -n 's/^VERSION_CODENAME=/codename=/p;s/^UBUNTU_CODENAME=/ucodename=/p' /etc/os-release
echo "pid1=$(cat /proc/1/comm 2>/dev/null)"
[ -d /run/systemd/system ] && echo "systemd_run=1"
if [ -r /sys/fs/selinux/enforce ]; then echo "selinux=$(cat /sys/fs/selinux/enforce)"; fi
[ -d /sys/kernel/security/apparmor ] && echo "apparmor=1"
[ -r /etc/machine-id ] && echo "machine_id=$(head -n1 /etc/machine-id)"
[ -r /proc/sys/crypto/fips_enabled ] && echo "fips=$(cat /proc/sys/crypto/fips_enabled)"
echo "kernel_version=$(uname -v 2>/dev/null)"
echo "bits=$(getconf LONG_BIT 2>/dev/null)"
if command -v timeout >/dev/null 2>&1; then echo "domain=$(timeout -k 1 PROBE_SECONDS hostname -d 2>/dev/null)"; else echo "domain=$(hostname -d 2>/dev/null)"; fi
echo "date=$(date '+%Y-%m-%d %H:%M:%S %Z %z %s %A %w %W %j')"
if command -v lsb_release >/dev/null 2>&1; then lsb_release -a 2>/dev/null | sed 's/^\([^:]*\):[[:space:]]*/lsb_\1=/'
elif [ -r /etc/lsb-release ]; then sed 's/^DISTRIB_/lsbfile_/' /etc/lsb-release; fi
grep '^nameserver' /etc/resolv.conf 2>/dev/null | sed 's/^nameserver[[:space:]]*/ns=/'
if command -v base64 >/dev/null 2>&1; then echo "env64=$(env | base64 | tr -d '\n')"; fi
""".replace("PROBE_SECONDS", str(PROBE_SECONDS))
PKG = {
    "apt-get": "apt",
    "dnf": "dnf",
    "yum": "yum",
    "apk": "apk",
    "zypper": "zypper",
    "pacman": "pacman",
}
DISTRIBUTIONS = {
    "debian": "Debian",
    "ubuntu": "Ubuntu",
    "centos": "CentOS",
    "rhel": "RedHat",
    "fedora": "Fedora",
    "rocky": "Rocky",
    "almalinux": "AlmaLinux",
    "alpine": "Alpine",
    "arch": "Archlinux",
    "opensuse-leap": "openSUSE Leap",
    "amzn": "Amazon",
}
FAMILIES = {
    "debian": "Debian",
    "ubuntu": "Debian",
    "rhel": "RedHat",
    "centos": "RedHat",
    "fedora": "RedHat",
    "rocky": "RedHat",
    "almalinux": "RedHat",
    "amzn": "RedHat",
    "alpine": "Alpine",
    "arch": "Archlinux",
}
_MULTI = ("ns",)  # probe keys that repeat


def parse_probe(text: str) -> dict[str, Any]:
    info: dict[str, Any] = {"ns": []}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key = key.strip()
        if key in _MULTI:
            info[key].append(value.strip())
        else:
            info.setdefault(key, value.strip().strip('"'))
    return info


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _int(text: Any) -> int | None:
    return int(text) if isinstance(text, str) and text.isdigit() else None


def _env(probe: Mapping[str, Any]) -> dict[str, str] | None:
    raw = probe.get("env64")
    if not raw:
        return None
    try:
        text = base64.b64decode(raw).decode("utf-8", "replace")
    except ValueError:
        return None
    env: dict[str, str] = {}
    last = None
    for line in text.split("\n"):
        name, sep, value = line.partition("=")
        if sep and name and name.replace("_", "a").isalnum():
            env[name] = value
            last = name
        elif last is not None and line:  # a value with a newline in it
            env[last] += "\n" + line
    return env


def _ipv4(entry: Mapping[str, Any]) -> dict[str, Any]:
    address, prefix = entry.get("address"), entry.get("prefix")
    out: dict[str, Any] = {"address": address}
    try:
        net = ipaddress.ip_network(f"{address}/{prefix}", strict=False)
    except (TypeError, ValueError):
        return out
    out.update(
        broadcast=str(net.broadcast_address),
        netmask=str(net.netmask),
        network=str(net.network_address),
        prefix=str(prefix),
    )
    return out


def _network(facts: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    interfaces = _get(facts, "network", "interfaces")
    if not isinstance(interfaces, list):
        return out
    names: list[str] = []
    all4: list[str] = []
    all6: list[str] = []
    by_name: dict[str, dict[str, Any]] = {}
    for iface in interfaces:
        if not isinstance(iface, Mapping) or not iface.get("name"):
            continue
        name = str(iface["name"])
        names.append(name)
        kind = "loopback" if iface.get("kind") == "loopback" else "ether"
        entry: dict[str, Any] = {
            "device": name,
            "active": iface.get("operstate") in ("up", "unknown") or kind == "loopback",
            "mtu": iface.get("mtu"),
            "type": kind,
        }
        if iface.get("mac") and kind != "loopback":
            entry["macaddress"] = iface["mac"]
        v4 = [a for a in iface.get("ipv4") or [] if isinstance(a, Mapping)]
        if v4:
            entry["ipv4"] = _ipv4(v4[0])
            if len(v4) > 1:
                entry["ipv4_secondaries"] = [_ipv4(a) for a in v4[1:]]
        v6 = [a for a in iface.get("ipv6") or [] if isinstance(a, Mapping)]
        if v6:
            entry["ipv6"] = [
                {
                    "address": a.get("address"),
                    "prefix": str(a.get("prefix")),
                    "scope": a.get("scope"),
                }
                for a in v6
            ]
        if kind != "loopback":
            all4 += [str(a.get("address")) for a in v4]
            all6 += [str(a.get("address")) for a in v6]
        by_name[name] = entry
        out["ansible_" + name.replace("-", "_").replace(".", "_").replace(":", "_")] = entry
    out["ansible_interfaces"] = names
    out["ansible_all_ipv4_addresses"] = all4
    out["ansible_all_ipv6_addresses"] = all6
    for family, key in (("inet", "ansible_default_ipv4"), ("inet6", "ansible_default_ipv6")):
        route = next(
            (
                r
                for r in _get(facts, "network", "default_routes") or []
                if isinstance(r, Mapping) and r.get("family") == family and r.get("default")
            ),
            None,
        )
        default: dict[str, Any] = {}
        if route is not None and route.get("iface") in by_name:
            iface = by_name[route["iface"]]
            if family == "inet":
                default.update(iface.get("ipv4") or {})
            else:
                glob = [a for a in iface.get("ipv6") or [] if a.get("scope") == "global"]
                default.update(glob[0] if glob else {})
            default.update(
                interface=iface["device"],
                alias=iface["device"],
                gateway=route.get("gateway"),
                mtu=iface.get("mtu"),
                type=iface.get("type"),
            )
            if iface.get("macaddress"):
                default["macaddress"] = iface["macaddress"]
            if family == "inet6":
                default.pop("alias", None)
        out[key] = default
    return out


def _date_time(text: str) -> dict[str, str]:
    parts = text.split()
    if len(parts) < 9:
        return {}
    date, clock, tz, offset, epoch, weekday, wdnum, week, _yday = parts[:9]
    year, month, day = (date.split("-") + ["", "", ""])[:3]
    hour, minute, second = (clock.split(":") + ["", "", ""])[:3]
    return {
        "date": date,
        "day": day,
        "epoch": epoch,
        "epoch_int": epoch,
        "hour": hour,
        "minute": minute,
        "month": month,
        "second": second,
        "time": clock,
        "tz": tz,
        "tz_offset": offset,
        "weekday": weekday,
        "weekday_number": wdnum,
        "weeknumber": week,
        "year": year,
        "iso8601_basic_short": f"{year}{month}{day}T{hour}{minute}{second}",
        **_utc(epoch),
    }


def _utc(epoch: str) -> dict[str, str]:
    if not epoch.isdigit():
        return {}
    import datetime

    when = datetime.datetime.fromtimestamp(int(epoch), tz=datetime.timezone.utc)
    return {"iso8601": when.strftime("%Y-%m-%dT%H:%M:%SZ")}


def _service_mgr(probe: Mapping[str, Any]) -> str:
    pid1 = str(probe.get("pid1") or "")
    if probe.get("systemd_run") == "1" or pid1 == "systemd":
        return "systemd"
    if pid1 in ("init", ""):
        return "sysvinit"
    return pid1.rsplit("/", 1)[-1]


def _distribution(facts: Mapping[str, Any], probe: Mapping[str, Any], out: dict[str, Any]) -> None:
    os_info = facts.get("os") or {}
    dist_id = str(_get(os_info, "id") or "").lower()
    if dist_id:
        out["ansible_distribution"] = DISTRIBUTIONS.get(dist_id, dist_id.capitalize())
        like = str(_get(os_info, "id_like") or "").lower().split()
        family = FAMILIES.get(dist_id) or next((FAMILIES[x] for x in like if x in FAMILIES), None)
        out["ansible_os_family"] = family or out["ansible_distribution"]
        out["ansible_distribution_file_variety"] = out["ansible_os_family"]
    version = str(_get(os_info, "version_id") or "")
    debian = str(probe.get("debian_version") or "")
    if dist_id == "debian" and debian[:1].isdigit():
        version = debian  # Ansible reads /etc/debian_version: 12.11, not 12
    if version:
        out["ansible_distribution_version"] = version
        out["ansible_distribution_major_version"] = version.split(".")[0]
        if "." in version:
            out["ansible_distribution_minor_version"] = version.split(".")[1]
    codename = _get(os_info, "codename") or probe.get("codename") or probe.get("ucodename")
    if codename:
        out["ansible_distribution_release"] = codename
    lsb: dict[str, str] = {}
    for key, name in (
        ("codename", "Codename"),
        ("description", "Description"),
        ("id", "Distributor ID"),
        ("release", "Release"),
    ):
        value = probe.get(f"lsb_{name}")
        if value is None:
            file_key = {"id": "ID", "release": "RELEASE", "codename": "CODENAME"}.get(
                key, "DESCRIPTION"
            )
            value = probe.get(f"lsbfile_{file_key}")
            if isinstance(value, str):
                value = value.strip('"')
        if value is not None:
            lsb[key] = value
    if lsb.get("release"):
        lsb["major_release"] = lsb["release"].split(".")[0]
    out["ansible_lsb"] = lsb


def _python(facts: Mapping[str, Any], out: dict[str, Any]) -> None:
    python = facts.get("python")
    py_version = executable = None
    implementation = "CPython"
    if isinstance(python, Mapping):
        agent = python.get("agent") if isinstance(python.get("agent"), Mapping) else {}
        py_version = python.get("version") or agent.get("version")
        executable = python.get("executable") or agent.get("executable")
        implementation = str(agent.get("implementation") or implementation)
    elif isinstance(python, str):
        py_version = python
    if not py_version:
        return
    out["ansible_python_version"] = str(py_version)
    parts = (str(py_version).split(".") + ["0", "0"])[:3]
    numbers = [int(p) if p.isdigit() else 0 for p in parts]
    out["ansible_python"] = {
        "executable": executable,
        "has_sslcontext": True,
        "type": implementation.lower(),
        "version": {
            "major": numbers[0],
            "minor": numbers[1],
            "micro": numbers[2],
            "releaselevel": "final",
            "serial": 0,
        },
        "version_info": [*numbers, "final", 0],
    }


def ansible_names(facts: Mapping[str, Any], probe: Mapping[str, Any]) -> dict[str, Any]:
    """`ansible_*` variables where the agent's facts and the probe map onto Ansible's names."""
    out: dict[str, Any] = {"module_setup": True, "gather_subset": ["all"]}
    hostname = facts.get("hostname")
    fqdn = None
    if isinstance(hostname, Mapping):
        fqdn = hostname.get("fqdn")
        hostname = hostname.get("short") or hostname.get("name") or hostname.get("hostname")
    if hostname:
        out["ansible_hostname"] = str(hostname).split(".")[0]
        out["ansible_nodename"] = str(hostname)
        out["ansible_fqdn"] = fqdn or str(hostname)
    out["ansible_domain"] = str(probe.get("domain") or "")
    _distribution(facts, probe, out)
    os_info = facts.get("os") or {}
    for src, dst in (("kernel", "ansible_kernel"), ("arch", "ansible_architecture")):
        if _get(os_info, src):
            out[dst] = _get(os_info, src)
    if out.get("ansible_architecture"):
        out["ansible_machine"] = out["ansible_architecture"]
        out["ansible_userspace_architecture"] = out["ansible_architecture"]
    if probe.get("bits"):
        out["ansible_userspace_bits"] = str(probe["bits"])
    if probe.get("kernel_version"):
        out["ansible_kernel_version"] = probe["kernel_version"]
    out["ansible_system"] = "Linux"
    uptime = _get(os_info, "uptime_s")
    if isinstance(uptime, (int, float)):
        out["ansible_uptime_seconds"] = int(uptime)
    container = _get(os_info, "container", "type")
    vm = _get(os_info, "virtualization", "hypervisor")
    if container or vm:
        out["ansible_virtualization_type"] = container or vm
        out["ansible_virtualization_role"] = "guest"
    cpu = facts.get("cpu") or {}
    vcpus = _get(cpu, "logical_cpus")
    cores = _get(cpu, "physical_cores")
    sockets = _get(cpu, "sockets")
    if vcpus is not None:
        out["ansible_processor_vcpus"] = vcpus
    if cores is not None:
        out["ansible_processor_cores"] = cores // sockets if sockets else cores
    if sockets is not None:
        out["ansible_processor_count"] = sockets
    if isinstance(vcpus, int) and isinstance(cores, int) and cores:
        out["ansible_processor_threads_per_core"] = max(1, vcpus // cores)
    if _get(cpu, "model"):
        vendor = str(_get(cpu, "vendor") or "")
        processor: list[str] = []
        for index in range(vcpus if isinstance(vcpus, int) and vcpus > 0 else 1):
            processor += [str(index), vendor, str(_get(cpu, "model"))]
        out["ansible_processor"] = processor
    if _get(cpu, "usable_cpus") is not None:
        out["ansible_processor_nproc"] = _get(cpu, "usable_cpus")
    memory = facts.get("memory") or {}
    mb = 1 << 20
    total = _get(memory, "total_bytes")
    if isinstance(total, (int, float)):
        out["ansible_memtotal_mb"] = int(total // mb)
    _memory_mb(memory, out)
    _python(facts, out)
    setup_mounts = _get(facts, "disks", "setup_mounts")
    mounts = _get(facts, "disks", "mounts")
    if isinstance(setup_mounts, list):  # setup's own rules (agent/facts/setup_mounts.py)
        out["ansible_mounts"] = [dict(m) for m in setup_mounts if isinstance(m, Mapping)]
    elif isinstance(mounts, list):  # an older agent's facts
        out["ansible_mounts"] = [
            {
                "mount": m.get("mountpoint"),
                "fstype": m.get("fs_type"),
                "size_total": m.get("total_bytes"),
                "size_available": m.get("free_bytes"),
                "device": m.get("source"),
            }
            for m in mounts
            if isinstance(m, Mapping)
        ]
    out.update(_network(facts))
    if probe.get("ns"):
        out["ansible_dns"] = {"nameservers": list(probe["ns"])}
    if probe.get("user"):
        out["ansible_user_id"] = probe["user"]
    for key, name in (
        ("uid", "ansible_user_uid"),
        ("gid", "ansible_user_gid"),
        ("uid", "ansible_effective_user_id"),
        ("gid", "ansible_effective_group_id"),
        ("ruid", "ansible_real_user_id"),
        ("rgid", "ansible_real_group_id"),
    ):
        if _int(probe.get(key)) is not None:
            out[name] = _int(probe.get(key))
    # Ansible reads the password database, not the login's environment
    if probe.get("pw_dir") or probe.get("home"):
        out["ansible_user_dir"] = probe.get("pw_dir") or probe["home"]
    if probe.get("pw_shell") or probe.get("shell"):
        out["ansible_user_shell"] = probe.get("pw_shell") or probe["shell"]
    if "gecos" in probe:
        out["ansible_user_gecos"] = probe["gecos"]
    out["ansible_pkg_mgr"] = PKG.get(probe.get("pkg", ""), "unknown")
    out["ansible_service_mgr"] = _service_mgr(probe)
    enforce = probe.get("selinux")
    out["ansible_selinux"] = (
        {"status": "disabled"}
        if enforce is None
        else {"status": "enabled", "mode": "enforcing" if enforce == "1" else "permissive"}
    )
    out["ansible_apparmor"] = {"status": "enabled" if probe.get("apparmor") else "disabled"}
    if probe.get("machine_id"):
        out["ansible_machine_id"] = probe["machine_id"]
    out["ansible_fips"] = probe.get("fips") == "1"
    if probe.get("date"):
        out["ansible_date_time"] = _date_time(probe["date"])
    env = _env(probe)
    if env is not None:
        out["ansible_env"] = env
    return out


def namespaced(facts: Mapping[str, Any]) -> dict[str, Any]:
    """`ansible_facts`: the same facts with the `ansible_` prefix taken off (Ansible's
    namespace); facts a module returned without the prefix keep their name."""
    out: dict[str, Any] = {}
    for key, value in facts.items():
        if key == "ansible_facts":
            continue
        out[key[8:] if key.startswith("ansible_") else key] = value
    return out


def _memory_mb(memory: Mapping[str, Any], out: dict[str, Any]) -> None:
    """memfree_mb, swaptotal_mb, swapfree_mb and memory_mb (real / nocache / swap) from
    /proc/meminfo, each field in whole MiB as Ansible's Linux facts give them."""

    def mib(key: str) -> int | None:
        value = _get(memory, key)
        return int(value // (1 << 20)) if isinstance(value, (int, float)) else None

    total, free = mib("total_bytes"), mib("free_bytes")
    if free is None:  # facts from an older agent: MemAvailable is the nearest
        free = mib("available_bytes")
    buffers, cached = mib("buffers_bytes") or 0, mib("cached_bytes") or 0
    swap_total, swap_free = mib("swap_total_bytes"), mib("swap_free_bytes")
    if free is not None:
        out["ansible_memfree_mb"] = free
    if swap_total is not None:
        out["ansible_swaptotal_mb"] = swap_total
    if swap_free is not None:
        out["ansible_swapfree_mb"] = swap_free
    if total is None or free is None:
        return
    memory_mb: dict[str, Any] = {
        "real": {"total": total, "used": total - free, "free": free},
        "nocache": {"free": free + buffers + cached, "used": total - (free + buffers + cached)},
    }
    if swap_total is not None and swap_free is not None:
        memory_mb["swap"] = {
            "total": swap_total,
            "free": swap_free,
            "used": swap_total - swap_free,
            "cached": mib("swap_cached_bytes") or 0,
        }
    out["ansible_memory_mb"] = memory_mb
