"""Ansible conformance by Ansible's own tests: ansible-core's integration targets, run once with
ansible-playbook (the baseline) and once with provision's ansible-playbook-compatible entry point
in its place (`python -m provision.cli.ansible_playbook`, put on PATH as `ansible-playbook`, so
`runme.sh` scripts run unchanged).

The targets come from the ansible-core sdist matching the installed ansible-core, downloaded at
test time into a cache dir (GPL: never vendored). Each target runs as ansible-test runs it on a
POSIX controller: a copy of the target and its dependencies under `test/integration/targets/`,
an inventory with `testhost ansible_connection=local`, `runme.sh` from the target's dir, or for a
role target a generated play `hosts: testhost, roles: [TARGET]` from `test/integration/`.

    python3 tests/conformance/conformance.py baseline   # re-derive baseline-<version>.json (Ansible)
    python3 tests/conformance/conformance.py score      # provision on the baseline's passing targets
    python3 tests/conformance/conformance.py one NAME [--ansible]   # one target, output printed

`score` rewrites FAILURES.md (each failing target, its reason, grouped by cause).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FAILURES_MD = HERE / "FAILURES.md"
SCORE_JSON = HERE / "score.json"

# -- selection: the rule, by the targets' own aliases ------------------------------------------
# A target counts when Ansible's own CI runs it on POSIX (`shippable/posix/...`) and nothing in
# its aliases says it needs more than a local connection on an unprivileged-enough test host.
SKIP_ALIASES: tuple[tuple[str, str], ...] = (
    ("disabled", "disabled by Ansible"),
    ("unsupported", "unsupported by Ansible's CI"),
    ("unstable", "unstable in Ansible's CI"),
    ("hidden", "a helper, not a test (runs as a dependency)"),
    ("destructive", "changes the test machine itself (packages, users, services)"),
    ("needs/root", "needs root on the test machine (changes it)"),
    ("needs/privileged", "needs a privileged container"),
    ("needs/ssh", "needs an SSH connection to itself"),
    ("needs/httptester", "needs Ansible's HTTP test container (network)"),
    ("non_local", "needs a non-local connection"),
    ("cloud/", "needs a cloud or a service container"),
    ("network/", "network devices"),
    ("windows", "Windows"),
    ("setup/", "needs a setup target run before it (ansible-test's setup/ aliases)"),
    ("needs/target/collection", "tests the collection loader (collections are plugins)"),
    ("needs/target/ansible-test", "tests ansible-test"),
    ("needs/target/setup_paramiko", "needs paramiko"),
    ("needs/target/setup_pexpect", "needs pexpect (interactive prompts)"),
    ("needs/target/setup_test_user", "creates a user on the test machine"),
    ("needs/target/setup_become_user_pair", "creates users on the test machine"),
    ("needs/target/binary_modules", "compiles Go modules"),
    ("needs/target/connection", "tests connection plugins"),
)
# Targets about Ansible's CLIs and plugin machinery, not the engine or the builtin modules:
# provision has no plugin loader (callbacks, connection/inventory/lookup plugins from disk), no
# ansible-doc/galaxy/vault/console/pull/test/inventory/config CLIs.
NOT_ENGINE = re.compile(
    r"^(ansible-|ansible_test|ansible_galaxy|ansiballz|callback|collections|connection|"
    r"inventory|module_utils|plugin|test_utils|support-|setup_|prepare_|incidental_|"
    r"rel_plugin|cli|config|data_tagging|binary|jinja_plugins|lookup_config|"
    r"ansible_log|ansible_debug|dataloader|deprecations|error_from_connection|"
    r"filter_encryption|interpreter_discovery|module_tracebacks|noexec|"
    r"old_style|pip|pause|playbook_output_validator|remote_tmp|result_pickle|"
    r"run_modules|throttle|unsafe_writes|want_json|windows|wrapper|ansible$)"
)


def skip_reason(name: str, aliases: list[str]) -> str | None:
    """Why a target is not selected (None: selected). The one rule; listed in FAILURES.md."""
    if not any(a.startswith("shippable/posix") for a in aliases):
        return "not run on POSIX by Ansible's CI"
    for alias in aliases:
        for prefix, why in SKIP_ALIASES:
            if alias == prefix or (prefix.endswith("/") and alias.startswith(prefix)) or (
                not prefix.endswith("/") and alias.startswith(prefix + "/")
            ):
                return f"{alias}: {why}"
    if NOT_ENGINE.match(name):
        return "tests Ansible's CLIs or plugin machinery, not the engine or builtin modules"
    return None


def read_aliases(target: Path) -> list[str]:
    path = target / "aliases"
    if not path.is_file():
        return []
    words = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            words.append(line)
    return words


def select(targets_dir: Path) -> tuple[list[str], dict[str, str]]:
    """(selected target names, {skipped name: reason})."""
    chosen, skipped = [], {}
    for target in sorted(p for p in targets_dir.iterdir() if p.is_dir()):
        why = skip_reason(target.name, read_aliases(target))
        runme = target / "runme.sh"
        if why is None and not runme.is_file() and not (target / "tasks" / "main.yml").is_file():
            why = "neither runme.sh nor tasks/main.yml"
        elif why is None and runme.is_file() and not any(
            "ansible-playbook" in p.read_text(errors="replace") for p in target.glob("*.sh")
        ):
            why = "its scripts never run ansible-playbook (nothing of the engine to compare)"
        if why is None:
            chosen.append(target.name)
        else:
            skipped[target.name] = why
    return chosen, skipped


# -- the sdist ---------------------------------------------------------------------------------
def ansible_version() -> str:
    return metadata.version("ansible-core")


def cache_root() -> Path:
    # not ~/.cache: tests run with a temporary HOME (tests/conftest.py); a fixed temp path keeps
    # the sdist between runs on one machine
    return Path(os.environ.get("PROVISION_CONFORMANCE_CACHE") or Path(tempfile.gettempdir()) /
                "provision-conformance-cache")


def fetch_targets(version: str | None = None) -> Path:
    """test/integration/targets of the ansible-core sdist `version` (default: installed)."""
    version = version or ansible_version()
    root = cache_root() / version
    targets = root / "test" / "integration" / "targets"
    if (root / ".complete").is_file():
        return targets
    root.mkdir(parents=True, exist_ok=True)
    download = root / "download"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
         "--quiet", "-d", str(download), f"ansible-core=={version}"],
        check=True, timeout=300,
    )
    sdist = next(download.glob("ansible_core-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        prefix = f"{tar.getnames()[0].split('/')[0]}/"
        members = [m for m in tar.getmembers() if m.name.startswith(prefix + "test/integration/")]
        for m in members:
            m.name = m.name[len(prefix):]
        tar.extractall(root, members=members, filter="data")
    (root / ".complete").write_text(version + "\n")
    return targets


# -- running one target --------------------------------------------------------------------------
def dependencies(targets_dir: Path, name: str) -> set[str]:
    """The target and what it needs: needs/target/ aliases and meta dependencies, transitively."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        cur = todo.pop()
        if cur in seen or not (targets_dir / cur).is_dir():
            continue
        seen.add(cur)
        for alias in read_aliases(targets_dir / cur):
            if alias.startswith("needs/target/"):
                todo.append(alias.split("/", 2)[2])
        meta = targets_dir / cur / "meta" / "main.yml"
        if meta.is_file():
            todo.extend(re.findall(r"^\s*-\s*(?:role:\s*)?([A-Za-z0-9_.-]+)\s*$",
                                   meta.read_text(), re.M))
            todo.extend(re.findall(r"role:\s*([A-Za-z0-9_.-]+)", meta.read_text()))
    return seen


