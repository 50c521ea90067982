"""The roles parity corpus: public roles' own test playbooks, unchanged, run by ansible-playbook on
one twin host and by `provision run` on the other, and what each left compared.

Twins: two fleet hosts of kind ``ownroot`` (tests/fleet/kinds.py), each with its own writable copy
of this machine's root filesystem, so a role may change /etc, /usr, /var freely. Every file a role
writes lands in the host's overlay upper layer (or its own /root, /home tmpfs), so "the files it
touched" are read from there, inside the host's mount namespace, not through either tool.

Per role, on a fresh pair of twins (a new fleet: nothing an earlier role did is on them), both
twins at once: snapshot -> first run -> snapshot -> second run. Compared:
loads (provision accepted the playbook), recap (ok/changed/failed/skipped/... of the first run),
files (what the first run created, changed or removed: content, mode, owner, group, link target),
idempotent (the second run's recap, changed=0 where Ansible's is 0). Run settings, exclusions and
normalisations, each with its reason: corpus.yml. Format: README.md.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "parity"))
from harness import ANSIBLE_PLAYBOOK, CALLBACK, RECAP_KEYS  # noqa: E402

HOSTNAME = "twin"  # both twins' UTS name and inventory name: facts and templates agree
# one playbook run by one tool (ROLES_RUN_TIMEOUT: more on a machine shared with other runs)
RUN_TIMEOUT_S = int(os.environ.get("ROLES_RUN_TIMEOUT", "300"))
# Written by the tools themselves or by the system as a side effect, never by a role's tasks:
# left out of the file comparison on both twins (each pattern with its reason).
TOOL_PATHS = {
    "root/.ansible/*": "Ansible's remote temp dir and its module cache",
    "home/*/.ansible/*": "Ansible's remote temp dir of a become_user",
    "root/.cache/*": "provision's agent cache (and pip's)",
    "root/.provision*": "provision's host-side state",
    "var/cache/*": "apt/debconf caches: rewritten by any apt call, binary",
    "var/lib/apt/*": "apt lists (empty sources on the twins) and its state",
    "var/lib/dpkg/*": "dpkg's status timestamps",
    "var/log/*": "logs of the tools' own commands (journal, apt history, sudo)",
    "var/lib/sudo/*": "sudo's timestamps",
    "etc/ld.so.cache": "rebuilt by ldconfig with a fresh timestamp",
}

# Inside the host's mount namespace (not chrooted): every path the overlay's upper layer holds
# (whiteouts are removals) plus the host's own /root and /home tmpfs, each with type, mode,
# owner/group (resolved through the host's own passwd/group), content (text) or sha256.
SNAPSHOT = r"""
import hashlib, json, os, stat, sys
root, upper, lower = sys.argv[1], sys.argv[2], sys.argv[3]
def names(path, col):
    out = {}
    try:
        for line in open(os.path.join(root, path), encoding="utf-8", errors="replace"):
            parts = line.split(":")
            if len(parts) > 2 and parts[col].isdigit():
                out[int(parts[col])] = parts[0]
    except OSError:
        pass
    return out
users, groups = names("etc/passwd", 2), names("etc/group", 2)
out = {}
def entry(rel, top=root):
    path = os.path.join(top, rel)
    try:
        st = os.lstat(path)
    except OSError:
        return {"type": "deleted"}
    e = {"mode": "%04o" % stat.S_IMODE(st.st_mode), "owner": users.get(st.st_uid, st.st_uid),
         "group": groups.get(st.st_gid, st.st_gid)}
    if stat.S_ISLNK(st.st_mode):
        e.update(type="link", target=os.readlink(path))
    elif stat.S_ISDIR(st.st_mode):
        e["type"] = "dir"
    elif stat.S_ISREG(st.st_mode):
        e["type"] = "file"
        if st.st_size > 4 << 20:
            e["size"] = st.st_size
        else:
            data = open(path, "rb").read()
            try:
                e["content"] = data.decode("utf-8")
            except UnicodeDecodeError:
                e["sha256"] = hashlib.sha256(data).hexdigest()
    else:
        e["type"] = "special"
    return e
