#!/usr/bin/env python3
"""Data-plane benchmark: `provision stage` vs `tar | ssh` vs rsync vs per-file SFTP, same folder,
same fleet host, same run; then LMDBDataset read throughput vs the same images as files.

    sudo python3 benchmarks/stage_bench.py                    # 8,000 JPEGs 224x224 (~95 MB), 3 rounds
    sudo python3 benchmarks/stage_bench.py --repeats 5 --no-shaped
    sudo python3 benchmarks/stage_bench.py --data /tmp/imgs   # reuse (or create) the folder there

Links: unshaped (loopback-speed veth) and shaped to 200 Mbit/s with 10 ms delay each way
(`tc netem` on both ends of the host's link; rate-only tbf when netem is missing).

Per link, `--repeats` rounds of every method in rotating order, each into an empty target on the
host's tmpfs SSD (/root/autodl-tmp):
- provision stage (CLI): `python -m provision stage DIR HOST --dest ...` wall clock, interpreter
  start-up, SSH connect, status, stream and LMDB build included (agent and py-lmdb already on the
  host, as on any second use);
- provision stage (API): stage_dataset() on a fresh data-plane connection (OpenSSH, as the CLI
  uses; no interpreter start-up); (API, paramiko): the same on a paramiko SSHConnection (what a
  playbook task's connection is);
- tar | ssh: `tar cf - DIR | ssh host 'tar xf - -C ...'` (OpenSSH client, its default
  algorithms: the baseline of the goals);
- tar | ssh (GCM, curve25519): the same with the cipher and key exchange provision's OpenSSH
  data plane prefers, to show what that choice alone is worth;
- rsync -a over ssh;
- per-file SFTP: paramiko, one put per file, as Fabric's put does. On the shaped link only the
  first --sftp-sample files are sent and the time is scaled to all files (marked "~").

Read throughput (this machine, page cache warm, torch DataLoader, batch 64): LMDBDataset vs a
dataset reading the same files from the folder, raw bytes and bytes + JPEG decode, for
num_workers 0 and 4.

Every run also records CPU: the controller's (the tool's process tree; the API's own process)
and the host's (its sshd listener with every session it reaped: sshd, shell, python3, tar), shown
as CPU milliseconds per MB of data. With --text, a second folder of CSV files (~95 MB, ~2.5x with
zstd) is staged the same way, the host's Python given `zstandard` (copied into its user site):
the case where compressing the stream can pay. After the tables: the compression decisions of
each CLI/API run (zstd / raw windows, each mode's measured pace), and the fixed costs: the CLI
and the API on a dataset already up to date (nothing streamed: start-up, connect, one call), so
the CLI's overhead over the API is measured apart from the link.

Anchors (shared/reference/anchors.md, this kind of machine, 8,000 files): tar|ssh 0.86 s, rsync
1.14 s, per-file SFTP 7.10 s. Goals (issue 14): stage <= 1.05x tar|ssh unshaped, <= 1.0x at
200 Mbit/s, >= 5x faster than per-file SFTP. Needs root (the fleet).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fleet"))
sys.path.insert(0, str(ROOT))

from fleet import Fleet, ShapingUnavailable, preflight  # noqa: E402

ANCHORS = {"tar | ssh": 0.86, "rsync -a": 1.14, "per-file SFTP": 7.10}
SSD = "/root/autodl-tmp"


def children_cpu() -> float:
    """CPU seconds of this process's finished children (the tool under test)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def host_cpu(host) -> float:  # noqa: ANN001
    """CPU seconds the host spent so far: its sshd listener plus every session it reaped."""
    fields = Path(f"/proc/{host.sshd.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def make_data(path: Path, count: int, kind: str = "jpeg") -> Path:
    from provision.staging.sample import make_image_folder, make_text_folder

    marker = path / ".complete"
    if marker.exists() and marker.read_text() == str(count):
        return path
    shutil.rmtree(path, ignore_errors=True)
    t = time.perf_counter()
    if kind == "jpeg":
        make_image_folder(path, count, classes=10, size=224, quality=85)
    else:
        make_text_folder(path, count, classes=10, size=12_000)
    marker.write_text(str(count))
    print(f"generated {count} {kind} files in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    return path


def give_host_zstandard(host) -> bool:  # noqa: ANN001
    """Copy this machine's zstandard package into the host's user site (same cp311 ABI)."""
    try:
        import zstandard
    except ImportError:
        return False
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(Path(zstandard.__file__).parent, arcname="zstandard")
    site = "/root/.local/lib/python3.11/site-packages"
    ssh = [
        *("ssh", "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o"),
        *("UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-i", host.key_file),
        f"root@{host.address}",
        f"mkdir -p {site} && tar xf - -C {site} && python3 -c 'import zstandard'",
    ]
    return subprocess.run(ssh, input=buf.getvalue(), capture_output=True).returncode == 0


def compile_bytecode(notes: list[str]) -> None:
    """The CLI as users run it: a pip install compiles provision's .pyc files, and any Python
    writes them on a first run. Where PYTHONDONTWRITEBYTECODE is set (this sandbox) a checkout
    has none, and every CLI run would compile the whole package again (~0.15 s here); so they
    are compiled once now, into provision/__pycache__ (git-ignored)."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "provision")],
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    notes.append("PYTHONDONTWRITEBYTECODE is set here: provision's .pyc files were compiled "
                 "first, as an install has them")  # fmt: skip


class Bench:
    def __init__(self, fleet: Fleet, data: Path, work: Path, sftp_sample: int) -> None:
        self.fleet = fleet
        self.host = fleet.hosts[0]
        self.data = data
        self.work = work
        self.files = sorted(
            p for p in data.rglob("*") if p.is_file() and not p.name.startswith(".")
        )
        self.sftp_sample = sftp_sample
        self.expect_skip = False
        self.decisions: list[tuple[str, dict]] = []  # (path, the stage's `compression` summary)
        self.shipped: list[str] = []  # per CLI run: what became of zstandard for the host
        self.fresh_zstd = False  # --ship-zstd: remove the shipped zstandard before every run
        self.ssh_config = work / "ssh_config"
        self.ssh_config.write_text("")
        self.inventory = fleet.write_inventory(work / "hosts.ini")
        self.env = dict(
            os.environ, PROVISION_HOME=str(work / "home"), PROVISION_KNOWN_HOSTS=str(work / "kh")
        )
        self.ssh = [
            "ssh",
            "-F",
            "/dev/null",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-i",
            self.host.key_file,
            f"root@{self.host.address}",
        ]

    def clean(self) -> None:
        self.fleet.ns_exec(
            self.host, f"rm -rf {SSD}/bench {SSD}/datasets/bench.lmdb* {SSD}/datasets/.bench*"
        )
        if self.fresh_zstd:  # every run a first stage to this host: zstandard shipped again
            self.fleet.ns_exec(self.host, "rm -rf /root/.cache/provision/pylib/*-zstandard*")
        self.fleet.ns_exec(self.host, f"mkdir -p {SSD}/bench")

    def options(self):  # noqa: ANN201
        from provision.connection.base import ConnectOptions

        return ConnectOptions(
            known_hosts="off", connect_timeout=10, ssh_config=str(self.ssh_config)
        )

    # -- methods ----------------------------------------------------------------------------
    def stage_cli(self) -> float:
        cmd = [
            sys.executable,
            "-m",
            "provision",
            "stage",
            str(self.data),
            self.host.name,
            "-i",
            str(self.inventory),
            "--name",
            "bench",
            "--dest",
            f"{SSD}/datasets",
            "--ssh-config",
            str(self.ssh_config),
            "--known-hosts",
            "off",
            "--json",
        ]
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=self.env)
        dt = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"provision stage failed: {proc.stderr[-2000:]}")
        entry = json.loads(proc.stdout)["hosts"][self.host.name]
        assert entry["count"] == len(self.files) and entry["skipped"] == self.expect_skip, entry
        self.decisions.append(("CLI", entry.get("compression") or {}))
        self.shipped.append((entry.get("compression") or {}).get("zstandard_shipped", "-"))
        return dt

    def stage_api(self, transport: str = "openssh") -> float:
        """stage_dataset() in this process on a fresh connection: the data plane's (OpenSSH, as
        `provision stage` uses) or paramiko's (what a playbook task's connection is)."""
        from provision.connection.factory import connect
        from provision.connection.ssh import SSHConnection
        from provision.staging import stage_dataset

        t = time.perf_counter()
        if transport == "paramiko":
            conn = SSHConnection(self.host.as_host(), self.options())
        else:
            conn = connect(self.host.as_host(), self.options(), data_plane=True)
        with conn:
            result = stage_dataset(conn, None, str(self.data), name="bench", dest=f"{SSD}/datasets")
            assert getattr(conn, "transport_name", "paramiko") == transport, transport
        dt = time.perf_counter() - t
        assert result["count"] == len(self.files), result
        self.decisions.append(("API" if transport == "openssh" else "API/paramiko", result.get("compression") or {}))
        return dt

    def stage_api_paramiko(self) -> float:
        return self.stage_api("paramiko")

    def tar_ssh(self) -> float:
        remote = f"tar xf - -C {SSD}/bench"
        t = time.perf_counter()
        tar = subprocess.Popen(
            ["tar", "cf", "-", "-C", str(self.data.parent), self.data.name], stdout=subprocess.PIPE
        )
        ssh = subprocess.run([*self.ssh, remote], stdin=tar.stdout, capture_output=True)
        tar.wait()
        dt = time.perf_counter() - t
        if ssh.returncode or tar.returncode:
            raise RuntimeError(f"tar | ssh failed: {ssh.stderr.decode()[-500:]}")
        return dt

    def tar_ssh_fast(self) -> float:
        """tar | ssh with the algorithms provision's OpenSSH data plane prefers (AES-GCM,
        curve25519 key exchange): what the same choice buys a plain copy, for comparison."""
        remote = f"tar xf - -C {SSD}/bench"
        fast = ["-c", "aes128-gcm@openssh.com", "-o", "KexAlgorithms=curve25519-sha256"]
        t = time.perf_counter()
        tar = subprocess.Popen(
            ["tar", "cf", "-", "-C", str(self.data.parent), self.data.name], stdout=subprocess.PIPE
        )
        ssh = subprocess.run(
            [*self.ssh[:-1], *fast, self.ssh[-1], remote], stdin=tar.stdout, capture_output=True
        )
        tar.wait()
        dt = time.perf_counter() - t
        if ssh.returncode or tar.returncode:
            raise RuntimeError(f"tar | ssh failed: {ssh.stderr.decode()[-500:]}")
        return dt

    def rsync(self) -> float:
        rsh = " ".join(self.ssh[:-1])
        t = time.perf_counter()
        proc = subprocess.run(
            ["rsync", "-a", "-e", rsh, str(self.data), f"root@{self.host.address}:{SSD}/bench/"],
            capture_output=True,
        )
        dt = time.perf_counter() - t
        if proc.returncode:
            raise RuntimeError(f"rsync failed: {proc.stderr.decode()[-500:]}")
        return dt

    def sftp(self, limit: int | None = None) -> float:
        import paramiko

        files = self.files if limit is None else self.files[:limit]
        t = time.perf_counter()
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())  # throwaway test host
        client.connect(
            self.host.address,
            username="root",
            key_filename=self.host.key_file,
            look_for_keys=False,
            allow_agent=False,
        )
        sftp = client.open_sftp()
        made: set[str] = set()
        for f in files:
            rel = f.relative_to(self.data.parent).as_posix()
            parent = f"{SSD}/bench/" + rel.rsplit("/", 1)[0]
            if parent not in made:
                client.exec_command(f"mkdir -p '{parent}'")[1].channel.recv_exit_status()
                made.add(parent)
            sftp.put(str(f), f"{SSD}/bench/{rel}")
        sftp.close()
        client.close()
        dt = time.perf_counter() - t
        return dt * len(self.files) / len(files)


def fixed_costs(bench: Bench, repeats: int) -> dict[str, float]:
    """Median seconds of a stage with nothing to send (the dataset is up to date): what the CLI
    costs over the API is interpreter start-up and imports; both include connect + one call."""
    bench.clean()
    bench.stage_api()
    bench.expect_skip = True
    out: dict[str, list[float]] = {"CLI": [], "API": []}
    try:
        for _ in range(repeats):
            out["CLI"].append(bench.stage_cli())
            out["API"].append(bench.stage_api())
    finally:
        bench.expect_skip = False
    return {k: statistics.median(v) for k, v in out.items()}


def read_throughput(
    data: Path, lmdb_path: Path, workers: list[int], rounds: int = 3
) -> list[tuple[str, int, float]]:
    import warnings

    import torch

    from provision.data import LMDBDataset, decode_tensor

    warnings.filterwarnings("ignore", message="This DataLoader will create")

    files = sorted(p for p in data.rglob("*.jpg"))
    classes = sorted(p.name for p in data.iterdir() if p.is_dir())

    class Folder(torch.utils.data.Dataset):
        def __init__(self, transform=None):  # noqa: ANN001
            self.transform = transform

        def __len__(self) -> int:
            return len(files)

        def __getitem__(self, i: int):  # noqa: ANN204
            with open(files[i], "rb") as fh:
                data = fh.read()
            label = classes.index(files[i].parent.name)
            return (self.transform(data) if self.transform else data), label

    def raw_len(b: bytes) -> int:
        return len(b)

    out = []
    for decode in (False, True):
        transform = decode_tensor if decode else raw_len
        suffix = " + decode" if decode else ""
        for w in workers:
            # both datasets warm, then measured in alternation: noise on a shared machine hits both
            loaders = {}
            for name, ds in (
                ("LMDBDataset", LMDBDataset(lmdb_path, transform=transform)),
                ("folder of files", Folder(transform)),
            ):
                loader = torch.utils.data.DataLoader(
                    ds, batch_size=64, num_workers=w, shuffle=True, persistent_workers=w > 0
                )
                sum(len(labels) for _, labels in loader)  # warm-up: workers up, imports done
                loaders[name] = loader
            best = dict.fromkeys(loaders, 0.0)
            for _ in range(rounds):
                for name, loader in loaders.items():
                    t = time.perf_counter()
                    n = sum(len(labels) for _, labels in loader)
                    best[name] = max(best[name], n / (time.perf_counter() - t))
            out.extend((name + suffix, w, rate) for name, rate in best.items())
            del loaders
    return out


def measure(bench: Bench, name: str, run) -> tuple[float, float, float]:  # noqa: ANN001
    """(seconds, controller CPU s, host CPU s) of one run of a method. The controller's CPU is
    this process's plus its finished children's: the tool's own process tree (CLI, tar, ssh),
    or, for the in-process methods, this process and the ssh processes it started."""
    c0 = time.process_time() + children_cpu()
    h0 = host_cpu(bench.host)
    dt = run()
    time.sleep(0.3)  # the host's sshd reaps the session: only then its CPU is counted
    c1 = time.process_time() + children_cpu()
    return dt, c1 - c0, host_cpu(bench.host) - h0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=8000)
    ap.add_argument(
        "--data", type=Path, help="folder for the generated JPEGs (kept; default: a temp dir)"
    )
    ap.add_argument("--text", action="store_true", help="also stage a compressible CSV folder")
    ap.add_argument("--text-data", type=Path, help="folder for the CSV files (kept)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-shaped", action="store_true")
    ap.add_argument("--shaped-only", action="store_true", help="only the 200 Mbit/s link")
    ap.add_argument("--methods", default="",
                    help="comma list of: cli, api, paramiko, tar, tar-fast, rsync, sftp (default: all)")
    ap.add_argument("--zstd-host", action="store_true",
                    help="give the host's python3 zstandard even without --text (JPEG streams may then compress)")
    ap.add_argument("--no-read", action="store_true")
    ap.add_argument("--no-sftp", action="store_true", help="leave per-file SFTP out (slow)")
    ap.add_argument(
        "--sftp-sample", type=int, default=400, help="files sent per-file on the shaped link"
    )
    ap.add_argument("--ship-zstd", action="store_true",
                    help="the host keeps no zstandard: every provision run is a first stage that "
                         "ships it where the data pays (with --text: the CSV set)")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    reason = preflight()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="stage-bench-"))
    notes: list[str] = []
    compile_bytecode(notes)
    datasets = {"JPEG": make_data(args.data or work / "data" / "imgs", args.count)}
    if args.text:
        datasets["CSV"] = make_data(args.text_data or work / "data" / "csv", args.count, "text")
    sizes = {k: sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) / 1e6 for k, d in datasets.items()}
    results: dict[str, dict[str, dict[str, list[tuple[float, float, float]]]]] = {}
    decided: dict[tuple[str, str], str] = {}
    fixed: dict[str, dict[str, float]] = {}
    shipped_log: list[str] = []
    with Fleet(1, ssd_size="2g") as fleet:
        bench = Bench(fleet, datasets["JPEG"], work, args.sftp_sample)
        bench.fresh_zstd = args.ship_zstd
        if args.ship_zstd:
            notes.append("the host's python3 has no zstandard: each provision run ships it anew "
                         "where the sampled ratio pays for it (zstandard_shipped per run below)")
        elif args.text or args.zstd_host:
            if give_host_zstandard(bench.host):
                notes.append("the host's python3 has zstandard (copied into its user site)")
            else:
                notes.append("zstandard missing here or on the host: streams stay uncompressed")
        methods = {
            "provision stage (CLI)": bench.stage_cli,
            "provision stage (API)": bench.stage_api,
            "provision stage (API, paramiko)": bench.stage_api_paramiko,
            "tar | ssh": bench.tar_ssh,
            "tar | ssh (GCM, curve25519)": bench.tar_ssh_fast,
            "rsync -a": bench.rsync,
        }
        if not args.no_sftp:
            methods["per-file SFTP"] = bench.sftp
        if args.methods:
            short = {"cli": "provision stage (CLI)", "api": "provision stage (API)",
                     "paramiko": "provision stage (API, paramiko)", "tar": "tar | ssh",
                     "tar-fast": "tar | ssh (GCM, curve25519)", "rsync": "rsync -a", "sftp": "per-file SFTP"}
            wanted = [short[m.strip()] for m in args.methods.split(",") if m.strip()]
            methods = {name: methods[name] for name in wanted if name in methods}
        links = (["shaped"] if args.shaped_only else ["unshaped"]) + ([] if args.no_shaped or args.shaped_only else ["shaped"])
        bench.clean()
        bench.stage_cli()  # warm-up: uploads the agent and py-lmdb, fills the page cache
        for link in links:
            if link != "unshaped":
                try:
                    fleet.shape(bench.host, rate="200mbit", delay="10ms")
                    link = "200 Mbit/s + 10 ms"
                except ShapingUnavailable:
                    fleet.shape(bench.host, rate="200mbit", delay=None)
                    link = "200 Mbit/s (no delay)"
                    notes.append(
                        "tc netem is not in this kernel: the shaped link has no added delay"
                    )
            for kind, data in datasets.items():
                bench.data = data
                bench.files = sorted(
                    p for p in data.rglob("*") if p.is_file() and not p.name.startswith(".")
                )
                series = results.setdefault(link, {}).setdefault(kind, {})
                bench.decisions.clear()
                names = [n for n in methods if kind == "JPEG" or n != "per-file SFTP"]
                for r in range(args.repeats):
                    order = names[r % len(names) :] + names[: r % len(names)]
                    for name in order:
                        bench.clean()
                        if name == "per-file SFTP" and link != "unshaped":
                            run = lambda: bench.sftp(args.sftp_sample)  # noqa: E731
                        else:
                            run = methods[name]
                        sample = measure(bench, name, run)
                        series.setdefault(name, []).append(sample)
                        print(
                            f"{link:>20} {kind:>4} {name:<24} {sample[0]:7.2f}s "
                            f"cpu {sample[1]:.2f}s + host {sample[2]:.2f}s",
                            file=sys.stderr,
                        )
                decided[(link, kind)] = _decisions(bench.decisions)
                shipped_log.extend(f"{kind} {state}" for state in bench.shipped)
                bench.shipped.clear()
            fixed[link] = fixed_costs(bench, args.repeats)
            print(f"{link:>20} fixed costs (up to date): {fixed[link]}", file=sys.stderr)
            fleet.unshape(bench.host)
        bench.clean()
    read = []
    if not args.no_read:
        from provision.staging import make_request, stage_local

        lmdb_path = work / "read" / "bench.lmdb"
        stage_local(make_request(str(datasets["JPEG"]), name="bench"), str(lmdb_path))
        read = read_throughput(datasets["JPEG"], lmdb_path, [0, 4])
    print_tables(results, read, args.count, sizes, notes, args.sftp_sample)
    print("\n## Compression decisions (zstd / raw windows per run; measured paces, MB/s)\n")
    for (link, kind), line in decided.items():
        print(f"- {link}, {kind}: {line}")
    if args.ship_zstd:
        print(f"\nzstandard shipped per CLI run (in run order): {', '.join(shipped_log) or '-'}")
    print("\n## Fixed costs: a stage with nothing to send (dataset up to date), medians\n")
    print("| link | provision stage (CLI) | provision stage (API) | CLI - API (start-up, imports) |")
    print("|---|---|---|---|")
    for link, f in fixed.items():
        print(f"| {link} | {f['CLI']:.2f} s | {f['API']:.2f} s | {f['CLI'] - f['API']:.2f} s |")
    if args.json_out:
        args.json_out.write_text(
            json.dumps({"transfer": results, "read": read, "files": args.count, "mb": sizes}, indent=2)
        )
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _decisions(decisions: list[tuple[str, dict]]) -> str:
    parts = []
    for where, c in decisions:
        w = c.get("windows") or {}
        parts.append(
            f"{where} {w.get('zstd', 0)}/{w.get('raw', 0)} "
            f"(raw {c.get('raw_mb_per_s') or '-'}, zstd {c.get('zstd_mb_per_s') or '-'})"
        )
    return "; ".join(parts) or "-"


def _med(samples: list[tuple[float, float, float]], k: int) -> float:
    return statistics.median(s[k] for s in samples)


def print_tables(results, read, files, sizes, notes, sftp_sample) -> None:  # noqa: ANN001
    for link, by_kind in results.items():
        for kind, series in by_kind.items():
            mb = sizes[kind]
            tar = _med(series["tar | ssh"], 0)
            print(f"\n## {link}: {files:,} {kind} files ({mb:.0f} MB) to one fleet host, medians\n")
            print("| method | time | vs tar | controller CPU | host CPU | CPU ms/MB (ctl + host) | anchor |")
            print("|---|---|---|---|---|---|---|")
            for name, samples in series.items():
                t, c, h = (_med(samples, k) for k in range(3))
                approx = "~" if name == "per-file SFTP" and link != "unshaped" else ""
                anchor = ANCHORS.get(name) if kind == "JPEG" and link == "unshaped" else None
                label = name.replace("|", "\\|")
                print(
                    f"| {label} | {approx}{t:.2f} s | {t / tar:.2f}x | {c:.2f} s | {h:.2f} s | "
                    f"{c / mb * 1e3:.1f} + {h / mb * 1e3:.1f} | {f'{anchor:.2f} s' if anchor else '-'} |"
                )
            goal = 1.05 if link == "unshaped" else 1.0
            for name in ("provision stage (CLI)", "provision stage (API)"):
                if name not in series:
                    continue
                ratio = _med(series[name], 0) / tar
                verdict = "met" if ratio <= goal else "missed"
                # the r-th run of each method ran back to back (rotating order): paired ratios
                pairs = [a[0] / b[0] for a, b in zip(series[name], series["tar | ssh"], strict=True)]
                print(f"\n{name} = {ratio:.2f}x tar|ssh (goal <= {goal:.2f}x: {verdict}); "
                      f"{len(pairs)} pairs: median {statistics.median(pairs):.3f}x, "
                      f"{min(pairs):.3f}-{max(pairs):.3f}", end="")
            if "per-file SFTP" in series and "provision stage (CLI)" in series:
                sftp = _med(series["per-file SFTP"], 0)
                print(f"; {sftp / _med(series['provision stage (CLI)'], 0):.1f}x faster than per-file SFTP", end="")
            print()
    if any(link != "unshaped" for link in results):
        print(f"\n(~ per-file SFTP on the shaped link: {sftp_sample} files sent, scaled to {files:,})")
    for n in notes:
        print(f"note: {n}")
    if read:
        print(
            "\n## Read throughput on this machine (page cache warm, batch 64, workers warm, best of 3, alternating) — samples/s\n"
        )
        print("| dataset | num_workers=0 | num_workers=4 |")
        print("|---|---|---|")
        rows: dict[str, dict[int, float]] = {}
        for name, w, rate in read:
            rows.setdefault(name, {})[w] = rate
        for name, by_w in rows.items():
            print(f"| {name} | " + " | ".join(f"{by_w.get(w, 0):,.0f}" for w in (0, 4)) + " |")


if __name__ == "__main__":
    sys.exit(main())
