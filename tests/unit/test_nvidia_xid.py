"""Xid / SXid parsing from real-format dmesg and journalctl lines."""

from pathlib import Path

from provision.agent.nvidia import xid

FIXTURES = Path(__file__).parent / "fixtures" / "nvidia"


def events_by_key(log):
    return {(e["pci"], e["xid"]): e for e in log["events"]}


def test_dmesg_lines_of_several_driver_generations():
    log = xid.parse_kernel_log((FIXTURES / "kernel-xid.log").read_text().splitlines())
    events = events_by_key(log)
    assert set(events) == {
        ("0000:01:00", 32),
        ("0000:07:00", 31),
        ("0000:07:00", 13),
        ("0000:0f:00", 63),
        ("0000:0f:00", 94),
        ("0000:4e:00", 48),
        ("0000:4e:00", 63),
        ("0000:47:00", 79),
    }
    assert events[("0000:01:00", 32)]["count"] == 2  # old-driver form without pid
    assert events[("0000:01:00", 32)]["detail"] == "Channel ID 00000009 intr 00800000"
    assert events[("0000:4e:00", 48)]["severity"] == "fatal"
    assert events[("0000:07:00", 31)]["severity"] == "app"
    assert events[("0000:0f:00", 94)]["severity"] == "warning"
    # the Xid 79 line and the "GPU ...: GPU has fallen off the bus." line after it
    assert events[("0000:47:00", 79)]["count"] == 2
    assert log["uuids"] == {"0000:01:00": "GPU-34d7319c-5b19-1e75-186d-c187099e4fe5"}
    assert [(s["switch"], s["sxid"], s["fatal"]) for s in log["sxid"]] == [
        (2, 12028, False),
        (2, 11012, True),
    ]


def test_journalctl_multiline_fallen_off_the_bus_counts_as_79():
    log = xid.parse_kernel_log((FIXTURES / "journal-fallen-off-570.log").read_text().splitlines())
    events = events_by_key(log)
    assert events[("0000:b3:00", 79)]["severity"] == "fatal"
    assert events[("0000:3b:00", 74)]["meaning"] == "NVLink error"
    assert events[("0000:3b:00", 92)]["severity"] == "warning"
    assert events[("0000:3b:00", 43)]["severity"] == "app"


def test_unknown_xid_is_kept_as_a_warning_and_noise_is_ignored():
    lines = [
        "[  12.0] usb 1-1: new high-speed USB device number 2 using xhci_hcd",
        "[ 900.1] NVRM: Xid (PCI:0000:c1:00): 999, pid=1, something new",
        "[ 901.0] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
    ]
    (event,) = xid.parse_kernel_log(lines)["events"]
    assert event["xid"] == 999 and event["severity"] == "warning"
    assert "Xid catalog" in event["meaning"]