for top, base in ((upper, ""), (os.path.join(root, "root"), "root"), (os.path.join(root, "home"), "home")):
    for d, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            rel = os.path.join(base, os.path.relpath(os.path.join(d, name), top))
            if base == "" and rel.split("/")[0] in ("root", "home", "tmp", "run", "proc", "sys", "dev", "fleet"):
                continue
            st = os.lstat(os.path.join(d, name))
            if base == "" and stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                out[rel] = {"type": "deleted"}
            else:
                e = entry(rel)
                # copied up unchanged (a directory something was written into): not a change
                if base == "" and e == entry(rel, lower):
                    continue
                out[rel] = e
print(json.dumps(out))
"""


@dataclass
class Role:
    """One corpus entry (corpus.yml)."""

    name: str
    playbook: Path
    source: str = ""  # the roles/collection folder it runs (SOURCES.md names its repo)
    extra_vars: dict[str, Any] = field(default_factory=dict)
    skip_tags: list[str] = field(default_factory=list)
    check: bool = False  # run both tools with --check (the role can't apply on the fleet)
    normalise: dict[str, str] = field(default_factory=dict)  # path pattern -> why
    # path -> {regular expression -> why}: text in that file that differs by nature between the
    # twins (their own addresses), replaced by <masked> on both before the comparison
    mask: dict[str, dict[str, str]] = field(default_factory=dict)
    excluded: str = ""  # why it is left out of the parity assertions ("" = it is asserted)
    # A known provision gap (issue 21 is open while any is listed): the first place provision
    # still differs from Ansible. Not run in CI; ROLES_WITH_GAPS=1 (or ROLES_ONLY naming it)
    # runs it, so closing the gap is checked by removing this line.
    gap: str = ""
    notes: str = ""  # what the settings above change and why


def load_corpus(path: Path = HERE / "corpus.yml") -> list[Role]:
    data = yaml.safe_load(path.read_text())
    roles = []
    known = set(Role.__dataclass_fields__)
    for item in data["roles"]:
        unknown = set(item) - known
        if unknown:
            raise ValueError(f"{path}: role {item.get('name')}: unknown keys {sorted(unknown)}")
        item = dict(item)
        item["playbook"] = HERE / item["playbook"]
        if not item["playbook"].is_file():
            raise ValueError(f"{path}: role {item['name']}: no playbook {item['playbook']}")
        roles.append(Role(**item))
    return roles


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What changed between two snapshots: path -> the new entry ({"type": "deleted"} if gone)."""
    out = {}
    for rel in sorted(set(before) | set(after)):
        old, new = before.get(rel), after.get(rel, {"type": "deleted"})
        if old == new:  # (absent before and a whiteout now: a file of the lower layer removed)
            continue
        out[rel] = new
    return out


def normalise(
    touched: dict[str, Any], patterns: dict[str, str], mask: dict[str, dict[str, str]] | None = None
) -> dict[str, Any]:
    """Drop the tools' own files and the role's declared volatile paths, and mask the text that
    differs by nature between the twins (each with its reason in corpus.yml)."""
    skip = [*TOOL_PATHS, *patterns]
    skip += [p[:-2] for p in skip if p.endswith("/*")]  # "dir/*" covers the dir itself too
    kept = {rel: e for rel, e in touched.items() if not any(fnmatch.fnmatch(rel, p) for p in skip)}
    for rel, regexes in (mask or {}).items():
        entry = kept.get(rel)
        if entry and isinstance(entry.get("content"), str):
            text = entry["content"]
            for regex in regexes:
                text = re.sub(regex, "<masked>", text)
            kept[rel] = {**entry, "content": text}
    return kept


