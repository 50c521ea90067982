"""`provision up` end to end over SSH (issue 6): fresh fleet hosts (real sshd, Debian python3 3.11
without torch, no GPU) → facts, compatibility check, base setup, a REAL torch 2.13.0 CPU install
from a PEP 503 index this test serves on the fleet bridge, staging a generated JPEG ImageFolder
into LMDB on the host's "SSD", the quick benchmark and the report. Then a second run with
--no-bench changes nothing, and a run with a broken index and an unreachable host stops those
two with the reason while the provisioned host goes on.

The provisioned fleet is shared with tests/fleet/test_bench.py (`shared_up_fleet`): one torch
install per host for both files, which keeps CI time down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fleet import Fleet, FleetError, preflight
from rentals import Run  # the CLI run record the rental tests use too
from truth import nvidia_gpu_names

from provision.report.document import validate
from provision.staging.sample import make_image_folder
from tests.support.package_index import (
    TORCH_VERSION,
    PackageIndex,
    cache_root,
    interpreter_key,
    torch_wheelhouse,
    wheels_for_interpreter,
)

ROOT = Path(__file__).resolve().parents[2]
TORCH = TORCH_VERSION  # the installed torch the tests' index serves (2.13.0 here)
ENV_PYTHON = "/root/.provision/envs/provision/bin/python"  # the managed env's stable path
SSD = "/root/autodl-tmp"
IMAGES = 240
DATASET = "up-images"
# `up_extra_packages` in playbooks/up.yml: the env's LMDB reader and image decoding
EXTRAS = ("lmdb==3.0.0", "pillow==13.0.0")
# The base play's apt task, on packages every fleet machine has (sshd runs the hosts): it runs
# and changes nothing. The fleet hosts share this machine's /usr and have no network, so the
# default list (tmux, htop, ...) would make apt try to install onto this machine if it lacks them.
BASE = ("-e", '{"provision_base_packages": ["openssh-server", "procps"]}')


def up_wheelhouse() -> Path:
    """The torch wheelhouse (tests/support/package_index.py) plus the lmdb and pillow wheels up
    installs beside torch, for the test interpreter: links to the torch files, the two wheels
    downloaded once (or rebuilt from the installed ones where nothing can be downloaded)."""
    torch_dir = torch_wheelhouse()
    root = cache_root() / f"wheelhouse-up-{interpreter_key()}"
    root.mkdir(parents=True, exist_ok=True)
    for src in torch_dir.iterdir():
        link = root / src.name
        if src.is_file() and not src.name.startswith(".") and not link.exists():
            link.symlink_to(src)
    have = {p.name.split("-")[0].lower() for p in root.glob("*.whl")}
    missing = [req for req in EXTRAS if req.split("==")[0] not in have]
    if missing:
        wheels_for_interpreter(missing, root)
    return root


@dataclass
class UpFleet:
    """3 hosts: gpu1 and gpu2 provisioned by the first `up`, gpu3 left fresh."""

    fleet: Fleet
    index: PackageIndex
    inventory: Path
    images: Path
    work: Path
    env: dict[str, str]
    # the index holds the CPU build only: on a host with NVIDIA GPUs (this suite on a GPU
    # server) up asks for it explicitly, so the tests prove the same thing there
    has_gpu: bool = False
    first: Run | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def provision(self, *args: str, timeout: float = 900) -> Run:
        cmd = [sys.executable, "-m", "provision", *args]
        started = time.monotonic()
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=self.env, cwd=self.work, timeout=timeout
        )
        return Run(cmd, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)

    def common(self) -> list[str]:
        return ["-i", str(self.inventory), "--known-hosts", "strict",
                "--ssh-config", str(self.work / "ssh_config"), "--json"]  # fmt: skip

    def first_up(self) -> Run:
        """`provision up gpu1 gpu2` on fresh hosts, once per session."""
        with self.lock:
            if self.first is None:
                self.first = self.provision(
                    "up", "gpu1", "gpu2", *self.common(), *BASE,
                    "--index-url", self.index.url, "--torch", TORCH, *self.variant(),
                    "--dataset", str(self.images), "--dataset-name", DATASET,
                    "--quick", "--out", str(self.work / "reports"), "--no-project",
                )  # fmt: skip
                print(f"\nfirst `provision up` on 2 fresh hosts: {self.first.seconds:.1f}s")
            return self.first

    def variant(self) -> tuple[str, ...]:
        return ("--variant", "cpu") if self.has_gpu else ()

    def stop(self) -> None:
        self.index.stop()
        self.fleet.stop()


_SHARED: dict[str, UpFleet] = {}
_SHARED_LOCK = threading.Lock()


def shared_up_fleet(tmp_path_factory: pytest.TempPathFactory) -> UpFleet:
    """The session's provisioned fleet (started on first use; stopped at exit by the fixture
    that started it, and by Fleet's own atexit hook)."""
    with _SHARED_LOCK:
        if "fleet" in _SHARED:
            return _SHARED["fleet"]
        reason = preflight()
        if reason:
            pytest.skip(f"SSH test fleet unavailable: {reason}")
        wheels = up_wheelhouse()
        work = tmp_path_factory.mktemp("up-fleet")
        try:
            # each torch env is ~1 GB on the hosts' tmpfs /root; pip's cache goes to the SSD
            fleet = Fleet(3, root_size="3g", ssd_size="2g").start()
        except FleetError as exc:
            pytest.fail(f"could not start the up fleet: {exc}", pytrace=False)
        inventory = fleet.write_inventory(work / "inventory.ini")
        # an unreachable host: gpu1's address on a port nothing listens on (refused at once)
        with inventory.open("a") as fh:
            fh.write(f"down ansible_host={fleet.hosts[0].address} ansible_port=1\n")
        (work / "ssh_config").write_text("")  # given, so ~/.ssh/config is never read
        home = work / "provision-home"
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
        env.update(
            PYTHONPATH=str(ROOT),
            COLUMNS="200",
            PROVISION_HOME=str(home),
            PROVISION_KNOWN_HOSTS=str(fleet.write_known_hosts(work / "known_hosts")),
            PROVISION_USER_KNOWN_HOSTS=str(work / "user_known_hosts"),
        )
        images = make_image_folder(work / "images", IMAGES, classes=6, size=64)
        index = PackageIndex(wheels, host=fleet.controller_address).start()
        has_gpu = any(nvidia_gpu_names(fleet, h) for h in fleet.hosts)
        _SHARED["fleet"] = UpFleet(fleet, index, inventory, images, work, env, has_gpu)
        return _SHARED["fleet"]


