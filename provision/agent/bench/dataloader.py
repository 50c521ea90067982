"""DataLoader throughput over the real data: can loading keep up with training?

Each source (the staged LMDB, the raw image folder, the network-disk copy; a small generated
image folder when none is given) is read through torch's DataLoader with a realistic
pipeline: read the bytes, decode with PIL, resize, random flip, uint8 CHW tensor. The sweep
covers num_workers 0, 1, 2, 4, ... up to the cores this process may use (cgroup quota
included), timed after the workers' prefetch queue drained so each figure is the steady rate.
The best setting (num_workers >= 1: workers overlap loading with training, while
num_workers=0 loads between steps) is compared with the AMP training speed measured on the
same image size.
"""

import io
import math
import os
import random
import shutil
import sys
import tempfile
import time

from provision.agent.bench.common import Skip, cuda_available, effective_cores, import_torch, sig

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".ppm", ".gif", ".tif", ".tiff")


# -- datasets (module level so DataLoader workers can unpickle them under any start method) --


class FolderDataset(object):
    """An ImageFolder-style tree: root/<class>/<image>; ds[i] -> (bytes, label)."""

    def __init__(self, root):
        self.root = root
        classes = sorted(
            d
            for d in os.listdir(root)
            if os.path.isdir(os.path.join(root, d)) and not d.startswith(".")
        )
        samples = []
        if classes:
            for label, name in enumerate(classes):
                for dirpath, _dirs, files in os.walk(os.path.join(root, name)):
                    for f in sorted(files):
                        if f.lower().endswith(IMAGE_EXTENSIONS):
                            samples.append((os.path.join(dirpath, f), label))
        else:  # a flat folder of images: one class
            for f in sorted(os.listdir(root)):
                if f.lower().endswith(IMAGE_EXTENSIONS):
                    samples.append((os.path.join(root, f), 0))
        self.classes = classes
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        with open(path, "rb") as f:
            return f.read(), label


class ImageTransform(object):
    """bytes -> decoded, resized, randomly flipped uint8 CHW tensor (no torchvision needed)."""

    def __init__(self, size):
        self.size = size

    def __call__(self, data):
        import torch
        from PIL import Image

        img = Image.open(io.BytesIO(data)).convert("RGB")
        img = img.resize((self.size, self.size), Image.BILINEAR)
        if random.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        raw = bytearray(img.tobytes())
        if hasattr(torch, "frombuffer"):
            flat = torch.frombuffer(raw, dtype=torch.uint8)
        else:  # torch < 1.10
            import numpy

            flat = torch.from_numpy(numpy.frombuffer(raw, dtype=numpy.uint8).copy())
        return flat.view(self.size, self.size, 3).permute(2, 0, 1)


class Decoded(object):
    """(bytes, label) dataset -> (tensor, label): what a training script's Dataset returns."""

    def __init__(self, base, transform):
        self.base = base
        self.transform = transform

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        data, label = self.base[i]
        return self.transform(data), -1 if label is None else label


def detect_format(path):
    if os.path.isfile(path) or os.path.exists(os.path.join(path, "data.mdb")):
        return "lmdb"
    if os.path.isdir(path):
        return "folder"
    raise FileNotFoundError("dataset path %s does not exist on this host" % path)


def open_source(source):
    fmt = source.get("format") or detect_format(source["path"])
    if fmt == "lmdb":
        # lazy: the LMDB reader (lmdb) only for an LMDB source
        from provision.agent.datasets.reader import LMDBDataset

        return fmt, LMDBDataset(source["path"])
    if fmt == "folder":
        return fmt, FolderDataset(source["path"])
    raise ValueError("dataset %s: unknown format %r (lmdb or folder)" % (source["path"], fmt))


