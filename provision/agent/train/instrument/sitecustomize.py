"""provision train's instrumentation: imported by Python at start-up (it is first on PYTHONPATH),
it changes nothing in the user's code. When torch's DataLoader, autocast and GradScaler modules
are imported it wraps a few methods to record:

- per DataLoader iterator (one epoch): num_workers, pin_memory, batch_size, the dataset's class
  and the paths it names; each __next__'s wait (time inside the loader) against the time between
  batches (the training step);
- whether autocast (and its dtype) and GradScaler are used; the device batches go to.

Compact JSON lines go to $PROVISION_TRAIN_INSTRUMENT, at most one progress line per second, so the
cost per batch is two perf_counter() calls and a few additions. Any other sitecustomize on
sys.path is still imported after this one.
"""

import os
import sys
import threading
import time

_PATH = os.environ.get("PROVISION_TRAIN_INSTRUMENT")
_lock = threading.Lock()
_state = {"file": None, "last_flush": 0.0, "batches": 0, "wait": 0.0, "step": 0.0,
          "first_wait": None, "amp": None, "scaler": False, "device": None, "epochs": 0}
_FLUSH_S = 1.0


def _write(doc):
    if not _PATH:
        return
    try:
        with _lock:
            if _state["file"] is None:
                _state["file"] = open(_PATH, "a", buffering=1)
            import json

            doc["pid"] = os.getpid()
            doc["t"] = round(time.time(), 3)
            _state["file"].write(json.dumps(doc, separators=(",", ":")) + "\n")
    except Exception:
        pass  # instrumentation must never break the user's job


def _progress(force=False):
    now = time.time()
    if not force and now - _state["last_flush"] < _FLUSH_S:
        return
    _state["last_flush"] = now
    _write({"kind": "progress", "batches": _state["batches"], "wait_s": round(_state["wait"], 4),
            "step_s": round(_state["step"], 4), "epochs": _state["epochs"],
            "amp": _state["amp"], "scaler": _state["scaler"], "device": _state["device"]})


def _paths_of(dataset, limit=3):
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


def _device_of(batch, depth=0):
    if depth > 3:
        return None
    dev = getattr(batch, "device", None)
    if dev is not None:
        return str(getattr(dev, "type", dev))
    if isinstance(batch, (list, tuple)) and batch:
        return _device_of(batch[0], depth + 1)
    if isinstance(batch, dict) and batch:
        return _device_of(next(iter(batch.values())), depth + 1)
    return None


def _patch_dataloader(module):
    base = getattr(module, "_BaseDataLoaderIter", None)
    if base is None or getattr(base, "_provision_patched", False):
        return
    orig_init, orig_next = base.__init__, base.__next__

    def __init__(self, loader, *args, **kwargs):
        orig_init(self, loader, *args, **kwargs)
        self._provision_prev = None
        self._provision_started = time.perf_counter()
        self._provision_batches = 0
        _state["epochs"] += 1
        dataset = getattr(loader, "dataset", None)
        _write({"kind": "loader", "num_workers": getattr(loader, "num_workers", None),
                "pin_memory": bool(getattr(loader, "pin_memory", False)),
                "batch_size": getattr(loader, "batch_size", None),
                "dataset": type(dataset).__name__ if dataset is not None else None,
                "dataset_len": _safe_len(dataset), "paths": _paths_of(dataset) if dataset is not None else [],
                "epoch": _state["epochs"], "cpus": os.cpu_count()})

    def __next__(self):
        start = time.perf_counter()
        prev = getattr(self, "_provision_prev", None)
        try:
            batch = orig_next(self)
        except StopIteration:
            _write({"kind": "epoch", "epoch": _state["epochs"], "batches": getattr(self, "_provision_batches", 0),
                    "seconds": round(time.perf_counter() - getattr(self, "_provision_started", start), 4)})
            self._provision_prev = None
            raise
        end = time.perf_counter()
        if prev is not None:  # the first batch's wait includes worker start-up: counted apart
            _state["step"] += start - prev
            _state["wait"] += end - start
            _state["batches"] += 1
        elif _state["first_wait"] is None:
            _state["first_wait"] = end - start
            _write({"kind": "first_batch", "wait_s": round(end - start, 4)})
        self._provision_prev = end
        self._provision_batches = getattr(self, "_provision_batches", 0) + 1
        if _state["device"] != "cuda" and _state["batches"] % 256 == 0:  # cheap, but not per batch
            _state["device"] = _device_guess(batch)
        _progress()
        return batch

    base.__init__ = __init__
    base.__next__ = __next__
    base._provision_patched = True