SHIM = """#!/bin/sh
exec {python} -m provision.cli.ansible_playbook "$@"
"""


@dataclasses.dataclass
class Outcome:
    name: str
    passed: bool
    reason: str  # first line of the failure ("" when passed)
    seconds: float
    output: str = ""


def _env(work: Path, integration: Path, provision: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    cfg = work / "ansible.cfg"
    cfg.write_text("")
    env.update(
        ANSIBLE_FORCE_COLOR="false", ANSIBLE_NOCOLOR="true", ANSIBLE_FORCE_HANDLERS="true",
        ANSIBLE_HOST_PATTERN_MISMATCH="error", ANSIBLE_INVENTORY="/dev/null",
        ANSIBLE_DEPRECATION_WARNINGS="false", ANSIBLE_HOST_KEY_CHECKING="false",
        ANSIBLE_RETRY_FILES_ENABLED="false", ANSIBLE_CONFIG=str(cfg),
        ANSIBLE_LIBRARY="/dev/null", ANSIBLE_DEVEL_WARNING="false", PAGER="/bin/cat",
        OUTPUT_DIR=str(work / "output"), INVENTORY_PATH=str(integration / "inventory"),
        ANSIBLE_TEST_CI="", ANSIBLE_TEST_COVERAGE="", ANSIBLE_LOCAL_TEMP=str(work / "ltmp"),
        ANSIBLE_REMOTE_TEMP=str(work / "rtmp"), TMPDIR=str(work / "tmp"),
    )
    env.pop("NO_COLOR", None)
    for d in ("output", "ltmp", "rtmp", "tmp"):
        (work / d).mkdir(exist_ok=True)
    if provision:
        shim = work / "shim"
        shim.mkdir(exist_ok=True)
        (shim / "ansible-playbook").write_text(SHIM.format(python=sys.executable))
        (shim / "ansible-playbook").chmod(0o755)
        env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def run_target(targets_dir: Path, name: str, provision: bool, timeout: float,
               scratch: Path) -> Outcome:
    work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=scratch))
    integration = work / "test" / "integration"
    for dep in sorted(dependencies(targets_dir, name)):
        shutil.copytree(targets_dir / dep, integration / "targets" / dep, symlinks=True)
    (integration / "inventory").write_text(
        "[testgroup]\ntesthost ansible_connection=local ansible_pipelining=yes "
        f"ansible_python_interpreter={sys.executable}\n"
    )
    env = _env(work, integration, provision)
    target = integration / "targets" / name
    aliases = read_aliases(target)
    for alias in aliases:
        if alias.startswith("env/set/"):
            _, _, key, value = alias.split("/", 3)
            env[key] = value
    if (target / "runme.sh").is_file():
        cmd, cwd = ["./runme.sh"], target
        env["ANSIBLE_PLAYBOOK_DIR"] = str(target)
    else:
        gather = "gather_facts/no" not in aliases
        play = [{"hosts": "testhost", "gather_facts": gather, "vars_files": [],
                 "vars": {"output_dir": str(work / "output")}, "roles": [name]}]
        book = integration / f"{name}-play.yml"
        book.write_text(json.dumps(play, indent=4))
        cmd, cwd = ["ansible-playbook", book.name, "-i", "inventory"], integration
        env["ANSIBLE_ROLES_PATH"] = str(integration / "targets")
        env["ANSIBLE_PLAYBOOK_DIR"] = str(integration)
        if provision:
            cmd[0] = str(work / "shim" / "ansible-playbook")
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        rc = None
    seconds = time.monotonic() - start
    text = out.decode("utf-8", "replace")
    shutil.rmtree(work, ignore_errors=True)
    if rc == 0:
        return Outcome(name, True, "", seconds, text)
    reason = f"timed out after {timeout:.0f} s" if rc is None else first_failure(text, rc)
    return Outcome(name, False, reason, seconds, text)