def normalize_sources(datasets):
    """request["datasets"] -> [{"path", "format", "role", "name"}]; strings are bare paths."""
    out = []
    for i, item in enumerate(datasets or []):
        if isinstance(item, str):
            item = {"path": item}
        if not isinstance(item, dict) or not item.get("path"):
            raise ValueError(
                'request datasets[%d] = %r: expected a path or {"path": ..., "format": '
                '"lmdb"|"folder", "role": "local"|"raw"|"network"}' % (i, item)
            )
        path = os.path.expanduser(item["path"])
        out.append(
            {
                "path": path,
                "format": item.get("format"),
                "role": item.get("role") or "local",
                "name": item.get("name") or os.path.basename(path.rstrip("/")),
            }
        )
    return out


def make_sample_folder(root, count, size, classes=4, seed=0):
    """A small ImageFolder of JPEGs (shapes on a plain background, like simple photos)."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    for c in range(classes):
        os.makedirs(os.path.join(root, "class%d" % c), exist_ok=True)
    for i in range(count):
        img = Image.new("RGB", (size, size), tuple(rng.randrange(256) for _ in range(3)))
        draw = ImageDraw.Draw(img)
        for _ in range(6):
            x0, y0 = rng.randrange(size), rng.randrange(size)
            box = [x0, y0, x0 + rng.randrange(1, size), y0 + rng.randrange(1, size)]
            draw.ellipse(box, fill=tuple(rng.randrange(256) for _ in range(3)))
        img.save(os.path.join(root, "class%d" % (i % classes), "%05d.jpg" % i), quality=90)
    return root


# -- measurement -------------------------------------------------------------------------------


def shm_total_mb():
    """Size of /dev/shm, where DataLoader workers hand batches over (Docker's default: 64 MB)."""
    try:
        return int(shutil.disk_usage("/dev/shm").total >> 20)
    except OSError:
        return None


def worker_counts(cores):
    """0, 1, 2, 4, ... below `cores`, and `cores` itself."""
    counts, n = [0], 1
    while n < cores:
        counts.append(n)
        n *= 2
    counts.append(cores)
    return counts


def _context():
    import multiprocessing

    # fork: no re-import of the agent in each worker (Python 3.14 defaults to forkserver).
    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return None


def _loader(torch, dataset, batch_size, workers, pin, persistent):
    kwargs = {}
    if workers > 0:
        kwargs["persistent_workers"] = persistent
        kwargs["prefetch_factor"] = 2
        ctx = _context()
        if ctx is not None:
            kwargs["multiprocessing_context"] = ctx
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=workers,
        pin_memory=pin,
        drop_last=True,
        **kwargs,
    )


def _shutdown(loader):
    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()


def run_setting(torch, dataset, batch_size, workers, pin, persistent, seconds, max_batches):
    """Samples/s of one DataLoader setting in steady state, bounded by `seconds`/`max_batches`."""
    loader = _loader(torch, dataset, batch_size, workers, pin, persistent)
    try:
        began = time.perf_counter()
        it = iter(loader)
        next(it)
        first_batch_s = time.perf_counter() - began
        # Drain what workers prefetched while starting, so the clock sees the production rate.
        for _ in range(workers * 2):
            try:
                next(it)
            except StopIteration:
                it = iter(loader)
        samples, batches, epochs = 0, 0, 0
        start = time.perf_counter()
        while batches < max_batches and time.perf_counter() - start < seconds:
            try:
                images, _labels = next(it)
            except StopIteration:
                epochs += 1
                it = iter(loader)
                continue
            samples += images.shape[0]
            batches += 1
        elapsed = time.perf_counter() - start
        result = {
            "num_workers": workers,
            "pin_memory": pin,
            "persistent_workers": bool(persistent and workers > 0),
            "samples_per_s": sig(samples / elapsed) if samples else None,
            "first_batch_s": round(first_batch_s, 3),
            "batches": batches,
            "seconds": round(elapsed, 2),
        }
        if persistent and workers > 0:
            # What a new epoch costs to start with workers kept alive.
            began = time.perf_counter()
            next(iter(loader))
            result["next_epoch_first_batch_s"] = round(time.perf_counter() - began, 3)
        return result
    finally:
        _shutdown(loader)
        del loader