@pytest.fixture(scope="session")
def up_fleet(tmp_path_factory: pytest.TempPathFactory):
    shared = shared_up_fleet(tmp_path_factory)
    yield shared
    shared.stop()  # safe twice (test_bench.py's fixture stops it too)


def host_run(up_fleet: UpFleet, host: str, command: str) -> str:
    return up_fleet.fleet.ns_exec(host, command).stdout


# -- the tests ----------------------------------------------------------------------------------


def test_first_up_on_fresh_hosts_installs_stages_benches_and_reports(up_fleet: UpFleet) -> None:
    run = up_fleet.first_up()
    assert run.returncode == 0, run.stderr[-4000:]
    doc = run.doc
    assert set(doc) >= {"recap", "results", "reports"}
    for host in ("gpu1", "gpu2"):
        recap = doc["recap"][host]
        assert recap["failed"] == 0 and recap["unreachable"] == 0, run.stderr[-4000:]
        assert recap["changed"] > 0
        results = run.results(host)
        for task in ("Gathering Facts", "compatibility check", "install matched torch",
                     "stage dataset", "benchmark", "report"):  # fmt: skip
            assert results[task]["status"] in ("ok", "changed"), (task, results[task])
        assert results["tools people expect"]["status"] == "ok"  # apt ran: nothing to add
        # before the install: the host's python3 has no torch, which the check says
        assert results["compatibility check"]["result"]["verdict"] in (
            ("WARN",) if not up_fleet.has_gpu else ("WARN", "FAIL")
        )
        install = results["install matched torch"]["result"]
        assert install["action"] == "installed" and install["python"] == ENV_PYTHON

        paths = doc["reports"][host]
        assert set(paths) == {"json", "markdown", "html"}
        assert all(Path(p).is_file() for p in paths.values())
        report = json.loads(Path(paths["json"]).read_text())
        validate(report, paths["json"])
        assert report["host"] == host
        assert report["install"]["python"] == ENV_PYTHON
        assert report["install"]["verify"]["torch"]["version"] == f"{TORCH}+cpu"
        # the report's compatibility is the installed env's, not the bare python3's (on a GPU
        # host the CPU build asked for is, rightly, not OK there)
        assert report["compat"]["python"] == ENV_PYTHON
        if not up_fleet.has_gpu:
            assert report["compat"]["verdict"] == "OK"
            assert "compat_mismatch" not in {f["id"] for f in report["diagnosis"]}
        [dataset] = report["datasets"]
        assert dataset["path"] == f"{SSD}/datasets/{DATASET}.lmdb"
        assert dataset["count"] == IMAGES and dataset["name"] == DATASET
        bench = report["bench"]
        assert bench["quick"] is True
        assert bench["amp"]["speedup"] > 0 and bench["amp"]["train_samples_per_s"] > 0
        loader = bench["dataloader"]
        assert loader["best_num_workers"] in loader["num_workers_tried"]
        assert loader["best_samples_per_s"] > 0
        [source] = loader["sources"]
        assert source["source"]["path"] == dataset["path"] and source["source"]["samples"] == IMAGES
        assert isinstance(report["diagnosis"], list) and report["diagnosis"]
        for finding in report["diagnosis"]:
            assert finding["evidence"] and finding["recommendation"], finding

    # the host really has it: the env imports torch, lmdb and PIL; the LMDB is on the SSD
    out = host_run(
        up_fleet, "gpu1",
        f"{ENV_PYTHON} -c 'import torch, lmdb, PIL; print(torch.__version__)'; "
        f"ls {SSD}/datasets; grep -c provision_env /root/.bashrc",
    )  # fmt: skip
    assert out.split() == [f"{TORCH}+cpu", "provision_lmdb.py", f"{DATASET}.lmdb", "1"]
    fetched = [r for r in up_fleet.index.requests if r.startswith("GET /files/")]
    for wheel in (f"torch-{TORCH}", "lmdb-", "pillow-"):
        assert any(r.startswith(f"GET /files/{wheel}") and r.endswith(" 200") for r in fetched)


