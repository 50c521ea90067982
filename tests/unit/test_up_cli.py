"""`provision up localhost` as a user runs it (a subprocess, no SSH), and provision.yml → up.

The runs keep every write in temp dirs: HOME (the ~/.provision_env, ~/.bashrc line, agent cache),
PROVISION_HOME (the embedded sample, report history), `-e data_dir=` (datasets and caches) and
--out (reports). The python running the tests has torch 2.13.0 CPU with lmdb and pillow, so
`up` keeps it (keep_base) instead of building a managed env: no download.

The base play's apt task is pointed at `procps` (which the test machine has): the task runs,
finds it present and changes nothing, and these tests never install system packages.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from provision.cli.main import build_parser
from provision.cli.up import up_vars
from provision.errors import ConfigError
from provision.install.project import load_project
from provision.report.document import validate

ROOT = Path(__file__).resolve().parents[2]
BASE_PACKAGES = '{"provision_base_packages": ["procps"]}'


@dataclass
class Up:
    returncode: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> dict[str, Any]:
        assert self.stdout.strip(), self.stderr[-3000:]
        return json.loads(self.stdout)

    def result(self, task: str) -> dict[str, Any]:
        return next(r for r in self.doc["results"] if r["task"] == task)


@dataclass
class Sandbox:
    root: Path
    home: Path
    state: Path
    data: Path
    out: Path

    def up(self, *args: str, cwd: Path | None = None) -> Up:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PROVISION_", "XDG_"))}
        env.update(
            HOME=str(self.home),
            PROVISION_HOME=str(self.state),
            PYTHONPATH=str(ROOT),
            COLUMNS="200",
            # `python3` on the "host" is the interpreter running the tests (pyenv shims, which
            # look under $HOME, are bypassed)
            PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
        )
        proc = subprocess.run(
            [sys.executable, "-m", "provision", "up", "localhost", "--json",
             "--out", str(self.out), "-e", f"data_dir={self.data}", "-e", BASE_PACKAGES, *args],
            capture_output=True, text=True, env=env, cwd=cwd or self.root, timeout=600,
        )  # fmt: skip
        return Up(proc.returncode, proc.stdout, proc.stderr)

    def files(self) -> set[str]:
        """Everything under HOME, the data dir, PROVISION_HOME and --out, relative to root,
        except the agent (check mode ships it too: facts need it) and the controller's cache of
        agent bundles and memo of agents on hosts that go with it (PROVISION_HOME/agent)."""
        out = set()
        for base in (self.home, self.data, self.state, self.out):
            if base.exists():
                for p in base.rglob("*"):
                    rel = str(p.relative_to(self.root))
                    skipped = ("home/.cache", "home/.cache/provision", "state/agent")
                    if rel not in skipped and not rel.startswith(tuple(s + "/" for s in skipped[1:])):
                        out.add(rel)
        return out


def make_sandbox(root: Path) -> Sandbox:
    box = Sandbox(root, root / "home", root / "state", root / "ssd", root / "reports")
    box.home.mkdir(parents=True)
    return box


@pytest.fixture(scope="module")
def localhost_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """On a fresh HOME: --check, then up as a newcomer types it (the quick bench), then --no-bench."""
    box = make_sandbox(tmp_path_factory.mktemp("up-localhost"))
    runs: dict[str, Any] = {"box": box}
    runs["check"] = box.up("--quick", "--check")
    runs["after_check"] = box.files()
    runs["quick"] = box.up()
    runs["no_bench"] = box.up("--no-bench")
    return runs


def test_check_mode_changes_nothing(localhost_runs: dict[str, Any]) -> None:
    run = localhost_runs["check"]
    assert run.returncode == 0, run.stderr[-3000:]
    doc = run.doc
    assert doc["check_mode"] is True and doc["recap"]["localhost"]["failed"] == 0
    assert doc["recap"]["localhost"]["changed"] > 0  # what a real run would change...
    assert localhost_runs["after_check"] == set()  # ...and nothing was
    assert run.result("benchmark")["status"] == "skipped"
    assert doc["reports"] == {}


def test_up_localhost_keeps_the_working_torch_stages_benches_and_reports(
    localhost_runs: dict[str, Any],
) -> None:
    box: Sandbox = localhost_runs["box"]
    run = localhost_runs["quick"]
    assert run.returncode == 0, run.stderr[-3000:]
    doc = run.doc
    assert doc["recap"]["localhost"]["failed"] == 0 and doc["recap"]["localhost"]["changed"] > 0
    install = run.result("install matched torch")["result"]
    assert install["action"] == "unchanged" and "kept" in install["message"]
    assert run.result("benchmark")["result"]["bench"]["quick"] is True  # as the README says
    assert Path(install["python"]).resolve() == Path(sys.executable).resolve()
    assert not (box.home / ".provision" / "envs").exists()  # no managed env was built

    paths = doc["reports"]["localhost"]
    report = json.loads(Path(paths["json"]).read_text())
    validate(report, paths["json"])
    assert Path(paths["json"]).parent == box.out and Path(paths["html"]).is_file()
    assert report["install"]["python"] == install["python"]
    assert report["compat"]["verdict"] == "OK"
    assert report["facts"]["data_dir"]["path"] == str(box.data)
    [dataset] = report["datasets"]  # the embedded sample, generated under PROVISION_HOME
    assert dataset["name"] == "provision-sample" and dataset["count"] > 0
    assert dataset["path"] == f"{box.data}/datasets/provision-sample.lmdb"
    assert (box.state / "provision-sample" / ".complete").is_file()
    bench = report["bench"]
    assert bench["amp"]["speedup"] > 0
    assert bench["dataloader"]["best_num_workers"] in bench["dataloader"]["num_workers_tried"]
    assert isinstance(report["diagnosis"], list)
    # the console (not a terminal here) says where the report is and what it found first
    assert f"localhost: report {paths['html']} (JSON: {paths['json']})" in run.stderr
    first = report["diagnosis"][0] if report["diagnosis"] else None
    headline = f"{first['severity']}: {first['title']}" if first else "no findings"
    assert f"localhost: diagnosis: {headline}" in run.stderr
    # base setup wrote into the temp HOME and the data dir, nowhere else
    assert (box.home / ".provision_env").is_file()
    assert "provision_env" in (box.home / ".bashrc").read_text()
    assert {"pip", "torch", "huggingface"} <= {p.name for p in (box.data / ".cache").iterdir()}
    assert (box.state / "history.sqlite").is_file()


def test_up_timings_list_every_step_add_up_and_are_in_the_report(
    localhost_runs: dict[str, Any],
) -> None:
    run = localhost_runs["quick"]
    assert run.returncode == 0, run.stderr[-3000:]
    doc = run.doc
    timings = doc["timings"]["localhost"]
    mine = [r for r in doc["results"] if r["host"] == "localhost"]
    assert [s["step"] for s in timings["steps"]] == [r["task"] for r in mine]  # every step
    assert [s["seconds"] for s in timings["steps"]] == [round(r["seconds"], 3) for r in mine]
    total = timings["total_seconds"]
    assert timings["between_steps_seconds"] >= 0
    assert timings["steps_seconds"] + timings["between_steps_seconds"] == pytest.approx(total, abs=0.01)
    assert sum(s["share"] for s in timings["steps"]) <= 1.0 + 1e-3
    paths = doc["reports"]["localhost"]
    assert json.loads(Path(paths["json"]).read_text())["timings"] == timings
    markdown = Path(paths["markdown"]).read_text()
    assert "Timings" in markdown and "| total |" in markdown
    assert "Timings" in Path(paths["html"]).read_text()
    # the console line says where the time went too
    assert f"localhost: {total:.1f}s:" in run.stderr


def test_second_run_with_no_bench_changes_nothing(localhost_runs: dict[str, Any]) -> None:
    assert localhost_runs["quick"].returncode == 0
    run = localhost_runs["no_bench"]
    assert run.returncode == 0, run.stderr[-3000:]
    recap = run.doc["recap"]["localhost"]
    changed = [r["task"] for r in run.doc["results"] if r["status"] == "changed"]
    assert recap["changed"] == 0 and recap["failed"] == 0, changed
    assert run.result("stage dataset")["result"]["results"][0]["up_to_date"] is True
    assert run.result("benchmark")["status"] == "skipped" and run.doc["reports"] == {}


# -- provision.yml -----------------------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    return build_parser(only="up").parse_args(["up", *argv])


def project(tmp_path: Path, text: str):
    path = tmp_path / "provision.yml"
    path.write_text(text)
    return load_project(path)


def test_project_file_maps_onto_up_vars(tmp_path: Path) -> None:
    (tmp_path / "data" / "flowers").mkdir(parents=True)
    (tmp_path / "req.txt").write_text("numpy\n")
    p = project(
        tmp_path,
        'python: "3.11"\ntorch: "2.5"\nvariant: cu124\nwith: [torchvision]\n'
        "packages: [numpy, einops]\nrequirements: req.txt\nmirror: tuna\n"
        "env: ~/.provision/envs/proj\nfind_links: [/root/wheels]\n"
        "datasets:\n  - {name: flowers, source: ./data/flowers}\n"
        "  - host:/root/autodl-fs/imagenet\n"
        "  - {source: 'https://example.org/x.tar', layout: webdataset}\n",
    )
    v = up_vars(parse("gpu1"), p)
    assert v["up_torch"] == "2.5" and v["up_variant"] == "cu124"
    assert v["up_python"] == "python3.11" and v["up_env"] == "~/.provision/envs/proj"
    assert v["up_with"] == ["torchvision"] and v["up_packages"] == ["numpy", "einops"]
    assert v["up_requirements"] == [str(tmp_path / "req.txt")]
    assert v["up_mirror"] == "tuna" and v["up_index_url"] == ""
    assert v["up_find_links"] == ["/root/wheels"]
    assert v["up_datasets"] == [
        {"src": str(tmp_path / "data" / "flowers"), "name": "flowers"},
        {"src": "host:/root/autodl-fs/imagenet"},
        {"src": "https://example.org/x.tar", "layout": "webdataset"},
    ]
    assert v["up_bench"] is True and v["up_quick"] is True  # the quick bench: up's default
    assert up_vars(parse("--full-bench"), p)["up_quick"] is False


def test_command_line_wins_over_the_project_file(tmp_path: Path) -> None:
    (tmp_path / "flowers").mkdir()
    p = project(
        tmp_path,
        'torch: "2.5"\nmirror: tuna\npackages: [numpy]\nenv: /p/env\n'
        "datasets: [{name: flowers, source: flowers}]\n",
    )
    v = up_vars(
        parse("--torch", "2.6", "--index-url", "http://198.18.0.1:8000/simple/",
              "--extra", "einops", "--env", "/cli/env", "--dataset", "/data/x", "--quick"),
        p,
    )  # fmt: skip
    assert v["up_torch"] == "2.6" and v["up_env"] == "/cli/env"
    # an index on the command line replaces the file's mirror (they exclude each other)
    assert v["up_index_url"] == "http://198.18.0.1:8000/simple/" and v["up_mirror"] == ""
    assert v["up_packages"] == ["einops"]
    assert v["up_dataset"] == "/data/x" and v["up_datasets"] == []  # --dataset replaces the list
    assert v["up_quick"] is True
    # no file: up.yml's defaults
    bare = up_vars(parse())
    assert bare["up_torch"] == "any" and bare["up_datasets"] == [] and bare["up_packages"] == []


@pytest.mark.parametrize(
    ("datasets", "message"),
    [
        ("datasets: [{name: x}]\n", r"provision.yml:1: datasets\[0\] needs a source"),
        ("datasets: [{source: /d, sorce: 1}]\n", r"provision.yml:1: datasets\[0\]: unknown key 'sorce'"),
        ("x: 1\n", r"provision.yml:1: unknown key 'x'"),
        ("torch: '2.5'\ndatasets:\n  - ./missing\n",
         r"provision.yml:2: datasets\[0\]: \./missing: no such file or folder next to provision.yml"),
        ("datasets: [[a]]\n", r"provision.yml:1: datasets\[0\] must be a source string"),
    ],
)  # fmt: skip
def test_bad_project_datasets_name_the_file_and_line(
    tmp_path: Path, datasets: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        up_vars(parse(), project(tmp_path, datasets))


def test_up_picks_up_provision_yml_and_the_command_line_wins(tmp_path: Path) -> None:
    from provision.staging.sample import make_image_folder

    box = make_sandbox(tmp_path / "box")
    proj = tmp_path / "proj"
    make_image_folder(proj / "images", 24, classes=3, size=32)
    make_image_folder(tmp_path / "other", 12, classes=2, size=32)
    (proj / "sub").mkdir()
    (proj / "provision.yml").write_text(
        'torch: "2.13"\npackages: [pyyaml]\ndatasets:\n  - {name: proj-images, source: ./images}\n'
    )
    # from a subfolder: the nearest parent's provision.yml
    run = box.up("--no-bench", cwd=proj / "sub")
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"project file: {proj / 'provision.yml'}" in run.stderr
    install = run.result("install matched torch")["result"]
    assert install["plan"]["torch"] == "2.13.0" and "request: torch 2.13" in install["reasons"]
    [staged] = run.result("stage dataset")["result"]["results"]
    assert staged["dataset"]["path"] == f"{box.data}/datasets/proj-images.lmdb"
    assert staged["dataset"]["count"] == 24

    # a torch no build fits would be refused; --torch and --dataset on the command line win
    (proj / "provision.yml").write_text(
        'torch: "1.0"\ndatasets:\n  - {name: proj-images, source: ./images}\n'
    )
    run = box.up("--no-bench", "--torch", "2.13", "--dataset", str(tmp_path / "other"), cwd=proj)
    assert run.returncode == 0, run.stderr[-3000:]
    [staged] = run.result("stage dataset")["result"]["results"]
    assert staged["dataset"]["path"] == f"{box.data}/datasets/other.lmdb"
    assert staged["dataset"]["count"] == 12


def test_provision_install_reads_provision_yml_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provision.cli.install import build_options

    (tmp_path / "provision.yml").write_text(
        'torch: "2.5"\npackages: [numpy]\nmirror: tuna\nenv: /p/env\n'
    )
    monkeypatch.chdir(tmp_path)
    parser = build_parser(only="install")
    options, proj = build_options(parser.parse_args(["install", "gpu1"]))
    assert proj is not None and proj.path == tmp_path / "provision.yml"
    assert (options.torch, options.extras, options.index.mirror, options.env) == (
        "2.5", ["numpy"], "tuna", "/p/env",
    )  # fmt: skip
    options, _ = build_options(
        parser.parse_args(["install", "gpu1", "--torch", "2.6", "--extra", "x"])
    )
    assert options.torch == "2.6" and options.extras == ["x"]


# -- optional steps ------------------------------------------------------------------------------


def test_a_failing_optional_step_is_named_and_the_play_goes_on(tmp_path: Path) -> None:
    """base.yml's 'tools people expect' is let go when apt fails (no mirror in reach): the rest of
    `up` runs, and the summary names the step and apt's reason."""
    import yaml

    from provision.cli.up import skipped_optional_steps
    from provision.engine.runner import run_playbook
    from provision.paths import bundle_dir

    base = yaml.safe_load((bundle_dir("playbooks") / "base.yml").read_text())
    tools = next(t for t in base[0]["tasks"] if t["name"] == "tools people expect")
    assert tools.get("ignore_errors") is True
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "tools people expect", "ignore_errors": True,
         "shell": "echo 'E: Unable to locate package htop' >&2; exit 100"},
        {"name": "after it", "command": "echo went on"},
    ]}]))  # fmt: skip
    result = run_playbook(play, hosts=None)
    assert [r.status for r in result.results] == ["failed", "changed"]  # the next task ran
    assert result.exit_code() == 0
    [(host, task, why)] = skipped_optional_steps(result)
    assert (host, task) == ("localhost", "tools people expect")
    assert why.endswith("E: Unable to locate package htop")