_FAILURE_LINE = re.compile(
    r"^(fatal: \[|failed: \[|ERROR!|\[ERROR\]|error:|FAILED|Traceback|.*: (command )?not found$|"
    r"AssertionError|.* No such file)"
)


def _ignored(lines: list[str], i: int) -> bool:
    """Whether the failure reported at lines[i] is followed by `...ignoring` in its task."""
    for line in lines[i + 1:]:
        if line.startswith(("TASK [", "PLAY ", "RUNNING HANDLER [")):
            return False
        if line.strip() == "...ignoring":
            return True
    return False


def first_failure(text: str, rc: int) -> str:
    """The first line of the failure that ended the run (with the task it happened in): the last
    failure reported that was not ignored (a runme.sh's expected failures come before its
    real one), else the output's last line."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    task, found = "", ""
    for i, line in enumerate(lines):
        if line.startswith(("TASK [", "RUNNING HANDLER [")):
            task = line.rstrip("* ")
        if _FAILURE_LINE.match(line) and not _ignored(lines, i):
            if line.endswith(":") and i + 1 < len(lines):
                line = f"{line} {lines[i + 1].strip()}"
            if line.startswith("fatal: [") and found.startswith(f"{task}: [ERROR]"):
                continue  # the [ERROR] line just before says it better
            found = f"{task}: {line}" if task and not line.startswith("fatal") else line
    if found:
        return found[:300]
    tail = [line for line in lines if not line.startswith("+")]
    return (tail[-1][:300] if tail else f"exit {rc}, no output")


def run_all(targets_dir: Path, names: list[str], provision: bool, workers: int,
            timeout: float, journal: Path | None = None) -> list[Outcome]:
    """Each target once, in `workers` parallel; with `journal`, each outcome is appended to it
    as it ends (a JSON line), so an interrupted baseline resumes (`--resume`)."""
    scratch = Path(tempfile.mkdtemp(prefix="conformance-"))
    lock = threading.Lock()

    def one(name: str) -> Outcome:
        outcome = run_target(targets_dir, name, provision, timeout, scratch)
        if journal is not None:
            with lock, journal.open("a") as f:
                f.write(json.dumps({"name": name, "passed": outcome.passed,
                                    "reason": outcome.reason,
                                    "seconds": round(outcome.seconds, 1)}) + "\n")
        return outcome

    try:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            futures = [pool.submit(one, n) for n in names]
            return sorted((f.result() for f in futures), key=lambda o: o.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def read_journal(journal: Path) -> list[Outcome]:
    if not journal.is_file():
        return []
    done = {}
    for line in journal.read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            done[d["name"]] = Outcome(d["name"], d["passed"], d["reason"], d["seconds"])
    return list(done.values())


# -- causes --------------------------------------------------------------------------------------
CAUSES: tuple[tuple[str, str], ...] = (
    ("timed out", "too slow or waits forever (timeout)"),
    ("is not supported|not supported in|unsupported", "unsupported keyword, option or form"),
    ("unknown module|no module|couldn't resolve module|is not a module", "missing module"),
    ("filter|lookup|test '", "filters, tests, lookups"),
    ("not found|No such file|does not exist", "a file, role or name not found"),
    ("undefined|is not defined", "undefined variable"),
    ("template|Jinja|syntax", "templating"),
    (r"^fatal: |^failed: |FAILED", "a task's result differs (fails under provision)"),
)


def cause(reason: str) -> str:
    for pattern, label in CAUSES:
        if re.search(pattern, reason, re.I):
            return label
    return "different behaviour or output (runme.sh's own checks)"


# -- records -------------------------------------------------------------------------------------
def baseline_path(version: str) -> Path:
    return HERE / f"baseline-{version}.json"


def load_baseline(version: str) -> dict:
    return json.loads(baseline_path(version).read_text())


def write_failures(version: str, selected: list[str], baseline: dict,
                   outcomes: list[Outcome], skipped: dict[str, str]) -> None:
    passing = [o.name for o in outcomes if o.passed]
    failing = [o for o in outcomes if not o.passed]
    total = len(baseline["passed"])
    groups: dict[str, list[Outcome]] = {}
    for o in failing:
        groups.setdefault(cause(o.reason), []).append(o)
    lines = [
        "# Conformance: ansible-core's integration targets under provision",
        "",
        f"ansible-core {version}: **{len(passing)} of the {total} selected targets that pass "
        f"under ansible-playbook pass under provision ({100 * len(passing) / max(total, 1):.0f} %)**"
        f" ({len(selected)} selected; {len(baseline['failed'])} fail under Ansible itself here "
        f"and do not count; {len(baseline.get('not_run', []))} not yet run under Ansible).",
        "",
        "Written by `python3 tests/conformance/conformance.py score` (tests/conformance/README.md).",
        "",
        "## Failing under provision, by cause",
        "",
    ]
    for label, group in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines += [f"### {label} ({len(group)})", ""]
        lines += [f"- `{o.name}`: {o.reason.replace('`', chr(39))}" for o in group]
        lines.append("")
    lines += ["## Passing under provision", "", ", ".join(f"`{n}`" for n in passing) or "none", ""]
    lines += ["## Failing under Ansible itself here (not counted)", ""]
    lines += [f"- `{n}`: {r.replace('`', chr(39))}" for n, r in sorted(baseline["failed"].items())]
    if baseline.get("not_run"):
        lines += ["", "## Selected, not yet run under Ansible here (not counted)", "",
                  "The recorded baseline was interrupted (its time on a shared machine); "
                  "`conformance.py baseline --resume` runs these and records them:", "",
                  ", ".join(f"`{n}`" for n in baseline["not_run"])]
    lines += ["", "## Not selected (the rule: conformance.py `skip_reason`)", ""]
    by_reason: dict[str, list[str]] = {}
    for n, r in skipped.items():
        by_reason.setdefault(r, []).append(n)
    for r, names in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"- {r} ({len(names)}): {', '.join(names)}")
    FAILURES_MD.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["baseline", "score", "one", "list"])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--ansible", action="store_true", help="one: with ansible-playbook")
    parser.add_argument("-j", "--workers", type=int, default=max(2, os.cpu_count() or 2))
    parser.add_argument("--timeout", type=float, default=None, help="seconds per target")
    parser.add_argument("--no-record", action="store_true", help="score: do not rewrite files")
    parser.add_argument("--record-only", action="store_true",
                        help="baseline: write the record from what the journal holds, run none")
    parser.add_argument("--resume", action="store_true",
                        help="baseline: keep the targets an interrupted run already recorded")
    args = parser.parse_intermixed_args(argv)
    version = ansible_version()
    targets_dir = fetch_targets(version)
    selected, skipped = select(targets_dir)
    if args.what == "list":
        print("\n".join(selected))
        print(f"{len(selected)} selected, {len(skipped)} not", file=sys.stderr)
        return 0
    if args.what == "one":
        scratch = Path(tempfile.mkdtemp(prefix="conformance-"))
        try:
            for name in args.names:
                o = run_target(targets_dir, name, not args.ansible, args.timeout or 300, scratch)
                print(o.output if len(args.names) == 1 else "", end="")
                print(f"{name}: {'PASS' if o.passed else 'FAIL ' + o.reason} ({o.seconds:.1f} s)")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return 0
    if args.what == "baseline":
        journal = cache_root() / version / "baseline.jsonl"
        if not args.resume:
            journal.unlink(missing_ok=True)
        earlier = [o for o in read_journal(journal) if o.name in selected]
        names = [n for n in (args.names or selected) if n not in {o.name for o in earlier}]
        if args.record_only:  # what an interrupted run recorded; the rest stays not run
            names = []
        outcomes = earlier + run_all(targets_dir, names, False, args.workers,
                                     args.timeout or 300, journal)
        outcomes.sort(key=lambda o: o.name)
        ran = {o.name for o in outcomes}
        record = {
            "ansible_core": version,
            "command": "python3 tests/conformance/conformance.py baseline"
            " (after an interruption: baseline --resume)",
            "selected": selected,
            "not_run": [n for n in selected if n not in ran],
            "passed": [o.name for o in outcomes if o.passed],
            "failed": {o.name: o.reason for o in outcomes if not o.passed},
            "seconds": {o.name: round(o.seconds, 1) for o in outcomes},
        }
        baseline_path(version).write_text(json.dumps(record, indent=1) + "\n")
        print(f"ansible-playbook: {len(record['passed'])} of {len(ran)} pass")
        for n, r in record["failed"].items():
            print(f"  FAIL {n}: {r}")
        return 0
    if args.names and not baseline_path(version).is_file():
        baseline = {"passed": [], "failed": {}}
    else:
        baseline = load_baseline(version)
    names = args.names or baseline["passed"]
    journal = cache_root() / version / "score.jsonl"
    if not args.resume:
        journal.unlink(missing_ok=True)
    earlier = [o for o in read_journal(journal) if o.name in names]
    todo = [n for n in names if n not in {o.name for o in earlier}]
    outcomes = earlier + run_all(targets_dir, todo, True, args.workers, args.timeout or 120,
                                 journal)
    outcomes.sort(key=lambda o: o.name)
    passed = sum(o.passed for o in outcomes)
    print(f"provision: {passed} of {len(names)} targets that pass under ansible-playbook "
          f"{version} pass ({100 * passed / max(len(names), 1):.0f} %)")
    for o in outcomes:
        if not o.passed:
            print(f"  FAIL {o.name}: {o.reason}")
    if not args.no_record and not args.names:
        write_failures(version, selected, baseline, outcomes, skipped)
        SCORE_JSON.write_text(json.dumps(
            {"ansible_core": version, "passed": passed, "of": len(names),
             "passing": sorted(o.name for o in outcomes if o.passed)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
