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

from provision.shell import sh  # noqa: E402

SSD = "/root/autodl-tmp"
PACKAGES = ["torch==2.13.0+cpu", "lmdb", "pillow"]


def wheel_dir(work: Path) -> Path:
    """The up wheelhouse (torch, lmdb, pillow, deps) plus the uv wheel, as links in one folder."""
    from tests.support.package_index import cache_root, torch_wheelhouse

    torch_wheelhouse()
    out = work / "wheels"
    out.mkdir()
    for source in (cache_root() / "wheelhouse-up-cp311", cache_root() / "wheelhouse-torch-2.13.0-cpu-cp311"):
        for f in source.glob("*.whl"):
            if not (out / f.name).exists():
                os.symlink(f, out / f.name)
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
    args = ap.parse_args(argv)
    reason = preflight()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    from provision.install import uv as uv_mod
    from provision.install.mirrors import IndexConfig
    from tests.support.package_index import PackageIndex

    work = Path(tempfile.mkdtemp(prefix="install-bench-"))
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


if __name__ == "__main__":
    sys.exit(main())