def verdict(loader_sps, train_sps, per_worker_sps=None, best_workers=None, cores=None, role=None):
    """Can loading feed training? ok (>= 1.2x the training rate), marginal, or bottleneck."""
    if not loader_sps or not train_sps:
        return {
            "verdict": "unknown",
            "reason": "no training speed measured to compare with"
            if loader_sps
            else "no loading speed",
        }
    ratio = loader_sps / float(train_sps)
    out = {
        "loader_samples_per_s": loader_sps,
        "train_samples_per_s": train_sps,
        "ratio": round(ratio, 2),
    }
    needed = None
    if per_worker_sps:
        needed = int(math.ceil(1.2 * train_sps / per_worker_sps))
        out["workers_needed"] = needed
    if ratio >= 1.2:
        out["verdict"] = "ok"
        out["recommendation"] = "num_workers=%s keeps up with %.0f samples/s of training" % (
            best_workers,
            train_sps,
        )
        return out
    out["verdict"] = "marginal" if ratio >= 1.0 else "bottleneck"
    advice = []
    if role == "network":
        advice.append("stage the dataset to the local SSD (provision stage)")
    if (
        needed is not None
        and cores is not None
        and needed <= cores
        and needed > (best_workers or 0)
    ):
        advice.append("raise num_workers to %d" % needed)
    else:
        advice.append(
            "decoding is CPU-bound at %s cores: pre-resize the images, store them in LMDB on the "
            "local SSD, or decode on the GPU (NVIDIA DALI)" % cores
        )
    out["recommendation"] = "; ".join(advice)
    return out


def measure(request, quick, amp_result=None):
    torch = import_torch()
    try:
        import PIL  # noqa: F401
    except ImportError:
        raise Skip(
            "Pillow is not installed: pip install pillow (needed to decode images)"
        ) from None
    on_gpu = cuda_available(torch)
    amp_result = amp_result or {}
    image_size = int(
        request.get("image_size") or amp_result.get("image_size") or (224 if on_gpu else 32)
    )
    batch_size = int(request.get("loader_batch_size") or (64 if on_gpu else 32))
    cores = effective_cores()
    counts = worker_counts(cores)
    per_setting_s = 0.75 if quick else 3.0
    per_source_s = 8.0 if quick else 90.0
    if quick and not on_gpu:  # a small CPU's loader rate settles in half a second per setting
        per_setting_s, per_source_s = 0.5, 5.0
    sources = normalize_sources(request.get("datasets"))
    tmp = None
    if not sources:
        base = request.get("data_dir") or None
        tmp = tempfile.mkdtemp(prefix="provision-bench-images-", dir=base)
        count = 256 if quick else 1024
        make_sample_folder(tmp, count, int(image_size * 1.25))
        sources = [{"path": tmp, "format": "folder", "role": "synthetic", "name": "generated"}]
    train_sps = amp_result.get("train_samples_per_s")
    results = []
    try:
        for source in sources:
            results.append(
                _measure_source(
                    torch,
                    source,
                    image_size,
                    batch_size,
                    counts,
                    on_gpu,
                    per_setting_s,
                    per_source_s,
                    quick,
                )
            )
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    for r in results:
        if r.get("best"):
            r["verdict"] = verdict(
                r["best"]["samples_per_s"],
                train_sps,
                r.get("per_worker_samples_per_s"),
                r["best"]["num_workers"],
                cores,
                r["source"]["role"],
            )
    primary = _primary(results)
    out = {
        "image_size": image_size,
        "batch_size": batch_size,
        "cores": cores,
        "shm_mb": shm_total_mb(),
        "num_workers_tried": counts,
        "sources": results,
        "train_samples_per_s": train_sps,
        "best_num_workers": None,
        "best_samples_per_s": None,
        "verdict": None,
    }
    if primary is not None:
        out["primary"] = primary["source"]["name"]
        out["best_num_workers"] = primary["best"]["num_workers"]
        out["best_samples_per_s"] = primary["best"]["samples_per_s"]
        out["best"] = primary["best"]
        out["verdict"] = primary["verdict"]
    else:
        out["status"] = "error"
        out["reason"] = (
            "; ".join("%s: %s" % (r["source"]["path"], r.get("reason")) for r in results)
            or "no dataset measured"
        )
    return out