def _safe_len(dataset):
    try:
        return len(dataset)
    except Exception:
        return None


def _device_guess(batch):
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return "cuda"
    except Exception:
        pass
    return _device_of(batch) or "cpu"


def _patch_autocast(module):
    cls = getattr(module, "autocast", None)
    if cls is None or getattr(cls, "_provision_patched", False):
        return
    orig_enter = cls.__enter__

    def __enter__(self):
        result = orig_enter(self)
        if getattr(self, "_enabled", True) and _state["amp"] is None:
            dtype = str(getattr(self, "fast_dtype", "")).replace("torch.", "")
            _state["amp"] = {"device_type": getattr(self, "device", None), "dtype": dtype or None}
            _write({"kind": "amp", "amp": _state["amp"]})
        return result

    cls.__enter__ = __enter__
    cls._provision_patched = True


def _patch_scaler(module):
    cls = getattr(module, "GradScaler", None)
    if cls is None or getattr(cls, "_provision_patched", False):
        return
    orig_init = cls.__init__

    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        if getattr(self, "_enabled", True) and not _state["scaler"]:
            _state["scaler"] = True
            _write({"kind": "scaler"})

    cls.__init__ = __init__
    cls._provision_patched = True


def _patch_ddp(module):
    """DistributedDataParallel: the gradient bytes all-reduced per step (the network_bound rule)."""
    cls = getattr(module, "DistributedDataParallel", None)
    if cls is None or getattr(cls, "_provision_patched", False):
        return
    orig_init = cls.__init__

    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        try:
            params = [p for p in self.module.parameters() if p.requires_grad]
            _write({"kind": "ddp", "params": sum(p.numel() for p in params),
                    "grad_bytes": sum(p.numel() * p.element_size() for p in params)})
        except Exception:
            pass

    cls.__init__ = __init__
    cls._provision_patched = True


_PATCHES = {
    "torch.nn.parallel.distributed": _patch_ddp,
    "torch.utils.data.dataloader": _patch_dataloader,
    "torch.amp.autocast_mode": _patch_autocast,
    "torch.amp.grad_scaler": _patch_scaler,
}


class _AfterImport(object):
    """A meta-path finder that lets the real loader run, then patches the module."""

    def find_spec(self, name, path=None, target=None):
        if name not in _PATCHES:
            return None
        import importlib.util

        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        orig_exec = loader.exec_module

        def exec_module(module, _orig=orig_exec, _name=name):
            _orig(module)
            try:
                _PATCHES[_name](module)
            except Exception as exc:  # never break the import
                _write({"kind": "error", "where": _name, "error": str(exc)})

        loader.exec_module = exec_module
        return spec


def _install():
    if not _PATH:
        return
    sys.meta_path.insert(0, _AfterImport())
    for name, patch in _PATCHES.items():  # already imported (unusual at start-up)
        if name in sys.modules:
            patch(sys.modules[name])
    import atexit

    atexit.register(lambda: _state["epochs"] and _progress(force=True))
    _write({"kind": "start", "argv": sys.argv[:1], "python": sys.version.split()[0]})


def _chain():
    """Import the sitecustomize this one shadows (a conda or distro one), if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.path[:]
    me = sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        import importlib

        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    except Exception:
        pass
    finally:
        sys.path[:] = saved
        if me is not None:
            sys.modules["sitecustomize"] = me


_install()
_chain()
