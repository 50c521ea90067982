"""Reusing the pre-job all-reduce measurement between the same hosts (provision/train/allreduce_memo.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from provision.distributed.fabric import Fabric
from provision.train import allreduce_memo as memo

FABRIC = Fabric(master_host="a", master_addr="10.0.0.1", master_port=29400,
                ifaces={"a": "eth1", "b": "eth1"}, kind="ethernet", ib=False, reason="test",
                probes=[], hosts=["a", "b"], network="10.0.0.0/24",
                addrs={"a": "10.0.0.1", "b": "10.0.0.2"})
IDS = {"a": "ssh root@h1:22 ssh-ed25519 AAAA1", "b": "ssh root@h2:22 ssh-ed25519 AAAA2"}
OK = {"status": "ok", "busbw_gbs": 1.25, "hosts": 2}


def test_a_measurement_is_reused_with_its_age_until_it_is_too_old() -> None:
    key = memo.memo_key(IDS, FABRIC)
    assert key and memo.recall(key, memo.REUSE_S) is None
    memo.remember(key, OK, now=1000.0)
    got = memo.recall(key, memo.REUSE_S, now=1600.0)
    assert got is not None and got["busbw_gbs"] == 1.25
    assert got["reused"] == {"measured_at": 1000.0, "age_s": 600.0}
    assert memo.recall(key, memo.REUSE_S, now=1000.0 + memo.REUSE_S + 1) is None  # too old
    assert memo.recall(key, 0, now=1600.0) is None  # --fresh-allreduce


def test_failed_measurements_are_not_kept() -> None:
    key = memo.memo_key(IDS, FABRIC)
    assert key
    memo.remember(key, {"status": "error", "reason": "timed out"}, now=1000.0)
    assert memo.recall(key, memo.REUSE_S, now=1001.0) is None


@pytest.mark.parametrize("change", [
    lambda ids, f: ({**ids, "b": "ssh root@h2:22 ssh-ed25519 OTHERKEY"}, f),  # a re-rented address
    lambda ids, f: (ids, replace(f, ifaces={"a": "eth0", "b": "eth0"})),  # another network
    lambda ids, f: (ids, replace(f, hosts=["b", "a"])),  # another rank order
])
def test_other_hosts_or_another_network_are_measured_again(change) -> None:
    memo.remember(memo.memo_key(IDS, FABRIC), OK, now=1000.0)
    ids, fabric = change(IDS, FABRIC)
    other = memo.memo_key(ids, fabric)
    assert other and other != memo.memo_key(IDS, FABRIC)
    assert memo.recall(other, memo.REUSE_S, now=1001.0) is None


def test_a_host_that_cannot_say_who_it_is_is_never_reused() -> None:
    assert memo.memo_key({"a": IDS["a"], "b": None}, FABRIC) is None


def test_a_damaged_memo_file_is_ignored() -> None:
    key = memo.memo_key(IDS, FABRIC)
    assert key
    memo.remember(key, OK, now=1000.0)
    (memo.state_dir() / "allreduce" / f"{key}.json").write_text("{not json")
    assert memo.recall(key, memo.REUSE_S, now=1001.0) is None
