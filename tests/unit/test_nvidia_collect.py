"""Source order and fallbacks of provision.agent.nvidia.collect(), with a real nvidia-smi
stand-in program (fixtures/nvidia/fake_nvidia_smi.py) run as a subprocess."""

import os
import sys
from pathlib import Path

import pytest

from provision.agent import nvidia
from provision.agent.nvidia import topology

FIXTURES = Path(__file__).parent / "fixtures" / "nvidia"


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """Put a fake `nvidia-smi` first on PATH and keep NVML out of the way."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "nvidia-smi"
    program.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{FIXTURES / "fake_nvidia_smi.py"}" "$@"\n'
    )
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("PROVISION_AGENT_NO_NVML", "1")
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_SMI_LOG", str(log))
    for name in ("FAKE_SMI_XML", "FAKE_SMI_CSV", "FAKE_SMI_APPS", "FAKE_SMI_TOPO"):
        monkeypatch.delenv(name, raising=False)

    def calls():
        return log.read_text().splitlines() if log.exists() else []

    return calls


def test_xml_is_used_when_nvml_is_missing(fake_smi, monkeypatch):
    monkeypatch.setenv("FAKE_SMI_XML", str(FIXTURES / "v100s-8gpu-460.73.01.xml"))
    monkeypatch.setenv("FAKE_SMI_TOPO", str(FIXTURES / "topo-dgx-a100.txt"))
    state = nvidia.collect(smi_timeout=20)
    assert state["source"] == "nvidia-smi-xml"
    assert state["driver_version"] == "460.73.01" and state["cuda_driver_version"] == "11.2"
    assert len(state["gpus"]) == 8
    assert state["attempts"][0]["source"] == "nvml"
    assert "reason" not in state
    # more than one GPU and no NVML: the NVLink summary comes from `topo -m`
    assert state["nvlink"]["source"] == "nvidia-smi topo -m" and state["nvlink"]["connected"]
    assert fake_smi() == ["-q -x", "topo -m"]


def test_csv_fallback_retries_without_fields_an_old_driver_rejects(fake_smi, monkeypatch):
    monkeypatch.setenv("FAKE_SMI_CSV", str(FIXTURES / "rtx2080super-465.27.csv"))
    state = nvidia.collect(with_processes=False, smi_timeout=20)
    assert state["source"] == "nvidia-smi-csv"
    assert state["driver_version"] == "465.27"
    (gpu,) = state["gpus"]
    assert gpu["name"] == "NVIDIA GeForce RTX 2080 SUPER"
    assert gpu["clock_event_reasons"] == ["gpu_idle"]
    queries = [c for c in fake_smi() if c.startswith("--query-gpu")]
    # compute_cap, memory.reserved, power.draw.instant, 4x remapped_rows and the event-reason
    # rename were each refused once, then the query went through
    assert len(queries) == 9
    assert "clocks_throttle_reasons.active" in queries[-1] and "compute_cap" not in queries[-1]
    assert state["attempts"][1]["source"] == "nvidia-smi -q -x"
    assert "couldn't communicate" in state["attempts"][1]["error"]


def test_csv_with_a_lost_gpu_and_processes(fake_smi, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_SMI_CSV", str(FIXTURES / "a100x4-570.86.15-lost-gpu.csv"))
    apps = tmp_path / "apps.csv"
    apps.write_text("GPU-00a1b2c3-d4e5-4f60-8a7b-9c0d1e2f3a40, 4242, python, 71000\n")
    monkeypatch.setenv("FAKE_SMI_APPS", str(apps))
    state = nvidia.collect(smi_timeout=20)
    assert [g["index"] for g in state["gpus"]] == [0, 1, 3]
    assert state["lost_gpus"] == [{"pci_bus_id": "0000:47:00.0", "error": "Unknown Error"}]
    assert state["gpus"][0]["processes"] == [
        {"pid": 4242, "name": "python", "type": "C", "used_mib": 71000}
    ]
    assert state["gpus"][1]["processes"] == []


def test_no_driver_gives_gpus_empty_and_a_reason(fake_smi):
    state = nvidia.collect(smi_timeout=20)
    assert state["gpus"] == [] and state["source"] is None
    assert "couldn't communicate with the NVIDIA driver" in state["reason"]


def test_no_nvidia_smi_at_all(monkeypatch):
    monkeypatch.setenv("PROVISION_AGENT_NO_NVML", "1")
    monkeypatch.setattr(nvidia, "find_nvidia_smi", lambda: None)
    monkeypatch.setattr(nvidia, "nvidia_pci_devices", lambda sys_root="/sys": [])
    monkeypatch.setattr(nvidia, "kernel_module_version", lambda path="": None)
    state = nvidia.collect()
    assert state["gpus"] == []
    assert state["reason"].startswith("no NVIDIA GPU or driver found")
    assert "nvidia-smi not found" in state["reason"]


def test_reason_names_gpus_on_the_pci_bus_without_a_driver():
    pci = [{"address": "0000:3b:00.0", "device_id": "0x2330", "driver": ""}]
    attempts = [{"source": "nvidia-smi", "error": "nvidia-smi not found on PATH or in /usr/bin"}]
    reason = nvidia.no_gpu_reason(attempts, pci, None)
    assert reason.startswith(
        "1 NVIDIA GPU(s) on the PCI bus but the NVIDIA kernel module is not loaded"
    )


def test_pci_scan_and_kernel_module_version_from_files(tmp_path):
    for address, vendor, pci_class in (
        ("0000:3b:00.0", "0x10de", "0x030200"),  # H100: 3D controller
        ("0000:3b:00.1", "0x10de", "0x040300"),  # its audio function: not a GPU
        ("0000:00:1f.0", "0x8086", "0x060100"),
    ):
        device = tmp_path / "bus" / "pci" / "devices" / address
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text(pci_class + "\n")
        (device / "device").write_text("0x2330\n")
    found = nvidia.nvidia_pci_devices(str(tmp_path))
    assert [d["address"] for d in found] == ["0000:3b:00.0"] and found[0]["driver"] == ""
    version = tmp_path / "version"
    version.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
        "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n"
    )
    assert nvidia.kernel_module_version(str(version)) == "535.104.05"
    open_module = tmp_path / "open"
    open_module.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build  "
        "(dvs-builder@U22-I3-B10-02-5)  Mon Jun  2 13:13:04 UTC 2025\n"
    )
    assert nvidia.kernel_module_version(str(open_module)) == "570.158.01"


def test_topology_matrices():
    dgx = topology.parse_topo_matrix((FIXTURES / "topo-dgx-a100.txt").read_text())
    assert sorted(dgx["peers"]) == [str(i) for i in range(8)]
    assert dgx["peers"]["0"] == {str(i): 12 for i in range(1, 8)}
    assert dgx["connected"] is True
    pcie = topology.parse_topo_matrix((FIXTURES / "topo-2x1080ti-pcie.txt").read_text())
    assert pcie["peers"] == {} and pcie["connected"] is False
    assert pcie["paths"] == {"0": {"1": "PHB"}, "1": {"0": "PHB"}}


def test_libcuda_is_asked_only_where_there_is_a_sign_of_a_driver(monkeypatch):
    asked = []
    monkeypatch.setattr(nvidia, "cuda_version_from_libcuda", lambda: asked.append(1) or "12.4")
    monkeypatch.setenv("PROVISION_AGENT_NO_NVML", "1")
    monkeypatch.setattr(nvidia, "find_nvidia_smi", lambda: None)
    monkeypatch.setattr(nvidia, "nvidia_pci_devices", lambda sys_root="/sys": [])
    monkeypatch.setattr(nvidia, "kernel_module_version", lambda path="": None)
    monkeypatch.setattr(nvidia.os.path, "exists", lambda path: False)  # no /dev/nvidiactl
    state = nvidia.collect()
    assert asked == [] and state["cuda_driver_version"] is None
    monkeypatch.setattr(nvidia, "kernel_module_version", lambda path="": "550.54.15")
    state = nvidia.collect()
    assert asked == [1] and state["cuda_driver_version"] == "12.4"
    assert state["driver_version"] == "550.54.15"


def test_query_may_block_with_nvidia_smi_or_pynvml_only(fake_smi, monkeypatch, tmp_path):
    assert nvidia.query_may_block()  # the fake nvidia-smi is on PATH
    monkeypatch.setattr(nvidia, "find_nvidia_smi", lambda: None)
    assert not nvidia.query_may_block()  # PROVISION_AGENT_NO_NVML is set by fake_smi
    monkeypatch.delenv("PROVISION_AGENT_NO_NVML")
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site)])
    assert not nvidia.query_may_block()
    (site / "pynvml.py").write_text("")
    assert nvidia.query_may_block()


def test_no_parser_is_imported_on_a_host_without_nvidia(tmp_path):
    """A fresh interpreter: nvidia.collect() on a GPU-less host leaves the nvidia-smi parsers,
    NVML wrapper, subprocess and ctypes unimported."""
    import subprocess

    code = (
        "import sys\n"
        "from provision.agent import nvidia\n"
        "state = nvidia.collect()\n"
        "heavy = ['provision.agent.nvidia.' + m for m in ('smi_xml', 'smi_csv', 'topology', 'nvml')]\n"
        "heavy += ['subprocess', 'ctypes', 're', 'xml.etree.ElementTree']\n"
        "print(sorted(m for m in heavy if m in sys.modules), state['gpus'])\n"
    )
    if nvidia.find_nvidia_smi() or nvidia._driver_signs(
        {"pci_devices": nvidia.nvidia_pci_devices()}
    ):
        pytest.skip("this machine has NVIDIA hardware or nvidia-smi")
    env = dict(os.environ, PROVISION_AGENT_NO_NVML="1", PATH="/usr/bin:/bin")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True
    )
    assert out.stdout.strip() == "[] []", out.stderr
