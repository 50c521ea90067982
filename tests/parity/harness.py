"""The parity harness: run the corpus (tests/parity/corpus/*.yml) with ansible-playbook and with
`provision run` against the same fresh fleet hosts and compare what each left behind.

Format and rules: tests/parity/README.md. This module has no test of its own; the test is
tests/fleet/test_parity.py.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
INVENTORY_EXTRAS = HERE / "inventory"  # group_vars/ + host_vars/ copied beside the inventory
REPO = HERE.parents[1]
PARITY_ROOT = "/root/parity"  # every corpus playbook writes only under PARITY_ROOT/NAME
GROUP = "parity"
RECAP_KEYS = ("ok", "changed", "failed", "skipped", "rescued", "ignored", "unreachable")
SIDECAR_KEYS = {"alone", "idempotent", "check", "extra_vars", "env", "ignore_paths", "why"}
# Registered-value keys Ansible adds that provision does not promise (dropped on both sides,
# at any depth, in files under a `registered/` directory). Documented in README.md.
VOLATILE_KEYS = {"invocation", "start", "end", "delta", "warnings", "deprecations",
                 "ansible_loop_var", "ansible_index_var", "stdout_lines", "stderr_lines",
                 "cmd", "diff"}  # fmt: skip

ANSIBLE_TIMEOUT_S = 900  # one ansible-playbook invocation (all shared playbooks)
ANSIBLE_PLAYBOOK = shutil.which("ansible-playbook") or str(
    Path(sys.executable).parent / "ansible-playbook"
)

# Per-playbook recap counts from ansible-playbook running many playbooks in one invocation:
# ansible-playbook sends v2_playbook_on_stats after each playbook (with that playbook's stats).
CALLBACK = r"""
import json
import os

from ansible.plugins.callback import CallbackBase

KEYS = {"ok": "ok", "changed": "changed", "failures": "failed", "skipped": "skipped",
        "rescued": "rescued", "ignored": "ignored", "unreachable": "unreachable"}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "parity"

    def __init__(self):
        super().__init__()
        self.current = None
        self.recaps = {}
        self.failures = []
        self.seen = {}  # id(stats) -> totals already counted (in case stats are cumulative)

    def v2_playbook_on_start(self, playbook):
        self.current = os.path.basename(playbook._file_name)

    def v2_playbook_on_task_start(self, task, is_conditional):
        print(f"{self.current}: TASK {task.get_name()}", flush=True)

    def v2_playbook_on_handler_task_start(self, task):
        print(f"{self.current}: HANDLER {task.get_name()}", flush=True)

    def v2_runner_on_ok(self, result):
        changed = "changed" if result._result.get("changed") else "ok"
        print(f"  {changed}: {result._host.get_name()}", flush=True)

    def v2_runner_on_skipped(self, result):
        print(f"  skipped: {result._host.get_name()}", flush=True)

    def v2_playbook_on_include(self, included_file):
        # the recap counts each included file as an ok task (one per loop item)
        hosts = ",".join(h.get_name() for h in included_file._hosts)
        print(f"  included: {hosts} {os.path.basename(included_file._filename)}", flush=True)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        print(f"  failed: {result._host.get_name()} {str(result._result.get('msg'))[:300]}",
              flush=True)
        msg = result._result.get("msg") or result._result.get("stderr") or ""
        self.failures.append({"playbook": self.current, "host": result._host.get_name(),
                              "task": result.task_name, "ignored": ignore_errors, "msg": str(msg)[:500]})

    def v2_runner_on_unreachable(self, result):
        self.failures.append({"playbook": self.current, "host": result._host.get_name(),
                              "task": result.task_name, "unreachable": True,
                              "msg": str(result._result.get("msg"))[:500]})

    def v2_playbook_on_stats(self, stats):
        before = self.seen.get(id(stats), {})
        now = {h: stats.summarize(h) for h in stats.processed}
        self.recaps[self.current] = {
            h: {KEYS[k]: c.get(k, 0) - before.get(h, {}).get(k, 0) for k in KEYS}
            for h, c in now.items()
        }
        self.seen[id(stats)] = now
        with open(os.environ["PARITY_RECAP_FILE"], "w") as f:
            json.dump({"recaps": self.recaps, "failures": self.failures}, f)
