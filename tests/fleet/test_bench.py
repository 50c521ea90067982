"""`provision bench --quick --allreduce` end to end on 2 CPU fleet hosts (issue 6): the agent's
benchmark in the managed env that `provision up` installed (the fleet test_up.py provisions,
shared so torch is installed once per host), one gloo group across the 2 hosts with the
rendezvous on the first (they reach each other over the fleet bridge), versioned reports.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_up import DATASET, ENV_PYTHON, IMAGES, SSD, UpFleet, shared_up_fleet

from provision.report.document import validate


@pytest.fixture(scope="session")
def provisioned(tmp_path_factory: pytest.TempPathFactory):
    shared = shared_up_fleet(tmp_path_factory)
    first = shared.first_up()
    assert first.returncode == 0, (
        f"`provision up` did not provision the hosts:\n{first.stderr[-4000:]}"
    )
    yield shared
    shared.stop()  # safe twice (test_up.py's fixture stops it too)


def test_quick_bench_with_allreduce_across_two_hosts(provisioned: UpFleet) -> None:
    out = provisioned.work / "bench-reports"
    run = provisioned.provision(
        "bench", "gpu1", "gpu2", *provisioned.common(), "--quick", "--allreduce",
        "--dataset", DATASET, "--index-url", provisioned.index.url, "--out", str(out),
    )  # fmt: skip
    print(f"\n`provision bench --quick --allreduce` on 2 hosts: {run.seconds:.1f}s")
    assert run.returncode == 0, run.stderr[-4000:]
    hosts = run.doc["hosts"]
    assert set(hosts) == {"gpu1", "gpu2"}
    groups = []
    for name, entry in hosts.items():
        assert "error" not in entry, entry
        report = json.loads(Path(entry["report"]["json"]).read_text())
        validate(report, entry["report"]["json"])
        assert Path(entry["report"]["html"]).is_file()
        assert report["host"] == name and report["install"]["python"] == ENV_PYTHON
        assert report["compat"]["verdict"] == "OK", report["compat"]
        bench = report["bench"]
        assert bench == entry["bench"] and bench["quick"] is True
        assert bench["host"]["torch"].startswith("2.13.0")
        # compute: matmul on the CPU, every measured precision positive
        [cpu] = bench["compute"]["per_gpu"]
        measured = {k: v for k, v in cpu["tflops"].items() if v is not None}
        assert measured.get("fp32", 0) > 0 and all(v > 0 for v in measured.values()), cpu
        # AMP training: both models ran fp32 and an AMP dtype
        amp = bench["amp"]
        assert amp["status"] == "ok" and amp["speedup"] > 0 and amp["train_samples_per_s"] > 0
        for model in amp["models"].values():
            assert all(r["samples_per_s"] > 0 for r in model["runs"].values()), model
        assert bench["memory"]["status"] == "ok"
        # data loading over the LMDB `up` staged on this host's SSD
        loader = bench["dataloader"]
        assert loader["status"] == "ok"
        assert loader["best_num_workers"] in loader["num_workers_tried"]
        [source] = loader["sources"]
        assert source["source"]["path"] == f"{SSD}/datasets/{DATASET}.lmdb"
        assert source["source"]["samples"] == IMAGES
        assert all(s["samples_per_s"] > 0 for s in source["settings"])
        assert loader["verdict"]["verdict"] in ("ok", "bottleneck", "marginal")
        # storage on the data SSD, network against the test index (on the fleet bridge)
        [ssd] = [d for d in bench["storage"]["dirs"] if d["role"] == "data"]
        assert ssd["path"] == SSD and ssd["seq_read"]["mb_s"] > 0 and ssd["random_read"]["iops"] > 0
        network = bench["network"]
        assert network["status"] == "ok", network
        [target] = network["targets"]
        assert target["url"] == provisioned.index.url and target["http_status"] == 200
        assert target["connect_ms"] > 0 and target["ttfb_ms"] > 0
        # one gloo group of 2 across the hosts
        multi = bench["distributed"]["multi_host"]
        assert multi["status"] == "ok", multi
        assert multi["backend"] == "gloo" and multi["world_size"] == 2
        assert multi["busbw_gbs"] > 0 and all(s["busbw_gbs"] > 0 for s in multi["sizes"])
        groups.append((multi["rank"], multi["master"]))
        assert isinstance(report["diagnosis"], list)
        assert "compat_mismatch" not in {f["id"] for f in report["diagnosis"]}
    # ranks 0 and 1 of one group, whose rendezvous is on the first host (gpu1)
    gpu1 = provisioned.fleet.host("gpu1").address
    assert sorted(r for r, _ in groups) == [0, 1]
    assert {m for _, m in groups} == {next(m for _, m in groups)}
    assert next(m for _, m in groups).split(":")[0] == gpu1
