"""Batch probes for provision train's sitecustomize.py (its sibling on the run's PYTHONPATH):
what a batch holds — the device it is on, its bytes and rows, a dataset's length and the paths it
names — read without copying a tensor; every probe is bounded in depth and never raises."""

import os
import sys


def paths_of(dataset, limit=3):
    """Paths a dataset names (ImageFolder's root, a list of files...): where its data is read."""
    found = []
    try:
        items = list(vars(dataset).items())
    except TypeError:
        return found
    for _, value in items[:50]:
        candidates = []
        listed = False
        if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
            candidates = [value]
        elif isinstance(value, (list, tuple)) and value:
            first = value[0]
            candidates = [first[0] if isinstance(first, tuple) and first else first]
            listed = True
        for c in candidates:
            try:
                text = os.fsdecode(os.fspath(c))
            except TypeError:
                continue
            if text.startswith("/") or os.sep in text:
                full = os.path.abspath(text)
                if listed and os.path.isfile(full):
                    full = os.path.dirname(full)  # a list of sample files: their folder is the data
                if os.path.exists(full) and full not in found:
                    found.append(full)
        if len(found) >= limit:
            break
    return found


def device_of(batch, depth=0):
    if depth > 3:
        return None
    dev = getattr(batch, "device", None)
    if dev is not None:
        return str(getattr(dev, "type", dev))
    if isinstance(batch, (list, tuple)) and batch:
        return device_of(batch[0], depth + 1)
    if isinstance(batch, dict) and batch:
        return device_of(next(iter(batch.values())), depth + 1)
    return None


def bytes_of(batch, depth=0):
    """Bytes of the tensors in a batch (what a worker puts in shared memory for it)."""
    if depth > 4:
        return 0
    numel = getattr(batch, "numel", None)
    if numel is not None and hasattr(batch, "element_size"):
        try:
            return int(numel()) * int(batch.element_size())
        except Exception:
            return 0
    if isinstance(batch, (list, tuple)):
        return sum(bytes_of(b, depth + 1) for b in batch[:64])
    if isinstance(batch, dict):
        return sum(bytes_of(b, depth + 1) for b in list(batch.values())[:64])
    return 0


def rows_of(batch, depth=0):
    """The leading dimension of a batch's first tensor: the batch size of a loader that does not
    batch (batch_size=None) over an iterable dataset that yields whole batches."""
    if depth > 3:
        return None
    shape = getattr(batch, "shape", None)
    if shape is not None:
        try:
            return int(shape[0]) if len(shape) else None
        except Exception:
            return None
    if isinstance(batch, (list, tuple)) and batch:
        return rows_of(batch[0], depth + 1)
    if isinstance(batch, dict) and batch:
        return rows_of(next(iter(batch.values())), depth + 1)
    return None


def safe_len(dataset):
    try:
        return len(dataset)
    except Exception:
        return None


def device_guess(batch):
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return "cuda"
    except Exception:
        pass
    return device_of(batch) or "cpu"
