"""A run's files -> the profile the controller diagnoses (computed on the host, so only a
summary and a downsampled timeline travel back, however long the run was)."""

from __future__ import annotations

import json
import os
import re

from provision.agent.facts.mounts import is_network_fs, mount_for, read_mounts
from provision.agent.train import rundir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterator, List, Optional

# "epoch 3 ... 12.5s", "Epoch 3/10 took 12.5 s", "epoch=3 time=12.5sec"
EPOCH_LINE = re.compile(
    r"\bepoch\b\D{0,5}(\d+)(?:\s*/\s*\d+)?\b.*?(\d+(?:\.\d+)?)\s*(?:s|sec|secs|seconds)\b", re.I
)
MAX_LINES = 200000


def _jsonl(path: str) -> Iterator[Dict[str, Any]]:
    try:
        with open(path) as f:
            for n, line in enumerate(f):
                if n >= MAX_LINES:
                    break
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue  # a line being written while we read
                if isinstance(doc, dict):
                    yield doc
    except OSError:
        return


def _mean(values: List[Any]) -> Optional[float]:
    values = [v for v in values if v is not None]
    return round(sum(values) / float(len(values)), 3) if values else None


def epochs_from_log(path: str, max_bytes: int = 8 << 20) -> List[Dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            text = f.read(max_bytes).decode("utf-8", "replace")
    except OSError:
        return []
    seen = {}
    for line in text.splitlines():
        m = EPOCH_LINE.search(line)
        if m:
            seen[int(m.group(1))] = float(m.group(2))
    return [{"epoch": k, "seconds": v} for k, v in sorted(seen.items())]


def instrumentation(path: str) -> Dict[str, Any]:
    """Loader configs, AMP use, totals and a per-line series from instrument.jsonl. Each loader
    (by where it was created) has its own counts; the training loader is the one whose batches
    fed backward/optimizer steps (else the one with most batches), and the totals are its own:
    an evaluation loader never counts as training steps or epochs."""
    out = {"present": False, "loaders": [], "progress": [], "epochs": [], "amp": None,
           "scaler": False, "device": None, "first_batch_wait_s": None, "errors": [],
           "grad_bytes": None, "dist": None, "collectives": 0, "backward": 0, "opt_steps": 0,
           "train_loader": None}  # type: Dict[str, Any]
    last = {}  # type: Dict[int, Dict[str, Any]]
    loaders = {}  # type: Dict[Any, Dict[str, Any]]  (pid, id) -> the loader's record
    epochs = []  # type: List[Dict[str, Any]]
    firsts = {}  # type: Dict[Any, Dict[str, Any]]
    for doc in _jsonl(path):
        out["present"] = True
        kind = doc.get("kind")
        pid = doc.get("pid")
        if kind == "loader":
            loaders[(pid, doc.get("id"))] = dict(doc)
        elif kind == "progress":
            last[pid] = doc
            out["progress"].append(doc)
            out["amp"] = doc.get("amp") or out["amp"]
            out["scaler"] = out["scaler"] or bool(doc.get("scaler"))
            out["device"] = doc.get("device") or out["device"]
        elif kind == "epoch":
            epochs.append(doc)
        elif kind == "amp":
            out["amp"] = doc.get("amp")
        elif kind == "scaler":
            out["scaler"] = True
        elif kind == "ddp":
            out["grad_bytes"] = max(int(doc.get("grad_bytes") or 0), out["grad_bytes"] or 0)
        elif kind == "dist":
            out["dist"] = {k: doc.get(k) for k in ("backend", "world_size", "rank")}
        elif kind == "first_batch":
            firsts[(pid, doc.get("loader"))] = doc  # a later one: the first of that loader's own batches
        elif kind == "error":
            out["errors"].append(doc)
    for pid, doc in last.items():
        out["collectives"] += int(doc.get("collectives") or 0)
        out["backward"] += int(doc.get("backward") or 0)
        out["opt_steps"] += int(doc.get("opt_steps") or 0)
        for lid, row in (doc.get("loaders") or {}).items():
            rec = loaders.get((pid, int(lid)))
            if rec is None or not isinstance(row, list) or len(row) < 5:
                continue
            rec.update(batches=int(row[0]), wait_s=float(row[1]), step_s=float(row[2]),
                       train_batches=int(row[3]), epochs=int(row[4]))
    # a record emptied when its loader's batches turned out to be training ones (moved to the
    # training record of the same site): not a loader of its own
    loaders = {k: r for k, r in loaders.items()
               if not ("epochs" in r and r["epochs"] == 0 and not r["batches"] and not r["train_batches"])}
    for key, rec in loaders.items():
        first = firsts.get(key) or {}
        rec.setdefault("batches", 0)
        rec.setdefault("train_batches", 0)
        rec.setdefault("epochs", 0)
        rec["first_batch_wait_s"] = first.get("wait_s")
        rec["batch_bytes"] = first.get("batch_bytes")
        rec["batch_size_from"] = "loader" if rec.get("batch_size") else None
        if not rec.get("batch_size") and rec.get("iterable") and first.get("rows"):
            # an iterable dataset that yields whole batches (the loader does not batch)
            rec["batch_size"], rec["batch_size_from"] = first["rows"], "first batch"
        rec.pop("kind", None)
        rec.pop("t", None)
    ranked = sorted(loaders.values(), key=lambda r: (r["train_batches"], r["batches"]), reverse=True)
    train = [r for r in ranked if r["train_batches"]] or ranked[:1]
    train_keys = set()
    if train:  # the same loader in every rank's process of this host (same creation site); a
        # loader made at that line too whose batches never fed a step is an evaluation one
        site = train[0].get("site")
        train_keys = {k for k, r in loaders.items()
                      if r is train[0] or (site and r.get("site") == site and r["train_batches"])}
    for key, rec in loaders.items():
        rec["role"] = "train" if key in train_keys else "eval"
    out["loaders"] = [loaders[k] for k in sorted(loaders, key=lambda k: (str(k[0]), k[1]))]
    picked = [loaders[k] for k in train_keys]
    out["train_loader"] = train[0] if train else None
    out["epochs"] = [{"epoch": e.get("epoch"), "seconds": e.get("seconds"), "batches": e.get("batches")}
                     for e in epochs if (e.get("pid"), e.get("loader")) in train_keys]
    out["first_batch_wait_s"] = picked[0]["first_batch_wait_s"] if picked else None
    if picked:
        wait = sum(float(r.get("wait_s") or 0) for r in picked)
        step = sum(float(r.get("step_s") or 0) for r in picked)
        trained = sum(r["train_batches"] for r in picked)
        out["batches"] = trained or sum(r["batches"] for r in picked)
        out["wait_s"], out["step_s"] = round(wait, 4), round(step, 4)
        out["data_wait_fraction"] = round(wait / (wait + step), 4) if wait + step > 0 else None
    else:
        out["batches"] = out["opt_steps"] or None  # no DataLoader: the optimizer steps, if any
        out["wait_s"], out["step_s"], out["data_wait_fraction"] = 0.0, 0.0, None
    out["train_ids"] = sorted((str(k[0]), k[1]) for k in train_keys)
    return out


def summarize(directory: str, points: int = 120) -> Dict[str, Any]:
    state = rundir.current_state(directory) or {}
    samples = list(_jsonl(os.path.join(directory, rundir.SAMPLES)))
    inst = instrumentation(os.path.join(directory, rundir.INSTRUMENT))
    gpus = {}  # type: Dict[int, Dict[str, Any]]
    for row in samples:
        for g in row.get("gpus") or []:
            acc = gpus.setdefault(int(g.get("i", 0)), {"util": [], "mem": [], "power": [], "sm": [],
                                                       "total": None, "throttle": {}})
            acc["util"].append(g.get("util"))
            acc["mem"].append(g.get("mem_mb"))
            acc["power"].append(g.get("power_w"))
            acc["sm"].append(g.get("sm_mhz"))
            acc["total"] = g.get("mem_total_mb") or acc["total"]
            for reason in g.get("throttle") or []:
                acc["throttle"][reason] = acc["throttle"].get(reason, 0) + 1
    per_gpu = []
    for i in sorted(gpus):
        acc = gpus[i]
        mems = [m for m in acc["mem"] if m is not None]
        sms = [s for s in acc["sm"] if s is not None]
        per_gpu.append({"index": i, "samples": len(acc["util"]), "util_pct_mean": _mean(acc["util"]),
                        "memory_used_mb_max": max(mems) if mems else None,
                        "memory_total_mb": acc["total"], "power_w_mean": _mean(acc["power"]),
                        "sm_mhz_min": min(sms) if sms else None, "sm_mhz_max": max(sms) if sms else None,
                        "throttle_reasons": acc["throttle"]})
    disks = {}  # type: Dict[str, List[float]]
    network_open = {}  # type: Dict[str, int]
    nfs = {}  # type: Dict[str, List[float]]
    for row in samples:
        for d, rate in (row.get("disk_read_mb_s") or {}).items():
            disks.setdefault(d, []).append(rate)
        for m in row.get("network_open") or {}:
            network_open[m] = network_open.get(m, 0) + 1
        for m, rate in (row.get("nfs_read_mb_s") or {}).items():
            nfs.setdefault(m, []).append(rate)
    n = float(len(samples)) or 1.0
    mounts = read_mounts()
    paths = []
    for loader in inst["loaders"]:
        if loader.get("role") != "train":
            continue
        for p in loader.get("paths") or []:
            mount = mount_for(p, mounts)
            fs_type = str(mount["fs_type"]) if mount else None
            entry = {"path": p, "mountpoint": mount["mountpoint"] if mount else None, "fs_type": fs_type,
                     "network": bool(fs_type and is_network_fs(fs_type))}
            if entry not in paths:
                paths.append(entry)
    mems = [r.get("mem_avail_mb") for r in samples if r.get("mem_avail_mb") is not None]
    loader = inst["train_loader"]
    epochs = [e for e in inst["epochs"] if e.get("batches")]
    epoch_source = "instrumentation"
    if len(epochs) < 2:
        epochs, epoch_source = epochs_from_log(os.path.join(directory, rundir.LOG)), "log"
    return {
        "run": state,
        "samples": len(samples),
        "interval_s": state.get("interval"),
        "gpu": {"source": state.get("gpu_source"), "reason": state.get("gpu_reason"), "per_gpu": per_gpu},
        "cpu": {"busy_pct_mean": _mean([r.get("cpu") for r in samples]),
                "iowait_pct_mean": _mean([r.get("iowait") for r in samples]),
                "cores_main_mean": _mean([r.get("cores_main") for r in samples]),
                "cores_workers_mean": _mean(worker_samples(samples)),
                "procs_max": max([r.get("procs") or 0 for r in samples] or [0]),
                "cpus": os.cpu_count()},
        "memory": {"available_mb_min": min(mems) if mems else None,
                   "total_mb": samples[-1].get("mem_total_mb") if samples else None,
                   "rss_mb_max": max([r.get("rss_mb") or 0 for r in samples] or [0])},
        "io": {"disk_read_mb_s_mean": dict((d, _mean(v)) for d, v in disks.items()),
               "nfs_read_mb_s_mean": dict((m, _mean(v)) for m, v in nfs.items()),
               "network_open_share": dict((m, round(c / n, 3)) for m, c in network_open.items()),
               "dataset_paths": paths},
        "loader": loader,
        "loaders": inst["loaders"][:8],
        "dist": inst["dist"], "collectives": inst["collectives"],
        "backward_calls": inst["backward"], "optimizer_steps": inst["opt_steps"],
        "shm": shm_of("/dev/shm"),
        "instrumented": inst["present"],
        "steps": inst["batches"],
        "data_wait_fraction": inst["data_wait_fraction"],
        "wait_s": inst["wait_s"], "step_s": inst["step_s"],
        "first_batch_wait_s": inst["first_batch_wait_s"],
        "amp": inst["amp"], "grad_scaler": inst["scaler"], "device": inst["device"],
        "instrument_errors": inst["errors"][:5],
        "grad_bytes": inst["grad_bytes"],
        "epochs": epochs, "epoch_source": epoch_source,
        "timeline": timeline(samples, inst["progress"], points, {tuple(k) for k in inst["train_ids"]}),
    }


def worker_samples(samples: List[Dict[str, Any]]) -> List[Any]:
    """The workers' CPU in the samples taken while workers existed (more than the main process
    in the group): before the first loader starts its workers there is nothing to average."""
    return [r.get("cores_workers") for r in samples if (r.get("procs") or 0) > 1]


def shm_of(path: str) -> Optional[Dict[str, Any]]:
    """Size and free bytes of the shared-memory mount DataLoader workers hand batches through."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return {"path": path, "size_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize}


def _train_counts(doc: Dict[str, Any], train_ids: Any) -> Dict[str, Any]:
    """A progress line's counts for the training loader (the whole line's totals from older ones)."""
    rows = doc.get("loaders")
    if not isinstance(rows, dict):
        return doc
    picked = [r for lid, r in rows.items() if (str(doc.get("pid")), int(lid)) in train_ids and len(r) >= 5]
    return {"wait_s": sum(r[1] for r in picked), "step_s": sum(r[2] for r in picked),
            "batches": sum(r[0] for r in picked), "t": doc["t"], "pid": doc.get("pid")}


def timeline(samples: List[Dict[str, Any]], progress: List[Dict[str, Any]], points: int,
             train_ids: Any = None) -> Dict[str, List[Any]]:
    """Downsampled series (seconds from the first sample): CPU %, GPU util %, data-wait share
    and batches/s per instrumentation interval."""
    t0 = None
    if samples:
        t0 = samples[0]["t"]
    if progress and (t0 is None or progress[0]["t"] < t0):
        t0 = progress[0]["t"]
    step = max(1, len(samples) // max(1, points))
    out = {"t": [], "cpu_pct": [], "gpu_util_pct": [], "cores_workers": []}  # type: Dict[str, List[Any]]
    train_ids = set(train_ids or [])
    for row in samples[::step]:
        out["t"].append(round(row["t"] - t0, 1))
        out["cpu_pct"].append(row.get("cpu"))
        utils = [g.get("util") for g in row.get("gpus") or [] if g.get("util") is not None]
        out["gpu_util_pct"].append(round(sum(utils) / float(len(utils)), 1) if utils else None)
        out["cores_workers"].append(row.get("cores_workers"))
    series = {"t": [], "data_wait": [], "batches_per_s": []}  # type: Dict[str, List[Any]]
    prev = {}  # type: Dict[Any, Dict[str, Any]]
    rows = []
    for doc in progress:
        doc = _train_counts(doc, train_ids)
        last = prev.get(doc.get("pid"))
        prev[doc.get("pid")] = doc
        if last is None:
            continue
        dw = float(doc.get("wait_s") or 0) - float(last.get("wait_s") or 0)
        ds = float(doc.get("step_s") or 0) - float(last.get("step_s") or 0)
        db = int(doc.get("batches") or 0) - int(last.get("batches") or 0)
        dt = float(doc["t"]) - float(last["t"])
        if dt > 0 and db >= 0:
            rows.append((doc["t"], dw / (dw + ds) if dw + ds > 0 else None, db / dt))
    pstep = max(1, len(rows) // max(1, points))
    for t, share, rate in rows[::pstep]:
        series["t"].append(round(t - (t0 or t), 1))
        series["data_wait"].append(None if share is None else round(share, 3))
        series["batches_per_s"].append(round(rate, 2))
    out["loader"] = series  # type: ignore[assignment]
    return out