"""

# Run inside each host (nsenter, not SSH): every entry under PARITY_ROOT with its type, mode,
# owner, group and content (text, else sha256), so neither tool's own view is trusted.
SNAPSHOT = r"""
import grp, hashlib, json, os, pwd, stat, sys
root = sys.argv[1]
out = {}
for base, dirs, files in os.walk(root):
    dirs.sort()
    for name in sorted(dirs) + sorted(files):
        path = os.path.join(base, name)
        st = os.lstat(path)
        rel = os.path.relpath(path, root)
        entry = {"mode": "%04o" % stat.S_IMODE(st.st_mode)}
        try:
            entry["owner"] = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            entry["owner"] = st.st_uid
        try:
            entry["group"] = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            entry["group"] = st.st_gid
        if stat.S_ISLNK(st.st_mode):
            entry["type"] = "link"
            entry["target"] = os.readlink(path)
        elif stat.S_ISDIR(st.st_mode):
            entry["type"] = "dir"
        else:
            entry["type"] = "file"
            data = open(path, "rb").read()
            try:
                entry["content"] = data.decode("utf-8")
            except UnicodeDecodeError:
                entry["sha256"] = hashlib.sha256(data).hexdigest()
        out[rel] = entry
print(json.dumps(out))
"""


@dataclass
class CorpusEntry:
    name: str  # file name, e.g. "loops.yml"
    path: Path
    alone: bool = False
    idempotent: bool = True
    check: bool = True
    extra_vars: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    ignore_paths: list[str] = field(default_factory=list)

    @property
    def stem(self) -> str:
        return self.path.stem


def discover(corpus: Path = CORPUS) -> list[CorpusEntry]:
    """Every corpus playbook with its optional sidecar NAME.parity.yml."""
    entries = []
    for path in sorted(corpus.glob("*.yml")):
        if path.name.endswith(".parity.yml"):
            continue
        entry = CorpusEntry(name=path.name, path=path)
        sidecar = path.with_name(path.stem + ".parity.yml")
        if sidecar.is_file():
            try:
                data = yaml.safe_load(sidecar.read_text()) or {}
            except yaml.YAMLError as exc:
                raise ValueError(f"{sidecar}: not valid YAML ({exc})") from None
            unknown = set(data) - SIDECAR_KEYS
            if unknown:
                raise ValueError(
                    f"{sidecar}: unknown keys {sorted(unknown)} (use {sorted(SIDECAR_KEYS)})"
                )
            for key in ("alone", "idempotent", "check", "extra_vars", "env", "ignore_paths"):
                if key in data:
                    setattr(entry, key, data[key])
            if entry.extra_vars:
                entry.alone = True  # its own invocation: -e applies to every playbook of one
        entries.append(entry)
    return entries


def drop_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: drop_volatile(v)
            for k, v in value.items()
            if k not in VOLATILE_KEYS and not str(k).startswith("_ansible")
        }
    if isinstance(value, list):
        return [drop_volatile(v) for v in value]
    return value


def normalize_snapshot(snapshot: dict[str, Any], ignore: list[str]) -> dict[str, Any]:
    out = {}
    for rel, entry in snapshot.items():
        if any(fnmatch.fnmatch(rel, pattern) for pattern in ignore):
            continue
        entry = dict(entry)
        if "/registered/" in f"/{rel}" and rel.endswith(".json") and "content" in entry:
            try:
                entry["content"] = drop_volatile(json.loads(entry["content"]))
            except ValueError:
                pass
        out[rel] = entry
    return out


@dataclass
class Workspace:
    """Temporary files for one harness run: the inventory directory, ansible.cfg, HOME."""

    root: Path
    fleet: Any
    runs: int = 0  # ansible-playbook invocations so far (names their logs)

    @property
    def inventory(self) -> Path:
        return self.root / "inventory"

    @property
    def config(self) -> Path:
        return self.root / "ansible.cfg"

    def prepare(self) -> None:
        shutil.copytree(INVENTORY_EXTRAS, self.inventory, dirs_exist_ok=True)
        lines = [f"[{GROUP}]"]
        for h in self.fleet.hosts:
            lines.append(f"{h.name} ansible_host={h.address} ansible_port={h.port}")
        (self.inventory / "hosts.ini").write_text("\n".join(lines) + "\n")
        (self.root / "home").mkdir(exist_ok=True)
        (self.root / "cp").mkdir(exist_ok=True)
        # Both tools read this file: inventory, user, key and host key checking come from it.
        self.config.write_text(
            "[defaults]\n"
            f"inventory = {self.inventory}\n"
            "remote_user = root\n"
            f"private_key_file = {self.fleet.key_file}\n"
            "host_key_checking = False\n"
            "forks = 8\n"
            "interpreter_python = /usr/bin/python3\n"
            "retry_files_enabled = False\n"
            "deprecation_warnings = False\n"
            "localhost_warning = False\n"
            f"callback_plugins = {self.root / 'callbacks'}\n"
            "stdout_callback = parity\n"
            "[ssh_connection]\n"
            "pipelining = True\n"
            f"control_path_dir = {self.root / 'cp'}\n"
            "ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile=/dev/null\n"
        )
        (self.root / "callbacks").mkdir(exist_ok=True)
        (self.root / "callbacks" / "parity.py").write_text(CALLBACK)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            HOME=str(self.root / "home"),
            ANSIBLE_CONFIG=str(self.config),
            ANSIBLE_LOCAL_TEMP=str(self.root / "ansible-local"),
            ANSIBLE_NOCOLOR="1",
            PYTHONPATH=str(REPO),
        )
        env.update(extra or {})
        return env

    # -- host state ----------------------------------------------------------------------------
    def wipe(self) -> None:
        for host in self.fleet.hosts:
            self.fleet.ns_exec(host, ["rm", "-rf", PARITY_ROOT])

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """{host: {relative path: entry}} for everything under PARITY_ROOT."""
        out = {}
        for host in self.fleet.hosts:
            # the host's own python3 (this process's may live under /root, private to the host)
            proc = self.fleet.ns_exec(host, ["python3", "-c", SNAPSHOT, PARITY_ROOT])
            out[host.name] = json.loads(proc.stdout)
        return out

    # -- the two tools -------------------------------------------------------------------------
    def ansible(self, entries: list[CorpusEntry], check: bool = False) -> dict[str, Any]:
        """ansible-playbook on these playbooks in as few invocations as it takes: a playbook
        Ansible refuses (a load error ends its whole invocation) is recorded as broken and the
        ones after it run again in the next invocation."""
        merged: dict[str, Any] = {"recaps": {}, "failures": [], "broken": {}, "output": ""}
        pending = list(entries)
        while pending:
            run = self._ansible_once(pending, check)
            merged["recaps"].update(run["recaps"])
            merged["failures"] += run["failures"]
            merged["output"] += run["output"]
            left = [e for e in pending if e.name not in run["recaps"]]
            if not left or run["returncode"] == 0:
                break
            merged["broken"][left[0].name] = run["output"]
            pending = left[1:]
        return merged

    def _ansible_once(self, entries: list[CorpusEntry], check: bool) -> dict[str, Any]:
        recap_file = self.root / "ansible-recap.json"
        recap_file.unlink(missing_ok=True)
        extra = entries[0].extra_vars if len(entries) == 1 else {}
        env_extra = {k: v for e in entries for k, v in e.env.items()}  # shared: name them apart
        args = [ANSIBLE_PLAYBOOK, *(str(e.path) for e in entries)]
        if extra:
            args += ["-e", json.dumps(extra)]
        if check:
            args.append("--check")
        self.runs += 1
        log = self.root / f"ansible-{self.runs:02d}{'-check' if check else ''}.log"
        with open(log, "w") as out:  # a log to watch while it runs, kept for failures
            out.write(" ".join(args) + "\n")
            out.flush()
            try:
                proc = subprocess.run(
                    args,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=self.root,
                    env=self.env({**env_extra, "PARITY_RECAP_FILE": str(recap_file)}),
                    stdin=subprocess.DEVNULL,  # vars_prompt, pause: never wait for a terminal
                    timeout=ANSIBLE_TIMEOUT_S,
                    check=False,
                )
                returncode = proc.returncode
            except subprocess.TimeoutExpired:
                returncode = -1
                out.write(f"\n(parity harness: stopped after {ANSIBLE_TIMEOUT_S}s)\n")
        output = log.read_text(errors="replace")[-6000:]
        data = (
            json.loads(recap_file.read_text())
            if recap_file.is_file()
            else {"recaps": {}, "failures": []}
        )
        data["returncode"] = returncode
        data["output"] = output
        return data

    def provision(self, entry: CorpusEntry, check: bool = False) -> dict[str, Any]:
        args = [sys.executable, "-m", "provision", "run", str(entry.path), "--json",
                "--ssh-config", os.devnull]  # fmt: skip
        if entry.extra_vars:
            args += ["-e", json.dumps(entry.extra_vars)]
        if check:
            args.append("--check")
        proc = subprocess.run(
            args,
            capture_output=True,
            text=True,
            cwd=self.root,
            env=self.env(entry.env),
            stdin=subprocess.DEVNULL,
            timeout=300,
            check=False,
        )
        try:
            doc = json.loads(proc.stdout)
        except ValueError:
            raise AssertionError(
                f"provision run {entry.name} gave no JSON ({proc.returncode}):\n{proc.stderr[-3000:]}"
            ) from None
        recap = {
            host: {k: int(counts.get(k, 0)) for k in RECAP_KEYS}
            for host, counts in doc["recap"].items()
        }
        failures = [
            r for r in doc.get("results", []) if r.get("status") in ("failed", "unreachable")
        ]
        return {"recap": recap, "failures": failures, "returncode": proc.returncode,
                "output": proc.stderr[-3000:]}  # fmt: skip


def per_playbook(ansible_runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{playbook name: {host: counts}} from one or more ansible-playbook invocations."""
    out: dict[str, dict[str, Any]] = {}
    for run in ansible_runs:
        for name, recap in run["recaps"].items():  # noqa: PERF102
            out[name] = {h: {k: c.get(k, 0) for k in RECAP_KEYS} for h, c in recap.items()}
    return out
