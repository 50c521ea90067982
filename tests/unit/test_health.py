"""Health verdict rules on real-format GPU state, Xid attribution, and the agent command run
end to end against a fake nvidia-smi and a fake dmesg on PATH."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from provision.agent import health
from provision.agent.nvidia import smi_csv, smi_xml, xid

FIXTURES = Path(__file__).parent / "fixtures" / "nvidia"
REPO = Path(__file__).resolve().parents[2]


def xml_gpus(name):
    return smi_xml.parse((FIXTURES / name).read_text())["gpus"]


def verdict(gpu):
    return health.evaluate_gpu(gpu)


def test_h100_under_load_is_healthy_with_notes():
    (gpu,) = xml_gpus("h100-sxm-590.48.01.xml")
    f = verdict(gpu)
    assert f.verdict == health.HEALTHY and f.reasons == []
    assert any("busy" in n for n in f.notes) and any("19818 MiB" in n for n in f.notes)


def test_eight_gpu_box_verdicts_per_gpu():
    gpus = xml_gpus("v100s-8gpu-460.73.01.xml")
    results = [verdict(g) for g in gpus]
    assert [r.verdict for r in results] == [
        "healthy",
        "healthy",
        "healthy",
        "degraded",  # HW thermal slowdown at 88 C >= 87 C slowdown
        "healthy",  # SW power cap under load is normal
        "failing",  # uncorrectable ECC error since boot
        "degraded",  # x8 link
        "healthy",
    ]
    assert results[3].reasons == [
        "clocks slowed by hw_slowdown, hw_thermal_slowdown",
        "88 C is at or above the slowdown temperature (87 C)",
    ]
    assert "power cap" in results[4].notes[0]
    assert results[5].reasons[0] == "1 uncorrectable ECC error(s) since the driver loaded"
    assert "page retirement pending: reset the GPU to apply it" in results[5].reasons
    assert results[6].reasons == ["PCIe link runs x8 of x16"]
    assert health.worst(r.verdict for r in results) == "failing"


def test_idle_consumer_card_link_downshift_is_only_a_note():
    (gpu,) = xml_gpus("rtx4090-535.86.05.xml")
    f = verdict(gpu)
    assert f.verdict == "healthy"
    assert "PCIe gen 1 of 3 while idle (normal power saving)" in f.notes
    assert "ECC is disabled" in f.notes


def test_same_downshift_under_load_degrades():
    (gpu,) = xml_gpus("rtx4090-535.86.05.xml")
    gpu["utilization"]["gpu_pct"] = 98.0
    assert verdict(gpu).reasons == ["PCIe link runs gen 1 of 3 under load"]


def test_mig_and_persistence_are_notes():
    (gpu,) = xml_gpus("a100-sxm4-mig-510.47.03.xml")
    f = verdict(gpu)
    assert f.verdict == "healthy"
    assert any("MIG is enabled (2 instance(s))" in n for n in f.notes)
    assert any("persistence mode is off" in n for n in f.notes)


@pytest.mark.parametrize(
    "change, expected, reason",
    [
        (lambda g: g["remapped_rows"].update(failure=True), "failing", "row remapping failed"),
        (lambda g: g["remapped_rows"].update(pending=True), "degraded", "row remap is pending"),
        (
            lambda g: g["retired_pages"].update(single_bit=58, double_bit=2),
            "failing",
            "60 retired memory pages",
        ),
        (
            lambda g: g["ecc"]["aggregate"].update(uncorrected=3),
            "degraded",
            "in the GPU's lifetime",
        ),
        (
            lambda g: g["power"].update(limit_w=500.0),
            "degraded",
            "power limit lowered to 500 W (default 700 W)",
        ),
        (lambda g: g["temperature"].update(margin_c=-1.0), "degraded", "no thermal headroom"),
        (lambda g: g["errors"].append("gpu_temp: GPU is lost"), "failing", "GPU is lost"),
        (
            lambda g: g.update(clock_event_reasons=["hw_power_brake_slowdown"]),
            "degraded",
            "hw_power_brake",
        ),
    ],
)
def test_rules(change, expected, reason):
    (gpu,) = xml_gpus("h100-sxm-590.48.01.xml")
    change(gpu)
    f = verdict(gpu)
    assert f.verdict == expected
    assert any(reason in r for r in f.reasons), f.reasons


def lost_gpu_state():
    text = (FIXTURES / "a100x4-570.86.15-lost-gpu.csv").read_text()
    fields = (
        next(line for line in text.splitlines() if line.startswith("# fields:"))
        .split(":", 1)[1]
        .strip()
        .split(",")
    )
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    parsed = smi_csv.parse(body, fields)
    return {"gpus": parsed["gpus"], "lost_gpus": parsed["errors"], "pci_devices": []}


def test_xids_are_attributed_to_gpus_by_pci_address():
    state = lost_gpu_state()
    kernel = xid.parse_kernel_log((FIXTURES / "kernel-xid.log").read_text().splitlines())
    health._attach_xids(state["gpus"], kernel)
    by_index = {g["index"]: health.evaluate_gpu(g) for g in state["gpus"]}
    assert by_index[0].verdict == "healthy"  # Xid 31 and 13: the application's faults
    assert any("Xid 31" in n for n in by_index[0].notes)
    assert by_index[1].verdict == "degraded"  # 63 row remap recorded, 94 contained error
    assert by_index[3].verdict == "failing"  # 48 double-bit ECC
    assert by_index[3].reasons[0].startswith("Xid 48 x1: double-bit")

    host = health.evaluate_host({}, state, kernel, expect_gpus=4)
    assert host.verdict == "failing"
    assert "3 GPU(s) visible, 4 expected" in host.reasons
    assert "GPU 0000:47:00.0: Unknown Error" in host.reasons
    assert any(r.startswith("Xid 79 on 0000:47:00, not a visible GPU") for r in host.reasons)
    assert any("SXid 11012" in r for r in host.reasons)  # fatal NVSwitch error
    assert any("SXid 12028" in n for n in host.notes)  # non-fatal: a note


def test_host_rules():
    state = {"gpus": [{"index": 0}], "pci_devices": []}
    kernel = {"events": [], "sxid": []}
    gib = 1 << 30
    host = {
        "load_average": [9.5, 8.0, 7.0],
        "cpu": {"effective_cpus": 4},
        "memory": {
            "effective_total_bytes": 64 * gib,
            "effective_available_bytes": 2 * gib,
            "shm": {"total_bytes": 64 << 20},
        },
        "data_dir": {"path": "/root/autodl-tmp", "free_bytes": gib // 2, "network": False},
    }
    f = health.evaluate_host(host, state, kernel, None)
    assert f.verdict == "failing"
    assert f.reasons[0] == "load average 9.5 on 4 usable CPU(s)"
    assert f.reasons[1] == "only 2.0 GiB of 64.0 GiB memory available"
    assert f.reasons[2].startswith("/dev/shm is only 0.1 GiB")
    assert f.reasons[3] == "data dir /root/autodl-tmp has only 0.5 GiB free"
    roomy = copy.deepcopy(host)
    roomy.update(load_average=[1.0, 1.0, 1.0], data_dir={"path": "/data", "free_bytes": 500 * gib})
    roomy["memory"].update(effective_available_bytes=40 * gib, shm={"total_bytes": 32 * gib})
    assert health.evaluate_host(roomy, state, kernel, None).verdict == "healthy"


def test_gpus_on_the_bus_but_unreadable_is_failing():
    state = {
        "gpus": [],
        "pci_devices": [{"address": "0000:3b:00.0"}],
        "reason": "1 NVIDIA GPU(s) on the PCI bus but ...",
    }
    f = health.evaluate_host({}, state, {"events": [], "sxid": []}, None)
    assert f.verdict == "failing" and f.reasons == ["1 NVIDIA GPU(s) on the PCI bus but ..."]


def write_program(path, body):
    path.write_text(body)
    path.chmod(0o755)


def test_kernel_log_falls_back_from_a_refused_dmesg_to_a_log_file(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_program(
        bin_dir / "dmesg",
        "#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n",
    )
    write_program(
        bin_dir / "journalctl",
        "#!/bin/sh\necho 'No journal files were found.'\necho '-- No entries --'\n",
    )
    monkeypatch.setenv("PATH", str(bin_dir))
    kern = tmp_path / "kern.log"
    kern.write_text((FIXTURES / "journal-fallen-off-570.log").read_text())
    log = health.read_kernel_log(log_files=[str(tmp_path / "missing.log"), str(kern)])
    assert log["source"] == str(kern) and len(log["lines"]) == 7
    nothing = health.read_kernel_log(log_files=[str(tmp_path / "missing.log")])
    assert nothing["lines"] is None
    assert (
        "Operation not permitted" in nothing["reason"] and "No journal files" in nothing["reason"]
    )


def test_health_command_end_to_end(tmp_path):
    """`python -m provision.agent health` as the controller runs it, with nvidia-smi and dmesg
    replaced by programs answering from the fixtures."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_program(
        bin_dir / "nvidia-smi",
        f'#!/bin/sh\nexec "{sys.executable}" "{FIXTURES / "fake_nvidia_smi.py"}" "$@"\n',
    )
    write_program(bin_dir / "dmesg", "#!/bin/sh\ncat '%s'\n" % (FIXTURES / "kernel-xid.log"))
    env = dict(os.environ)
    env.update(
        PATH=f"{bin_dir}:/usr/bin:/bin",
        PROVISION_AGENT_NO_NVML="1",
        FAKE_SMI_CSV=str(FIXTURES / "a100x4-570.86.15-lost-gpu.csv"),
        PYTHONPATH=str(REPO),
    )
    request = json.dumps({"expect_gpus": 4, "data_dir": str(tmp_path)})
    proc = subprocess.run(
        [sys.executable, "-m", "provision.agent", "health"],
        input=(request + "\n").encode(),
        capture_output=True,
        env=env,
        cwd=str(tmp_path),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    (line,) = proc.stdout.decode().splitlines()
    result = json.loads(line)["data"]
    assert result["verdict"] == "failing"
    assert result["nvidia"]["source"] == "nvidia-smi-csv"
    assert result["kernel_log"]["source"] == "dmesg" and result["kernel_log"]["readable"] is True
    assert [g["verdict"] for g in result["gpus"]] == ["healthy", "degraded", "failing"]
    assert "GPU 3: Xid 48 x1: double-bit (uncorrectable) ECC error" in result["reasons"]
    assert "host: 3 GPU(s) visible, 4 expected" in result["reasons"]
    assert result["host"]["data_dir"]["path"] == str(tmp_path)
    assert result["gpus"][0]["xid_events"][0]["xid"] in (31, 13)