def nonzero(recap: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {h: {k: v for k, v in c.items() if v} for h, c in recap.items() if any(c.values())}


@dataclass
class Twin:
    """One twin host and the tool that runs on it."""

    tool: str  # "ansible" | "provision"
    fleet: Any
    host: Any
    root: Path  # this twin's workspace: ansible.cfg, inventory, HOME

    @property
    def corpus(self) -> Path:
        """This twin's own copy of the corpus (roles, collections, playbooks, the team project):
        a role's local steps (`delegate_to: localhost`, robertdebock.users' ssh_keys/ made 0750)
        write beside its playbook, so the two tools, running at once, must not share that folder
        (one would see the other's change), and nothing may be written into the repository."""
        return self.root / "corpus"

    def playbook(self, role: Role) -> Path:
        return self.corpus / role.playbook.relative_to(HERE)

    def control_dir(self) -> Path:
        """Ansible's ControlPath folder: short, as a unix socket's path has 108 bytes at most
        (under a pytest-xdist worker's tmp path, root/'cp' is too long for ssh)."""
        link = self.root / "cp"
        if not link.is_symlink():
            if link.is_dir():
                link.rmdir()
            link.symlink_to(tempfile.mkdtemp(prefix="pvcp-", dir="/tmp"))
        return Path(os.readlink(link))

    def prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if not self.corpus.exists():
            own = {"roles_harness.py", "vendor.py", "__pycache__"}  # the harness, not the corpus
            shutil.copytree(HERE, self.corpus, symlinks=True,
                            ignore=lambda d, names: [n for n in names if Path(d) == HERE and n in own])
        for sub in ("home", "callbacks", "ansible-local"):
            (self.root / sub).mkdir(exist_ok=True)
        (self.root / "callbacks" / "parity.py").write_text(CALLBACK)
        (self.root / "hosts.ini").write_text(
            f"[corpus]\n{HOSTNAME} ansible_host={self.host.address} ansible_port={self.host.port}\n"
        )
        self.config.write_text(
            "[defaults]\n"
            f"inventory = {self.root / 'hosts.ini'}\n"
            "remote_user = root\n"
            f"private_key_file = {self.fleet.key_file}\n"
            "host_key_checking = False\n"
            f"roles_path = {self.corpus / 'roles'}\n"
            f"collections_path = {self.corpus / 'collections'}\n"
            "interpreter_python = /usr/bin/python3\n"
            "retry_files_enabled = False\n"
            "deprecation_warnings = False\n"
            "localhost_warning = False\n"
            "force_color = False\n"
            f"callback_plugins = {self.root / 'callbacks'}\n"
            "stdout_callback = parity\n"
            "[ssh_connection]\n"
            "pipelining = True\n"
            f"control_path_dir = {self.control_dir()}\n"
            "ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile=/dev/null\n"
        )
        # The twin's own setup, the same on both: its name, and apt with no sources (no mirror is
        # reachable from fleet hosts: `apt update` succeeds with nothing, installed packages stay
        # installed, a missing one fails as "no package matching").
        self.fleet.ns_exec(
            self.host,
            f"hostname {HOSTNAME} && rm -f /etc/apt/sources.list && "
            "find /etc/apt/sources.list.d -mindepth 1 -delete && apt-get update -qq",
        )

    @property
    def config(self) -> Path:
        return self.root / "ansible.cfg"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            HOME=str(self.root / "home"),
            ANSIBLE_CONFIG=str(self.config),
            ANSIBLE_LOCAL_TEMP=str(self.root / "ansible-local"),
            ANSIBLE_NOCOLOR="1",
            PYTHONPATH=str(REPO),
            PARITY_RECAP_FILE=str(self.root / "recap.json"),
        )
        return env

    def snapshot(self) -> dict[str, Any]:
        assert self.host.keeper is not None
        merged = self.host.workdir / "root"
        upper = self.host.workdir / "ovl" / "upper"
        proc = subprocess.run(
            ["nsenter", "-t", str(self.host.keeper.pid), "-m", "--",
             "/usr/bin/python3", "-c", SNAPSHOT, str(merged), str(upper), self.host.rootfs],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        return json.loads(proc.stdout)

    def run(self, role: Role) -> dict[str, Any]:
        """One run of the role's playbook: {loads, recap, failures, error, output, seconds}."""
        started = time.monotonic()
        if self.tool == "ansible":
            out = self._ansible(role)
        else:
            out = self._provision(role)
        out["seconds"] = round(time.monotonic() - started, 1)
        return out

    def _args_common(self, role: Role) -> list[str]:
        args = []
        if role.extra_vars:
            args += ["-e", json.dumps(role.extra_vars)]
        if role.skip_tags:
            args += ["--skip-tags", ",".join(role.skip_tags)]
        if role.check:
            args.append("--check")
        return args

    def _ansible(self, role: Role) -> dict[str, Any]:
        recap_file = self.root / "recap.json"
        recap_file.unlink(missing_ok=True)
        args = [ANSIBLE_PLAYBOOK, str(self.playbook(role)), *self._args_common(role)]
        proc = self._call(args)
        data = json.loads(recap_file.read_text()) if recap_file.is_file() else {}
        recaps = data.get("recaps", {})
        recap = next(iter(recaps.values()), {})
        loads = bool(recaps)
        return {
            "loads": loads,
            "recap": {h: {k: int(c.get(k, 0)) for k in RECAP_KEYS} for h, c in recap.items()},
            "failures": [
                {"task": f.get("task"), "msg": f.get("msg", "")[:400]}
                for f in data.get("failures", [])
            ],
            "error": "" if loads else tail(proc["output"], 12),
            "output": proc["output"],
        }

    def _provision(self, role: Role) -> dict[str, Any]:
        args = [sys.executable, "-m", "provision", "run", str(self.playbook(role)), "--json",
                "--ssh-config", os.devnull, *self._args_common(role)]  # fmt: skip
        proc = self._call(args, split=True)
        try:
            doc = json.loads(proc["stdout"])
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or "recap" not in doc:
            return {"loads": False, "recap": {}, "failures": [],
                    "error": tail(proc["stderr"] or proc["stdout"], 12), "output": proc["stderr"]}  # fmt: skip
        recap = {h: {k: int(c.get(k, 0)) for k in RECAP_KEYS} for h, c in doc["recap"].items()}
        failures = [
            {
                "task": r.get("task") or r.get("name"),
                "msg": str(r.get("msg") or r.get("error") or "")[:400],
            }
            for r in doc.get("results", [])
            if r.get("status") in ("failed", "unreachable") and not r.get("ignored")
        ]
        # each task's outcome, in order (to find which task a recap difference comes from,
        # beside the TASK / "  ok: host" lines of ansible-playbook's output)
        tasks = [
            f"{r.get('task')}: {'changed' if r.get('changed') else r.get('status')}"
            for r in doc.get("results", [])
        ]
        return {"loads": True, "recap": recap, "failures": failures, "error": "",
                "output": proc["stderr"], "tasks": tasks}  # fmt: skip

    def _call(self, args: list[str], split: bool = False) -> dict[str, str]:
        try:
            proc = subprocess.run(
                args, cwd=self.root, env=self.env(), stdin=subprocess.DEVNULL, capture_output=True,
                text=True, timeout=RUN_TIMEOUT_S, check=False,
            )  # fmt: skip
            stdout, stderr = proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            stdout = (
                exc.stdout.decode(errors="replace")
                if isinstance(exc.stdout, bytes)
                else exc.stdout or ""
            )
            stderr = f"(stopped after {RUN_TIMEOUT_S}s)\n" + (
                exc.stderr.decode(errors="replace")
                if isinstance(exc.stderr, bytes)
                else exc.stderr or ""
            )
        if split:
            return {"stdout": stdout, "stderr": stderr}
        return {"output": stdout + stderr}


def tail(text: str, lines: int) -> str:
    kept = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(kept[-lines:])


def run_role(twin: Twin, role: Role) -> dict[str, Any]:
    before = twin.snapshot()
    first = twin.run(role)
    after = twin.snapshot()
    second = twin.run(role)
    return {
        "first": first,
        "second": second,
        "touched": normalise(diff(before, after), role.normalise, role.mask),
    }


def run_corpus(
    workdir: Path, roles: list[Role], log=print, sink: Path | None = None
) -> dict[str, dict[str, Any]]:
    """Every role on its own fresh pair of twins (nothing an earlier role did is on them), the two
    tools at the same time: {role: {tool: result}}; `sink` gets the results so far after each
    role (a run stopped half-way still tells)."""
    results: dict[str, dict[str, Any]] = {}
    for n, role in enumerate(roles):
        per_tool: dict[str, Any] = {}
        fleet, twins = start_twins(workdir / f"{n:02d}")
        try:

            def one(
                tool: str, role: Role = role, per_tool: dict = per_tool, twins: dict = twins
            ) -> None:
                try:
                    per_tool[tool] = run_role(twins[tool], role)
                except Exception as exc:  # recorded, reported, and the next role still runs
                    per_tool[tool] = {"crash": f"{type(exc).__name__}: {exc}"}

            threads = [threading.Thread(target=one, args=(t,)) for t in twins]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            fleet.stop()
        results[role.name] = per_tool
        if sink is not None:
            sink.write_text(json.dumps(results, indent=1, default=str))
        log(
            f"{role.name}: "
            + ", ".join(
                f"{t} {r.get('first', {}).get('seconds', '?')}s+{r.get('second', {}).get('seconds', '?')}s"
                for t, r in per_tool.items()
            )
        )
    return results


# -- verdicts ----------------------------------------------------------------------------------


def verdicts(role: Role, result: dict[str, Any]) -> dict[str, Any]:
    """{loads, recap, files, idempotent}: True/False per aspect (None = not comparable), and why."""
    a, p = result.get("ansible", {}), result.get("provision", {})
    if "crash" in a or "crash" in p:
        why = a.get("crash") or p.get("crash")
        return {k: False for k in ("loads", "recap", "files", "idempotent")} | {"why": why}
    out: dict[str, Any] = {"why": ""}
    out["loads"] = p["first"]["loads"]
    if not a["first"]["loads"]:
        return {"loads": None, "recap": None, "files": None, "idempotent": None,
                "why": "ansible-playbook did not run it:\n" + a["first"]["error"]}  # fmt: skip
    if not out["loads"]:
        out.update(recap=False, files=False, idempotent=False, why=p["first"]["error"])
        return out
    theirs, ours = nonzero(a["first"]["recap"]), nonzero(p["first"]["recap"])
    early = not_compared(a["first"], p["first"])
    if early:  # a match there would exercise nothing of the role: it is no match
        return {**out, "recap": None, "files": None, "idempotent": None, "compared": False,
                "why": early}  # fmt: skip
    out["compared"] = True
    out["recap"] = theirs == ours
    out["files"] = a["touched"] == p["touched"]
    t2, o2 = nonzero(a["second"]["recap"]), nonzero(p["second"]["recap"])
    zero = all(c.get("changed", 0) == 0 for c in t2.values())
    out["idempotent"] = t2 == o2 and (
        not zero or all(c.get("changed", 0) == 0 for c in o2.values())
    )
    why = []
    if not out["recap"]:
        why.append(f"recap: ansible {theirs} / provision {ours}")
        if p["first"]["failures"]:
            why.append(f"provision failed at: {p['first']['failures'][:3]}")
        if a["first"]["failures"]:
            why.append(f"ansible failed at: {a['first']['failures'][:3]}")
    if not out["files"]:
        why.append("files: " + files_diff(a["touched"], p["touched"]))
    if not out["idempotent"]:
        why.append(f"second run: ansible {t2} / provision {o2}")
    out["why"] = "\n".join(why)
    return out


def not_compared(theirs: dict[str, Any], ours: dict[str, Any]) -> str:
    """Why a role was not compared ("" if it was): both tools failed before the role's main work,
    i.e. each first run failed having changed nothing (the same early failure on both twins)."""
    def early(run: dict[str, Any]) -> bool:
        counts = [c for c in run["recap"].values()]
        return bool(counts) and all(c.get("failed", 0) and not c.get("changed", 0) for c in counts)

    if not (early(theirs) and early(ours)):
        return ""
    where = [f["task"] for f in theirs.get("failures", [])[:1]] or ["?"]
    return (f"not compared: both tools fail at `{where[0]}` before the role changed anything "
            f"(ansible {nonzero(theirs['recap'])}, provision {nonzero(ours['recap'])})")  # fmt: skip


def files_diff(theirs: dict[str, Any], ours: dict[str, Any], limit: int = 8) -> str:
    lines = []
    for rel in sorted(set(theirs) | set(ours)):
        a, p = theirs.get(rel), ours.get(rel)
        if a == p:
            continue
        if a is None:
            lines.append(f"only provision touched /{rel}")
        elif p is None:
            lines.append(f"only ansible touched /{rel}")
        else:
            keys = sorted(k for k in set(a) | set(p) if a.get(k) != p.get(k))
            lines.append(f"/{rel} differs in {keys}" + (
                f" (ansible {a.get('mode')}/{a.get('owner')}, provision {p.get('mode')}/{p.get('owner')})"
                if set(keys) & {"mode", "owner", "group"} else ""))  # fmt: skip
    more = f" (+{len(lines) - limit} more)" if len(lines) > limit else ""
    return "; ".join(lines[:limit]) + more


MARK = {True: "yes", False: "**no**", None: "n/a"}
NOT_COMPARED = "not compared"


def table(roles: list[Role], results: dict[str, dict[str, Any]]) -> str:
    """The closing note's table: role x (loads, recap, files, idempotent), then the reasons."""
    rows = ["| role | source | loads | recap | files | idempotent |", "|---|---|---|---|---|---|"]
    notes = []
    for role in roles:
        if role.excluded:
            rows.append(f"| {role.name} | {role.source} | excluded | | | |")
            notes.append(f"- **{role.name}** excluded: {role.excluded}")
            continue
        if role.name not in results and role.gap:
            rows.append(f"| {role.name} | {role.source} | known gap | | | |")
            notes.append(f"- **{role.name}** known gap: {role.gap}")
            continue
        if role.name not in results:
            rows.append(f"| {role.name} | {role.source} | not run | | | |")
            continue
        v = verdicts(role, results[role.name])
        if v.get("compared") is False:
            rows.append(f"| {role.name} | {role.source} | {MARK[v['loads']]} | {NOT_COMPARED} | | |")
        else:
            rows.append(f"| {role.name} | {role.source} | " + " | ".join(
                MARK[v[k]] for k in ("loads", "recap", "files", "idempotent")) + " |")  # fmt: skip
        if v["why"]:
            notes.append(f"- **{role.name}**: " + re.sub(r"\s*\n\s*", " / ", v["why"])[:1500])
    return "\n".join(rows) + ("\n\n" + "\n".join(notes) if notes else "") + "\n"


def start_twins(workdir: Path):
    """A fleet of two ownroot hosts and the twins on them (ansible on gpu1, provision on gpu2)."""
    sys.path.insert(0, str(REPO / "tests" / "fleet"))
    from fleet import Fleet

    fleet = Fleet(2, kinds="ownroot").start()
    try:
        twins = {
            "ansible": Twin("ansible", fleet, fleet.hosts[0], workdir / "ansible"),
            "provision": Twin("provision", fleet, fleet.hosts[1], workdir / "provision"),
        }
        for twin in twins.values():
            twin.prepare()
    except BaseException:
        fleet.stop()
        raise
    return fleet, twins


def main(argv: list[str]) -> int:
    """python3 tests/roles_corpus/roles_harness.py [ROLE ...] [--json OUT]: run the corpus on fresh
    twins and print the table (as root; the SSH test fleet's requirements).
    python3 tests/roles_corpus/roles_harness.py --report OUT: the table of a saved run."""
    import tempfile

    if argv[:1] == ["--report"]:  # the table from a saved results file, nothing run
        print(table(load_corpus(), json.loads(Path(argv[1]).read_text())))
        return 0
    out_json = None
    if "--json" in argv:
        i = argv.index("--json")
        out_json = Path(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    roles = [r for r in load_corpus() if not argv or r.name in argv]
    work = Path(tempfile.mkdtemp(prefix="roles-corpus-"))
    results = run_corpus(work, [r for r in roles if not r.excluded], sink=out_json)
    print(table(roles, results))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
