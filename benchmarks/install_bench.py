#!/usr/bin/env python3
"""Install benchmark: `provision install` with uv vs with pip vs plain `pip install` into a fresh
venv, same packages (torch 2.13.0 CPU + lmdb + pillow), same index, same fleet host, same run.

    sudo python3 benchmarks/install_bench.py                 # 1 round
    sudo python3 benchmarks/install_bench.py --rounds 2 --json-out /tmp/install.json

The index is the tests' own (tests/support/package_index.py) serving the REAL torch 2.13.0 CPU
wheel and its dependencies, plus lmdb, pillow and the `uv` wheel (so the host can bootstrap uv
from the same index, as on a rental). It listens on the fleet bridge; the host installs over its
veth link. Everything on the host goes to its tmpfs SSD (/root/autodl-tmp).

Per round, in this order:
- plain pip, cold: `python3 -m venv` + `pip install` with an empty cache dir;
- provision install --installer pip, cold (empty cache): venv, pip, verification, switch;
- provision install --installer uv, cold (empty uv cache; uv already on the host);
- provision install --installer uv, warm: a second env from the same packages and cache;
- provision install --force, identical request into that env (the warm reinstall of an
  identical env: uv relinks from its cache, the new generation is checked file by file against
  the verified one, provision/install/reuse.py);
- provision install, identical request again: the no-op check (nothing to do);
- plain pip, warm (same cache as the cold run), for reference.
Once per host before the rounds: uv's bootstrap from the index (`pip install --target`).

Goals (issue 14): provision with uv <= 0.6x plain pip's time cold; warm rebuild < 5 s.

`--pairs N` (issue 23, item 4) measures the first install on a fresh rental instead, from an
index that serves torch but NOT uv: N rounds, each running, in rotating order, plain pip cold,
`provision install` (auto: uv, relayed from this controller since the index has none; the
host's uv removed before each run, so the relay is paid every time) cold, and
`provision install --installer pip` cold (the fallback, verification included). Prints medians,
min-max and the per-round ratios to plain pip. Goals: uv <= 0.5x, the pip fallback <= 1.1x.

Needs root (the fleet).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fleet"))
sys.path.insert(0, str(ROOT))

from fleet import Fleet, preflight  # noqa: E402

from provision.shell import path as shell_path  # noqa: E402
from provision.shell import sh  # noqa: E402

SSD = "/root/autodl-tmp"
PACKAGES = ["torch==2.13.0+cpu", "lmdb", "pillow"]


def wheel_dir(work: Path, with_uv: bool = True) -> Path:
    """The up wheelhouse (torch, lmdb, pillow, deps) plus (`with_uv`) the uv wheel, as links in one folder."""
    # tests/fleet's up wheelhouse: torch's wheels plus lmdb and pillow, made once per machine
    from test_up import up_wheelhouse

    from tests.support.package_index import cache_root

    out = work / "wheels"
    out.mkdir()
    for f in up_wheelhouse().glob("*.whl"):
        os.symlink(f, out / f.name)
    if not with_uv:
        return out
    uv_cache = cache_root() / "uv-wheel"
    if not list(uv_cache.glob("uv-*.whl")):
        uv_cache.mkdir(exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--platform", "manylinux_2_17_x86_64", "-d", str(uv_cache), "uv"],
            check=True, capture_output=True,
        )
    for f in uv_cache.glob("uv-*.whl"):
        os.symlink(f, out / f.name)
    return out


class Bench:
    def __init__(self, fleet: Fleet, index_url: str) -> None:
        from provision.connection.base import ConnectOptions
        from provision.connection.ssh import SSHConnection
        from provision.remote.agent import Agent

        self.fleet = fleet
        self.host = fleet.hosts[0]
        self.index_url = index_url
        self.conn = SSHConnection(
            self.host.as_host(), ConnectOptions(known_hosts="off", connect_timeout=10)
        )
        self.agent = Agent(self.conn)
        self.facts = self.agent.call("facts")

    def sh(self, command: str, timeout: float = 1800) -> float:
        t = time.perf_counter()
        result = self.conn.run(command, timeout=timeout)
        dt = time.perf_counter() - t
        if not result.ok:
            raise RuntimeError(f"{command[:120]}... failed: {result.stderr[-1500:]}")
        return dt

    def plain_pip(self, venv: str, cache: str) -> tuple[float, float]:
        """(python3 -m venv, pip install) seconds."""
        self.sh(sh("rm -rf {venv}", venv=venv))
        made = self.sh(sh("python3 -m venv {venv}", venv=venv))
        return made, self.sh(
            sh(
                "{pip} install --no-input --disable-pip-version-check --progress-bar off "
                "--index-url {url} --trusted-host {host} --cache-dir {cache} {pkgs} >/dev/null",
                pip=venv + "/bin/pip", url=self.index_url, host=self.fleet.controller_address,
                cache=cache, pkgs=PACKAGES,
            )
        )

    def first_import(self, env: str, scratch: str | None) -> float:
        """`import torch` in a new process; with `scratch`, bytecode looked for (and written)
        there only: the cost of an import that finds no .pyc at all."""
        prefix = sh("PYTHONPYCACHEPREFIX={d} ", d=scratch) if scratch else ""
        return self.sh(prefix + sh("{py} -c 'import torch' 2>/dev/null", py=env + "/bin/python"))

    def provision(self, env: str, cache: str, installer: str, force: bool = False) -> tuple[float, dict]:
        from provision.install.installer import InstallOptions, install
        from provision.install.mirrors import IndexOptions

        options = InstallOptions(
            torch="2.13.0",
            variant="cpu",
            extras=["lmdb", "pillow"],
            env=env,
            python="python3",
            index=IndexOptions(index_url=self.index_url),
            pip_cache=cache,
            installer=installer,
            force=force,
        )
        t = time.perf_counter()
        result = install(self.conn, self.agent, options, facts=self.facts)
        dt = time.perf_counter() - t
        if not result.ok:
            raise RuntimeError(f"provision install ({installer}) failed: {result.message}")
        return dt, result.as_dict()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--pairs", type=int, default=0,
                    help="instead: N rotating rounds of plain pip / provision (uv relayed) / provision --installer pip, "
                         "cold, from an index without uv")
    args = ap.parse_args(argv)
    reason = preflight()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    from provision.install import uv as uv_mod
    from provision.install.mirrors import IndexConfig
    from tests.support.package_index import PackageIndex

    work = Path(tempfile.mkdtemp(prefix="install-bench-"))
    if args.pairs:
        try:
            return paired(work, args.pairs, args.json_out)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    rows: dict[str, list[float]] = {}
    details: dict[str, dict] = {}
    try:
        wheels = wheel_dir(work)
        with Fleet(1, ssd_size="10g", root_size="2g") as fleet:
            with PackageIndex(wheels, host=fleet.controller_address) as index:
                bench = Bench(fleet, index.url)
                # uv onto the host once, from the same index (what a first install does)
                bench.sh(sh("python3 -m venv {boot}", boot=f"{SSD}/boot"))
                t = time.perf_counter()
                uv_path, how = uv_mod.obtain_uv(
                    bench.conn,
                    f"{SSD}/boot/bin/python",
                    IndexConfig(index.url, trusted_hosts=[fleet.controller_address]),
                    bench.facts,
                    f"{SSD}/cache-boot", lambda m: None,
                )
                rows["uv bootstrap from the index (once per host)"] = [time.perf_counter() - t]
                print(f"uv {how}: {uv_path}", file=sys.stderr)

                def record(name: str, value: float) -> None:
                    rows.setdefault(name, []).append(value)
                    print(f"{name:<52} {value:7.2f}s", file=sys.stderr)

                for r in range(args.rounds):
                    c = f"{SSD}/c{r}"
                    made, pip = bench.plain_pip(f"{SSD}/plain", c + "-plain")
                    record("plain pip install, fresh venv, cold cache", made + pip)
                    details[f"plain{r}"] = {"venv": round(made, 2), "pip": round(pip, 2)}
                    dt, doc = bench.provision(f"{SSD}/envs/pip{r}", c + "-pip", "pip")
                    record("provision install --installer pip, cold", dt)
                    details[f"pip{r}"] = doc["seconds"]
                    dt, doc = bench.provision(f"{SSD}/envs/uv{r}", c + "-uv", "uv")
                    record("provision install --installer uv, cold", dt)
                    details[f"uv{r}"] = doc["seconds"]
                    uv_env = f"{SSD}/envs/uv{r}"
                    record("  import torch, uv env (bytecode from the verification)", bench.first_import(uv_env, None))
                    record("  import torch, no bytecode at all (compiles)", bench.first_import(uv_env, f"{SSD}/pyc{r}"))
                    record("  import torch, pip env (pip compiled everything)", bench.first_import(f"{SSD}/envs/pip{r}", None))
                    dt, doc = bench.provision(f"{SSD}/envs/uvw{r}", c + "-uv", "uv")
                    record("provision install --installer uv, warm (new env)", dt)
                    details[f"uvw{r}"] = doc["seconds"]
                    dt, doc = bench.provision(f"{SSD}/envs/uvw{r}", c + "-uv", "uv", force=True)
                    record("provision install --force, identical env (warm reinstall)", dt)
                    details[f"force{r}"] = doc["seconds"]
                    details[f"force{r}"]["reused"] = (doc.get("verify") or {}).get("reused")
                    dt, doc = bench.provision(f"{SSD}/envs/uvw{r}", c + "-uv", "uv")
                    record("provision install again, identical (no-op)", dt)
                    made, pip = bench.plain_pip(f"{SSD}/plain", c + "-plain")
                    record("plain pip install, fresh venv, warm cache", made + pip)
                    bench.sh(sh("rm -rf {paths}", paths=[f"{SSD}/envs", f"{SSD}/plain", f"{SSD}/pyc{r}",
                                                        c + "-plain", c + "-pip", c + "-uv"]))  # fmt: skip
                bench.conn.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    import statistics

    base = statistics.median(rows["plain pip install, fresh venv, cold cache"])
    print("\n## Installing torch 2.13.0 CPU + lmdb + pillow on a fleet host, same index, medians\n")
    print("| method | time | vs plain pip (cold) |")
    print("|---|---|---|")
    for name, values in rows.items():
        med = statistics.median(values)
        print(f"| {name} | {med:.2f} s | {med / base:.2f}x |")
    uv_cold = statistics.median(rows["provision install --installer uv, cold"])
    warm = statistics.median(rows["provision install --installer uv, warm (new env)"])
    force = statistics.median(rows["provision install --force, identical env (warm reinstall)"])
    print(
        f"\nuv cold = {uv_cold / base:.2f}x plain pip (goal <= 0.6x); warm new env {warm:.1f} s; "
        f"warm reinstall of an identical env {force:.1f} s (goal < 5 s)"
    )
    print("phases (s):", json.dumps(details))
    if args.json_out:
        args.json_out.write_text(json.dumps({"rows": rows, "phases": details}, indent=2))
    return 0


PLAIN, UV, PIP = ("plain venv + pip install", "provision install (uv relayed)",
                  "provision install --installer pip")


def paired(work: Path, rounds: int, json_out: Path | None) -> int:
    """Cold first installs from an index without uv, the three methods in rotating order."""
    import statistics

    from provision.install.uv import HOST_DIR
    from tests.support.package_index import PackageIndex

    rows: dict[str, list[float]] = {PLAIN: [], UV: [], PIP: []}
    how: list[str] = []
    phases: dict[str, list[dict]] = {UV: [], PIP: []}
    with Fleet(1, ssd_size="10g", root_size="2g") as fleet:
        with PackageIndex(wheel_dir(work, with_uv=False), host=fleet.controller_address) as index:
            bench = Bench(fleet, index.url)
            for r in range(rounds):
                names = [PLAIN, UV, PIP]
                for name in names[r % 3:] + names[:r % 3]:
                    c = f"{SSD}/c{r}-{len(rows[name])}"
                    if name == PLAIN:
                        made, pip = bench.plain_pip(f"{SSD}/plain", c)
                        dt = made + pip
                    else:
                        bench.sh(sh("rm -rf {d}", d=shell_path(HOST_DIR)))  # a fresh rental: no uv yet
                        dt, doc = bench.provision(f"{SSD}/envs/{r}", c, "uv" if name == UV else "pip")
                        if name == UV:
                            how.append(((doc.get("installer") or {}).get("how")) or "?")
                        phases[name].append(doc.get("seconds") or {})
                    rows[name].append(dt)
                    print(f"round {r + 1} {name:<40} {dt:7.2f}s", file=sys.stderr)
                    bench.sh(sh("rm -rf {paths}", paths=[f"{SSD}/envs", f"{SSD}/plain", c]))
            bench.conn.close()
    base = statistics.median(rows[PLAIN])
    print(f"\n## First install on a fresh host, index without uv: torch 2.13.0 CPU + lmdb + pillow, "
          f"{rounds} rotating rounds\n")
    print("| method | median | min-max | vs plain pip (median of per-round ratios, min-max) | goal |")
    print("|---|---|---|---|---|")
    goals = {PLAIN: "-", UV: "<= 0.5x", PIP: "<= 1.1x"}
    for name, values in rows.items():
        ratios = [v / p for v, p in zip(values, rows[PLAIN], strict=True)]
        print(f"| {name} | {statistics.median(values):.2f} s | {min(values):.2f}-{max(values):.2f} | "
              f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | {goals[name]} |")
    print(f"\nhow uv reached the host: {', '.join(how)}; plain pip median {base:.2f} s")
    for name, per_round in phases.items():
        keys = sorted({k for d in per_round for k in d})
        med = {k: round(statistics.median(d.get(k, 0.0) for d in per_round), 2) for k in keys}
        print(f"phases of {name} (medians, s): {json.dumps(med)}")
    verify = statistics.median(d.get("verify", 0.0) for d in phases[PIP])
    pip_med = statistics.median(rows[PIP])
    print(f"pip fallback: {pip_med:.2f} s vs 1.1 x plain pip + its verification = {1.1 * base + verify:.2f} s "
          f"({'met' if pip_med <= 1.1 * base + verify else 'missed'})")
    if json_out:
        json_out.write_text(json.dumps({"rows": rows, "uv_how": how, "phases": phases}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
