"""check, stage, health and up on every rental-like kind (tests/fleet/rentals.py): the "Done
when" matrix of issue 9. `up` keeps the conda torch where it fits (gpu3, gpu5, gpu6, gpu7), and
installs the real torch CPU build from the tests' own index as `ubuntu` with --become on the sudo
host (gpu4) -- the module's one torch install -- into the system location, root-owned, which
`check`, `bench` and `train` then use as `ubuntu` without become and `install --become` finds
unchanged. `provision install` keeps the conda torch too (gpu6). The bullseye host's Python 3.9
has no torch on that index: with --no-bench `up` warns with the reason and the options and goes
on (stage), without it fails suggesting --no-bench.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kinds import NOISE_OUT
from rentals import Rentals, Run

from provision.staging.sample import make_image_folder
from tests.support.package_index import INSTALLED_TORCH, TORCH_VERSION, PackageIndex

IMAGES = 48
SYSTEM_ENV = "/opt/provision/envs/provision"  # where installs as root go (remote/environment.py)
DATASET = "rental-images"
# the base play's apt task on packages every fleet machine has (see tests/fleet/test_up.py)
BASE = ("-e", '{"provision_base_packages": ["openssh-server", "procps"]}')


@pytest.fixture(scope="module")
def images(rentals: Rentals):
    return make_image_folder(rentals.work / "images", IMAGES, classes=4, size=32)


def _lmdb_kib(rentals: Rentals, name: str, path: str) -> int:
    """Size of the staged LMDB on the host, read there (outside provision)."""
    return int(rentals.fleet.ns_exec(name, f"du -sk {path} | cut -f1").stdout.split()[0])


def test_check_on_every_kind(rentals: Rentals) -> None:
    run = rentals.provision("check", "rentals", "--json", "--forks", "8")
    rentals.timings["check, all kinds"] = run.seconds
    doc = run.doc
    assert run.returncode in (0, 1), run.describe()
    hosts = doc["hosts"]
    assert sorted(hosts) == sorted(rentals.names)
    for name, verdict in hosts.items():
        assert "error" not in verdict, (name, verdict)
        assert verdict["verdict"] in ("OK", "WARN", "FAIL"), (name, verdict)
        assert verdict["plan"]["torch"] and verdict["reasons"], (name, verdict)
        if "conda" in rentals.kinds_of(name):  # conda's torch 2.13.0 CPU runs here: verified
            assert verdict["host"]["torch"].startswith(TORCH_VERSION), verdict
            assert verdict["verify"]["ok"] is True
            assert verdict["verify"]["python"]["executable"].startswith("/root/miniconda3/bin/python")
        else:
            assert verdict["host"]["torch"] is None, (name, verdict["host"])  # none there
    assert NOISE_OUT not in run.stdout


def test_stage_on_every_kind_and_into_roots_data_disk_with_become(rentals: Rentals, images) -> None:
    targets = [n for n in rentals.names if n != "gpu4"]
    run = rentals.provision("stage", str(images), *targets, "--name", DATASET, "--json")
    rentals.timings["stage 48 images, 7 kinds"] = run.seconds
    assert run.returncode == 0, run.describe()
    # the sudo host's `ubuntu` can't write /root/autodl-tmp; as root through sudo it can
    became = rentals.provision("stage", str(images), "gpu4", "--name", DATASET, "--json", "--become")
    assert became.returncode == 0, became.describe()
    for name in rentals.names:
        path = f"/root/autodl-tmp/datasets/{DATASET}.lmdb"
        owner = rentals.fleet.ns_exec(name, f"stat -c %U {path}").stdout.strip()
        assert owner == "root", (name, owner)
        assert _lmdb_kib(rentals, name, path) > 0
    # every host's copy says it holds all the images (the report of the run that staged it)
    for run_ in (run, became):
        for result in run_.doc["hosts"].values():
            assert result["count"] == IMAGES, result


def test_health_on_every_kind_reads_the_kernel_log_as_root_with_become(rentals: Rentals) -> None:
    run = rentals.provision("health", "rentals", "--json", "--forks", "8")
    rentals.timings["health, all kinds"] = run.seconds
    hosts = run.doc["hosts"]
    assert sorted(hosts) == sorted(rentals.names)
    for name, result in hosts.items():
        assert "error" not in result, (name, result)
        assert result["verdict"] in ("healthy", "degraded", "failing"), (name, result)
        assert len(result["host"]["load_average"]) == 3
    became = rentals.provision("health", "gpu4", "--json", "--become")
    assert "error" not in became.doc["hosts"]["gpu4"], became.describe()
    assert "kernel_log" in became.doc["hosts"]["gpu4"]


@pytest.fixture(scope="module")
def index(rentals: Rentals):
    from test_up import up_wheelhouse  # torch 2.13.0 CPU + lmdb + pillow wheels, cached

    with PackageIndex(up_wheelhouse(), host=rentals.fleet.controller_address) as served:
        yield served


UP_HOSTS = ["gpu3", "gpu4", "gpu5", "gpu6", "gpu7"]


@pytest.fixture(scope="module")
def up_run(rentals: Rentals, images, index: PackageIndex) -> Run:
    """`up --become` on the conda kinds and the sudo host, once for the module."""
    run = rentals.provision(
        "up", *UP_HOSTS, "--json", "--become", *BASE, "--index-url", index.url, "--torch", TORCH_VERSION,
        *rentals.variant(), "--dataset", str(images), "--dataset-name", DATASET, "--no-bench", "--no-project",
        "--out", str(rentals.work / "reports"), timeout=1200,
    )  # fmt: skip
    rentals.timings["up --become --no-bench: gpu4 installs; gpu3, gpu5-7 keep conda torch"] = run.seconds
    return run


def test_up_on_every_kind(rentals: Rentals, up_run: Run) -> None:
    hosts, run = UP_HOSTS, up_run
    assert run.returncode == 0, run.describe()
    doc = run.doc
    for name in hosts:
        recap = doc["recap"][name]
        assert recap["failed"] == 0 and recap["unreachable"] == 0, (name, recap, run.describe())
        install = run.results(name)["install matched torch"]["result"]
        if "conda" in rentals.kinds_of(name):
            assert install["action"] == "unchanged" and install["python"].startswith("/root/miniconda3/"), install
        else:  # as root through sudo: the system location, not ubuntu's home
            assert install["action"] == "installed", install
            assert (install["env"], install["python"]) == (SYSTEM_ENV, f"{SYSTEM_ENV}/bin/python"), install
        assert run.results(name)["stage dataset"]["status"] in ("ok", "changed")


def test_env_installed_with_become_is_root_owned_and_used_without_become(
    rentals: Rentals, up_run: Run, index: PackageIndex
) -> None:
    assert up_run.returncode == 0, up_run.describe()
    generation = up_run.results("gpu4")["install matched torch"]["result"]["generation"]
    assert generation.startswith("/opt/provision/envs/.provision.gens/"), generation
    # root owns all of it; everything the env runs from is readable by others (umask 022)
    outside = rentals.fleet.ns_exec("gpu4", f"find /opt/provision ! -user root | head -3; "
                                    f"find {generation}/bin {generation}/lib ! -perm -o=r | head -3").stdout  # fmt: skip
    assert outside.strip() == "", outside
    assert rentals.fleet.ns_exec("gpu4", f"readlink {SYSTEM_ENV}").stdout.strip() == generation
    assert rentals.fleet.ns_exec("gpu4", "ls -A /home/ubuntu/.provision 2>/dev/null | wc -l").stdout.strip() == "0"

    # as ubuntu, no become: check verifies that env, bench and train run from it
    check = rentals.provision("check", "gpu4", "--json")
    verdict = check.doc["hosts"]["gpu4"]
    assert verdict["python"] == f"{SYSTEM_ENV}/bin/python", verdict
    assert verdict["verify"]["ok"] is True and verdict["host"]["torch"].startswith(TORCH_VERSION), verdict
    bench = rentals.provision("bench", "gpu4", "--quick", "--sections", "compute", "--json",
                              "--out", str(rentals.work / "bench-reports"))  # fmt: skip
    assert bench.returncode == 0, bench.describe()
    report = json.loads(Path(bench.doc["hosts"]["gpu4"]["report"]["json"]).read_text())
    assert report["install"] == {"python": f"{SYSTEM_ENV}/bin/python", "torch": INSTALLED_TORCH,
                                 "managed": True}, report["install"]  # fmt: skip
    probe = "import sys, torch; print('ran', sys.executable, torch.__version__)"
    train = rentals.provision("train", "gpu4", "--no-code", "--workdir", "/tmp", "--no-live",
                              "--out", str(rentals.work / "train-reports"), command=("python", "-c", probe))  # fmt: skip
    assert train.returncode == 0, train.describe()
    assert f"ran {SYSTEM_ENV}/bin/python {INSTALLED_TORCH}" in train.stdout + train.stderr, train.describe()

    # `install --become` finds it current: same request as up's, nothing to do, no download
    downloads = [r for r in index.requests if r.startswith("GET /files/")]
    again = rentals.provision("install", "gpu4", "--become", "--json", "--index-url", index.url,
                              "--torch", TORCH_VERSION, *rentals.variant(), "--extra", "lmdb", "pillow")  # fmt: skip
    doc = again.doc["hosts"]["gpu4"]
    assert (again.returncode, doc["action"], doc["env"]) == (0, "unchanged", SYSTEM_ENV), again.describe()
    assert [r for r in index.requests if r.startswith("GET /files/")] == downloads
    # without --become, install manages ubuntu's own env and says the root one is left alone
    # (an index without torch: it stops before building anything)
    with PackageIndex(index.directory, host=rentals.fleet.controller_address, hide={"torch"}) as bare:
        plain = rentals.provision("install", "gpu4", "--json", "--index-url", bare.url, "--torch", TORCH_VERSION)
    doc = plain.doc["hosts"]["gpu4"]
    assert doc["env"] == "/home/ubuntu/.provision/envs/provision", plain.describe()
    assert any(w.startswith(SYSTEM_ENV) and "--become" in w for w in doc["warnings"]), doc["warnings"]
    assert rentals.fleet.ns_exec("gpu4", f"readlink {SYSTEM_ENV}").stdout.strip() == generation


def test_install_keeps_the_conda_torch_like_up(rentals: Rentals, index: PackageIndex) -> None:
    # gpu6: AutoDL-like, /root/miniconda3 first on PATH with a working torch: nothing to download
    kept = rentals.provision("install", "gpu6", "--json", "--index-url", index.url, "--torch", TORCH_VERSION,
                             *rentals.variant())  # fmt: skip
    doc = kept.doc["hosts"]["gpu6"]
    assert kept.returncode == 0 and doc["action"] == "unchanged", kept.describe()
    assert doc["python"].startswith("/root/miniconda3/bin/python") and "kept" in doc["message"], doc
    assert doc["verify"]["torch"]["version"] == INSTALLED_TORCH
    # --no-keep builds the managed env instead: here from an index without torch, so it stops
    # saying so, before anything is built
    with PackageIndex(index.directory, host=rentals.fleet.controller_address, hide={"torch"}) as bare:
        forced = rentals.provision("install", "gpu6", "--json", "--index-url", bare.url,
                                   "--torch", TORCH_VERSION, "--no-keep")  # fmt: skip
    doc = forced.doc["hosts"]["gpu6"]
    assert forced.returncode == 1 and doc["action"] in ("refused", "failed"), forced.describe()
    assert doc["env"] == "/root/.provision/envs/provision" and "torch" in doc["error"], doc
    assert rentals.fleet.ns_exec("gpu6", "ls -A /root/.provision/envs 2>/dev/null | grep -v '^.provision.gens$' | wc -l").stdout.strip() == "0"


def test_up_no_bench_on_bullseye_warns_that_no_torch_fits_and_goes_on(
    rentals: Rentals, images, index: PackageIndex
) -> None:
    if rentals.bullseye_missing:
        pytest.skip(rentals.bullseye_missing)
    # Python 3.9: torch 2.13.0 needs a newer one and the index has no older torch
    args = ("up", "gpu8", "--json", *BASE, "--index-url", index.url, "--dataset", str(images),
            "--dataset-name", DATASET, "--no-project", "--out", str(rentals.work / "reports"))  # fmt: skip
    old = rentals.provision(*args, "--no-bench")
    rentals.timings["up --no-bench: gpu8 (bullseye, no torch for 3.9 on the index)"] = old.seconds
    assert old.returncode == 0, old.describe()
    recap = old.doc["recap"]["gpu8"]
    assert recap["failed"] == 0 and recap["unreachable"] == 0, (recap, old.describe())
    install = old.results("gpu8")["install matched torch"]
    assert install["status"] == "ok" and install["result"]["changed"] is False, install
    assert install["result"]["action"] == "no-fit", install
    assert "no torch installed" in install["msg"] and "option:" in install["msg"], install
    assert "********" not in json.dumps(install), install  # a credential-free URL shows
    assert "gpu8: no torch installed" in old.stdout + old.stderr  # the console says so too
    for task in ("Gathering Facts", "compatibility check", "stage dataset"):
        assert old.results("gpu8")[task]["status"] in ("ok", "changed"), old.results("gpu8")[task]
    assert _lmdb_kib(rentals, "gpu8", f"/root/autodl-tmp/datasets/{DATASET}.lmdb") > 0
    # the bench needs torch: then it is a failure, with the reason and --no-bench to suggest
    bench = rentals.provision(*args)
    assert bench.returncode == 1, bench.describe()
    failed = bench.results("gpu8")["install matched torch"]
    assert failed["status"] == "failed" and "option: --no-bench" in failed["msg"], failed
    assert "stage dataset" not in bench.results("gpu8")