def _primary(results):
    """The source training will read: a staged LMDB first, then local, raw, anything measured."""
    order = {"lmdb": 0}
    ranked = [r for r in results if r.get("best")]
    ranked.sort(
        key=lambda r: (order.get(r["source"]["format"], 1), r["source"]["role"] == "network")
    )
    return ranked[0] if ranked else None


def _measure_source(
    torch, source, image_size, batch_size, counts, on_gpu, per_setting_s, per_source_s, quick
):
    entry = {"source": dict(source)}
    try:
        fmt, base = open_source(source)
    except Exception as exc:
        entry["status"] = "error"
        entry["reason"] = "%s: %s" % (type(exc).__name__, exc)
        return entry
    entry["source"]["format"] = fmt
    entry["source"]["samples"] = len(base)
    if len(base) < batch_size:
        entry["status"] = "skipped"
        entry["reason"] = "%d samples is fewer than one batch of %d" % (len(base), batch_size)
        return entry
    dataset = Decoded(base, ImageTransform(image_size))
    started = time.monotonic()
    max_batches = 60 if quick else 400
    settings = []
    for workers in counts:
        if time.monotonic() - started > per_source_s:
            settings.append(
                {"num_workers": workers, "skipped": "time budget for this source spent"}
            )
            continue
        try:
            settings.append(
                run_setting(
                    torch, dataset, batch_size, workers, on_gpu, True, per_setting_s, max_batches
                )
            )
        except Exception as exc:  # e.g. workers killed by a shared-memory limit (/dev/shm)
            failed = {"num_workers": workers, "error": "%s: %s" % (type(exc).__name__, exc)}
            if "shared memory" in str(exc) or "Bus error" in str(exc):
                failed["hint"] = (
                    "workers pass batches through /dev/shm (%s MB here): enlarge it "
                    "(docker run --shm-size=8g) or lower num_workers/batch size" % shm_total_mb()
                )
            settings.append(failed)
    measured = [s for s in settings if s.get("samples_per_s")]
    entry["settings"] = settings
    if not measured:
        entry["status"] = "error"
        entry["reason"] = "no DataLoader setting produced a batch"
        return entry
    # Workers overlap loading with training; num_workers=0 loads inside the training process,
    # between steps, so it is the baseline, not a candidate, whenever workers could be measured.
    candidates = [s for s in measured if s["num_workers"] > 0] or measured
    best = max(candidates, key=lambda s: s["samples_per_s"])
    entry["best"] = dict(best)
    one = [s for s in measured if s["num_workers"] == 1]
    entry["per_worker_samples_per_s"] = one[0]["samples_per_s"] if one else None
    extras = []
    if best["num_workers"] > 0 and time.monotonic() - started < per_source_s * 1.5:
        # Without persistent workers every epoch starts its workers again.
        extras.append(
            run_setting(
                torch,
                dataset,
                batch_size,
                best["num_workers"],
                on_gpu,
                False,
                per_setting_s / 2,
                max_batches,
            )
        )
        if on_gpu:  # pinned batches DMA straight to the GPU; measure what pinning costs here
            extras.append(
                run_setting(
                    torch,
                    dataset,
                    batch_size,
                    best["num_workers"],
                    False,
                    True,
                    per_setting_s,
                    max_batches,
                )
            )
    entry["variants"] = extras
    entry["status"] = "ok"
    return entry
