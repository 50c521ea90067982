"""OS, container, VM and rental-platform detection from files in a fake root."""

import socket

from provision.agent.facts import system


def write(root, relative, text=""):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


UBUNTU = """PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
ID=ubuntu
ID_LIKE=debian
"""


def test_os_release_and_kubernetes_container(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    write(tmp_path, "etc/os-release", UBUNTU)
    write(tmp_path, "proc/uptime", "350735.47 234388.90\n")
    write(
        tmp_path,
        "proc/1/cgroup",
        "0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-4f2a.scope\n",
    )
    write(
        tmp_path,
        "proc/self/mountinfo",
        "2310 1870 0:312 / / rw,relatime - overlay overlay rw,upperdir=/x/diff\n",
    )
    info = system.os_info(str(tmp_path))
    assert (info["id"], info["version_id"], info["id_like"]) == ("ubuntu", "22.04", "debian")
    assert info["pretty_name"] == "Ubuntu 22.04.4 LTS" and info["uptime_s"] == 350735
    assert info["container"]["type"] == "kubernetes"
    assert "/ is an overlay filesystem" in info["container"]["evidence"]


def test_docker_and_podman_markers(tmp_path):
    write(tmp_path, ".dockerenv")
    assert system.detect_container(str(tmp_path))["type"] == "docker"
    other = tmp_path / "podman"
    write(other, "run/.containerenv")
    assert system.detect_container(str(other))["type"] == "podman"
    bare = tmp_path / "bare"
    write(bare, "proc/1/cgroup", "0::/init.scope\n")
    assert system.detect_container(str(bare)) == {
        "is_container": False,
        "type": None,
        "evidence": [],
    }


def test_vm_from_cpu_flag_and_dmi(tmp_path):
    write(
        tmp_path,
        "proc/cpuinfo",
        "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr hypervisor avx2\n\n",
    )
    write(tmp_path, "sys/class/dmi/id/sys_vendor", "Alibaba Cloud\n")
    write(tmp_path, "sys/class/dmi/id/product_name", "Alibaba Cloud ECS\n")
    vm = system.detect_vm(str(tmp_path))
    assert vm["is_vm"] is True and vm["hypervisor"] == "alibaba"
    assert vm["evidence"][0] == "cpu flag 'hypervisor'"
    metal = tmp_path / "metal"
    write(metal, "proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr avx2\n\n")
    write(metal, "sys/class/dmi/id/sys_vendor", "Supermicro\n")
    assert system.detect_vm(str(metal))["is_vm"] is False


def test_provider_from_platform_layouts(tmp_path, monkeypatch):
    monkeypatch.delenv("RUNPOD_POD_ID", raising=False)
    monkeypatch.delenv("VAST_CONTAINERLABEL", raising=False)
    (tmp_path / "root" / "autodl-tmp").mkdir(parents=True)
    assert system.detect_provider(str(tmp_path)) == {
        "name": "autodl",
        "evidence": ["/root/autodl-tmp exists"],
    }
    monkeypatch.setenv("RUNPOD_POD_ID", "abc123")
    assert system.detect_provider(str(tmp_path / "none"))["name"] == "runpod"


def test_hostname_is_the_plain_name():
    assert system.hostname() == socket.gethostname()


def test_first_container_word_is_what_the_regular_expression_found():
    import re

    pattern = re.compile(r"(docker|kubepods|containerd|libpod|podman|lxc|crio|garden)")
    for text in (
        "0::/system.slice/containerd.service\n",
        "12:pids:/kubepods/besteffort/pod1/docker-abc\n",
        "0::/machine.slice/libpod-123.scope\n",
        "0::/lxc.payload.c1\n1:name=systemd:/docker/x",
        "0::/init.scope\n",
        "",
    ):
        match = pattern.search(text)
        assert system._first_word(text, system._CONTAINER_CGROUP_WORDS) == (
            match.group(1) if match else None
        )


def test_hypervisor_flag_only_from_the_flags_line(tmp_path):
    cpuinfo = tmp_path / "proc" / "cpuinfo"
    cpuinfo.parent.mkdir(parents=True)
    cpuinfo.write_text("model name\t: hypervisor-branded CPU\nflags\t\t: fpu vme sse2\n\n")
    assert system.detect_vm(str(tmp_path))["evidence"] == []
    cpuinfo.write_text("model name\t: X\nflags\t\t: fpu hypervisor sse2\n\nflags\t: fpu\n")
    assert system.detect_vm(str(tmp_path))["evidence"] == ["cpu flag 'hypervisor'"]