def test_second_run_with_no_bench_changes_nothing(up_fleet: UpFleet) -> None:
    assert up_fleet.first_up().returncode == 0
    downloads = [r for r in up_fleet.index.requests if r.startswith("GET /files/")]
    run = up_fleet.provision(
        "up", "gpu1", "gpu2", *up_fleet.common(), *BASE,
        "--index-url", up_fleet.index.url, "--torch", TORCH, *up_fleet.variant(),
        "--dataset", str(up_fleet.images), "--dataset-name", DATASET,
        "--no-bench", "--out", str(up_fleet.work / "reports"), "--no-project",
    )  # fmt: skip
    print(f"\nsecond `provision up --no-bench` on 2 provisioned hosts: {run.seconds:.1f}s")
    assert run.returncode == 0, run.stderr[-4000:]
    doc = run.doc
    for host in ("gpu1", "gpu2"):
        assert doc["recap"][host]["changed"] == 0, [
            (r["task"], r["msg"] if "msg" in r else "") for r in doc["results"]
            if r["host"] == host and r["status"] == "changed"
        ]  # fmt: skip
        assert doc["recap"][host]["failed"] == 0
        results = run.results(host)
        assert results["install matched torch"]["result"]["action"] == "unchanged"
        assert results["stage dataset"]["result"]["results"][0]["up_to_date"] is True
        assert results["benchmark"]["status"] == "skipped"
    assert doc["reports"] == {}
    assert [r for r in up_fleet.index.requests if r.startswith("GET /files/")] == downloads


def test_a_broken_index_and_an_unreachable_host_stop_with_the_reason_others_go_on(
    up_fleet: UpFleet,
) -> None:
    assert up_fleet.first_up().returncode == 0
    with PackageIndex(up_fleet.index.directory, host=up_fleet.fleet.controller_address) as gone:
        dead_url = gone.url  # nothing listens there any more
    run = up_fleet.provision(
        "up", "gpu1", "gpu3", "down", *up_fleet.common(), *BASE, "--connect-timeout", "5",
        "--index-url", dead_url, "--torch", TORCH, *up_fleet.variant(),
        "--dataset", str(up_fleet.images), "--dataset-name", DATASET,
        "--no-bench", "--out", str(up_fleet.work / "reports"), "--no-project",
    )  # fmt: skip
    assert run.returncode == 1, run.stderr[-4000:]  # a failed host beats an unreachable one
    doc = run.doc
    # gpu1 is provisioned: it needs no index and goes on to the end
    assert doc["recap"]["gpu1"]["failed"] == 0 and doc["recap"]["gpu1"]["changed"] == 0
    assert run.results("gpu1")["stage dataset"]["status"] == "ok"
    # gpu3 is fresh: its install fails on the index, and nothing after it runs there
    assert doc["recap"]["gpu3"]["failed"] == 1
    gpu3 = run.results("gpu3")
    failed = gpu3["install matched torch"]
    assert failed["status"] == "failed"
    assert failed["msg"].startswith("pip failed") and "is unchanged" in failed["msg"]
    # the cause travels with the failure (pip's own lines, the index URL it used)
    assert failed["result"]["index"]["index_url"] == dead_url
    assert any("Connection refused" in line for line in failed["result"]["pip_lines"]), failed
    assert "stage dataset" not in gpu3 and "benchmark" not in gpu3
    assert host_run(up_fleet, "gpu3", f"ls {SSD}/datasets 2>/dev/null | wc -l").strip() == "0"
    # down: unreachable, with the reason
    assert doc["recap"]["down"]["unreachable"] == 1
    down = [r for r in doc["results"] if r["host"] == "down"]
    assert down and down[0]["status"] == "unreachable"
    assert "refused" in down[0]["msg"].lower() or "port 1" in down[0]["msg"], down[0]["msg"]
