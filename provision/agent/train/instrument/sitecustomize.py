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

import provision_batches as _batches  # its siblings, first on PYTHONPATH with it
import provision_hygiene as _hygiene

_PATH = os.environ.get("PROVISION_TRAIN_INSTRUMENT")
_lock = threading.Lock()
_state = {"file": None, "last_flush": 0.0, "amp": None, "scaler": False, "device": None,
          "loaders": {}, "pending": None, "backward": 0, "opt_steps": 0, "collectives": 0}
_FLUSH_S = 1.0
_TORCH_DIR = None  # torch's package folder: frames inside it are not where a loader was made


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
    per = {}
    batches = wait = step = epochs = 0
    for rec in list(_state["loaders"].values()):
        per[rec["id"]] = [rec["batches"], round(rec["wait"], 4), round(rec["step"], 4), rec["train"], rec["epochs"]]
        batches += rec["batches"]
        wait += rec["wait"]
        step += rec["step"]
        epochs += rec["epochs"]
    # per loader: [batches, wait_s, step_s, training batches, epochs]; totals for older readers
    _write({"kind": "progress", "loaders": per, "batches": batches, "wait_s": round(wait, 4),
            "step_s": round(step, 4), "epochs": epochs, "backward": _state["backward"],
            "opt_steps": _state["opt_steps"], "collectives": _state["collectives"],
            "amp": _state["amp"], "scaler": _state["scaler"], "device": _state["device"]})


_MAX_FRAMES = 12
_origins = {}  # id(dataset) -> (weak reference to it, the site of the first loader made over it)


def _creation_frames(loader):
    """file:line of the frames outside torch, this file and the loader's own __init__ (a
    DataLoader subclass), innermost first: the first is where the loader was made; the rest say
    through which framework (the controller's registry turns them into that framework's knob)."""
    try:
        frame = sys._getframe(2)
    except ValueError:
        return []
    found = []
    for _ in range(80):
        if frame is None or len(found) >= _MAX_FRAMES:
            break
        name = frame.f_code.co_filename
        if (name not in _hygiene.OUR_FILES and not (_TORCH_DIR and name.startswith(_TORCH_DIR)) and not name.startswith("<")
                and not _holds(frame, loader)):
            found.append("%s:%d" % (name, frame.f_lineno))
        frame = frame.f_back
    return found


def _holds(frame, loader):
    """A frame that already has the loader being built is part of its construction (a subclass's
    __init__, Lightning's wrapper that records the init arguments), not where it was made."""
    try:
        return any(value is loader for value in list(frame.f_locals.values())[:64])
    except Exception:
        return False


def _origin_of(dataset, site):
    """The site of an earlier loader over the same dataset object: accelerate's prepare() (and
    Lightning's sampler injection) rebuilds the user's loader; the user's knob is at the first."""
    if dataset is None or site is None:
        return None
    import weakref

    held = _origins.get(id(dataset))
    if held is not None and held[0]() is dataset:
        # only a loader a library makes is a rebuild: the user's own second loader over a dataset
        # (minGPT's adder evaluates on the training set) is a loader of its own
        rebuilt = "/site-packages/" in site or "/dist-packages/" in site
        return held[1] if rebuilt and held[1] != site else None
    try:
        _origins[id(dataset)] = (weakref.ref(dataset), site)
    except TypeError:  # not weakly referable: no origin, never an id reused by another object
        pass
    return None


def _loader_doc(loader):
    """A loader's settings, as its `loader` line says them."""
    dataset = getattr(loader, "dataset", None)
    iterable = False
    try:
        from torch.utils.data import IterableDataset

        iterable = isinstance(dataset, IterableDataset)
    except Exception:
        pass
    return {"site": getattr(loader, "_provision_site", None),
            "num_workers": getattr(loader, "num_workers", None),
            "pin_memory": bool(getattr(loader, "pin_memory", False)),
            "persistent_workers": bool(getattr(loader, "persistent_workers", False)),
            "prefetch_factor": getattr(loader, "prefetch_factor", None),
            "batch_size": _batch_size(loader, dataset, iterable),
            "frames": getattr(loader, "_provision_frames", None) or [],
            "origin": getattr(loader, "_provision_origin", None),
            "dataset": type(dataset).__name__ if dataset is not None else None, "iterable": iterable,
            "dataset_len": _batches.safe_len(dataset), "paths": _batches.paths_of(dataset) if dataset is not None else [],
            "cpus": os.cpu_count()}


def _batch_size(loader, dataset, iterable):
    """The loader's batch_size; else its batch sampler's (accelerate and the HF Trainer hand the
    DataLoader a BatchSampler, or one wrapped in a BatchSamplerShard); else, for an iterable
    dataset that batches itself (batch_size=None), the dataset's own batch_size."""
    candidates = [getattr(loader, "batch_size", None)]
    sampler = getattr(loader, "batch_sampler", None)
    for _ in range(3):  # a sampler wrapping a sampler (BatchSamplerShard -> BatchSampler)
        if sampler is None:
            break
        candidates.append(getattr(sampler, "batch_size", None))
        sampler = getattr(sampler, "batch_sampler", None)
    if iterable:
        candidates.append(getattr(dataset, "batch_size", None))
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _record(inst, role):
    """The record of a loader's creation site and role: loaders rebuilt at the same line each
    epoch (or each evaluation) are one loader; a loader made at the same line for training and
    for evaluation (llama2.c's Task.iter_batches) is two, told apart by whether a backward or
    optimizer step ever followed one of its batches."""
    key = (inst["key"], role)
    rec = _state["loaders"].get(key)
    if rec is None:
        rec = {"id": len(_state["loaders"]), "batches": 0, "wait": 0.0, "step": 0.0, "train": 0, "epochs": 0,
               "first": True, "untrained": 0}
        _state["loaders"][key] = rec
        doc = dict(inst["doc"], kind="loader", id=rec["id"])
        _write(doc)
    return rec


def _instance(loader):
    """A loader object's own counts while none of its batches has been trained on yet."""
    inst = getattr(loader, "_provision_inst", None)
    if inst is None:
        site = getattr(loader, "_provision_site", None)
        origin = getattr(loader, "_provision_origin", None)
        # a framework rebuilds every user loader at one line of its own: the user's line tells them apart
        key = (site, origin) if origin else site
        inst = {"key": key or ("id", id(loader)), "doc": _loader_doc(loader), "trained": False,
                "batches": 0, "wait": 0.0, "step": 0.0, "epochs": 0, "first": None}
        inst["rec"] = _record(inst, "other")
        inst["rec"]["untrained"] += 1
        try:
            object.__setattr__(loader, "_provision_inst", inst)
        except Exception:
            pass
    return inst


def _promote(inst):
    """A loader's batch was trained on: its counts move to its site's training record (the
    record itself when no other loader of that site shares it)."""
    inst["trained"] = True
    old = inst["rec"]
    old["untrained"] -= 1
    train_key = (inst["key"], "train")
    if old["untrained"] == 0 and train_key not in _state["loaders"]:
        del _state["loaders"][(inst["key"], "other")]
        _state["loaders"][train_key] = old
        return
    rec = _record(inst, "train")
    for name in ("batches", "wait", "step", "epochs"):
        old[name] -= inst[name]
        rec[name] += inst[name]
    if old.get("first_of") is inst:  # its first batch was this loader's: the next one says it
        old["first"], old["first_of"] = True, None
    if rec["first"] and inst["first"] is not None:
        rec["first"] = False
        _write({"kind": "first_batch", "loader": rec["id"], "wait_s": inst["first"][0], "batch_bytes": inst["first"][1]})
    inst["rec"] = rec


def _patch_dataloader(module):
    global _TORCH_DIR
    base = getattr(module, "_BaseDataLoaderIter", None)
    if base is None or getattr(base, "_provision_patched", False):
        return
    _TORCH_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(module.__file__)))) + os.sep
    orig_init, orig_reset, orig_next = base.__init__, base._reset, base.__next__
    loader_cls = getattr(module, "DataLoader", None)
    if loader_cls is not None:
        orig_loader_init = loader_cls.__init__

        def loader_init(self, *args, **kwargs):
            orig_loader_init(self, *args, **kwargs)
            try:
                frames = _creation_frames(self)
                site = frames[0] if frames else None
                object.__setattr__(self, "_provision_site", site)
                object.__setattr__(self, "_provision_frames", frames[1:])
                object.__setattr__(self, "_provision_origin", _origin_of(getattr(self, "dataset", None), site))
            except Exception:
                pass

        loader_cls.__init__ = loader_init

    def _epoch(self, loader):
        inst = _instance(loader)
        inst["rec"]["epochs"] += 1
        if not inst["trained"]:
            inst["epochs"] += 1
        # per iterator: a training iterator stays open while evaluation ones run (llama2.c)
        self._provision_it = {"inst": inst, "prev": None, "start": time.perf_counter(), "batches": 0}

    def __init__(self, loader, *args, **kwargs):  # a new iterator: an epoch starts
        orig_init(self, loader, *args, **kwargs)
        try:
            _epoch(self, loader)
        except Exception:  # instrumentation must never break the user's job
            pass

    def _reset(self, loader, first_iter=False, *args, **kwargs):  # persistent workers' next epochs
        orig_reset(self, loader, first_iter, *args, **kwargs)
        if not first_iter:
            try:
                _epoch(self, loader)
            except Exception:
                pass

    def __next__(self):
        start = time.perf_counter()
        it = getattr(self, "_provision_it", None)
        try:
            batch = orig_next(self)
        except StopIteration:
            if it is not None and it["prev"] is not None:
                rec = it["inst"]["rec"]
                _write({"kind": "epoch", "loader": rec["id"], "epoch": rec["epochs"], "batches": it["batches"],
                        "seconds": round(time.perf_counter() - it["start"], 4)})
                it["prev"] = None
            raise
        if it is None:
            return batch
        end = time.perf_counter()
        inst = it["inst"]
        rec = inst["rec"]
        prev = it["prev"]
        if prev is not None:  # the first batch's wait includes worker start-up: counted apart
            rec["step"] += start - prev
            rec["wait"] += end - start
            rec["batches"] += 1
            if not inst["trained"]:
                inst["step"] += start - prev
                inst["wait"] += end - start
                inst["batches"] += 1
            if _state["device"] != "cuda" and rec["batches"] % 256 == 0:  # cheap, but not per batch
                _state["device"] = _batches.device_guess(batch)
        elif inst["first"] is None:
            wait, size = round(end - start, 4), _batches.bytes_of(batch)
            inst["first"] = (wait, size)
            _state["device"] = _state["device"] or _batches.device_guess(batch)
            if rec["first"]:
                rec["first"], rec["first_of"] = False, inst
                _write({"kind": "first_batch", "loader": rec["id"], "wait_s": wait, "batch_bytes": size,
                        "rows": _batches.rows_of(batch)})
        it["prev"] = end
        it["batches"] += 1
        # a batch not yet trained on: the next backward (or optimizer step) trains on it, or on
        # the one before (a one-batch-ahead wrapper -- timm's PrefetchLoader, accelerate,
        # Lightning -- asks for batch k+1 before step k, and for none before the epoch's last)
        inst["owed"] = inst.get("owed", 0) + 1
        _state["pending"] = inst
        _progress()
        return batch

    base.__init__ = __init__
    base._reset = _reset
    base.__next__ = __next__
    base._provision_patched = True


def _trained():
    """A step (a backward; an optimizer step without one): the loader that yielded the latest
    batch trained on one of its batches not yet counted. Counted at the step, not at __next__,
    so a loader read one batch ahead is not one short per epoch; never more than its batches."""
    inst = _state["pending"]
    if inst is not None and inst.get("owed", 0) > 0:
        inst["owed"] -= 1
        try:
            if not inst["trained"]:
                _promote(inst)
            inst["rec"]["train"] += 1
        except Exception:  # never break the user's backward
            pass


def _patch_autograd(module):
    orig = getattr(module, "backward", None)
    if orig is None or getattr(orig, "_provision_patched", False):
        return

    def backward(*args, **kwargs):
        _state["backward"] += 1
        _state["backward_since_step"] = True
        _trained()
        return orig(*args, **kwargs)

    backward._provision_patched = True
    backward.__doc__, backward.__wrapped__ = orig.__doc__, orig
    module.backward = backward


def _patch_optimizer(module):
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is None or _state.get("opt_hooked"):
        return
    _state["opt_hooked"] = True

    def after_step(optimizer, args, kwargs):
        _state["opt_steps"] += 1
        if not _state.pop("backward_since_step", False):  # a step is one backward or one optimizer step
            _trained()
        _progress()  # a job without a DataLoader is counted too (at most one line a second)

    register(after_step)


_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
                "broadcast", "reduce", "all_to_all", "all_to_all_single", "barrier", "gather", "scatter")


def _patch_c10d(module):
    """A process group and its collectives: the multi-host findings need both (DDP's own
    all-reduces run in C++: the ddp record stands for them)."""
    init = getattr(module, "init_process_group", None)
    if init is None or getattr(init, "_provision_patched", False):
        return
    import functools

    @functools.wraps(init)
    def init_process_group(*args, **kwargs):
        result = init(*args, **kwargs)
        try:
            _write({"kind": "dist", "backend": str(module.get_backend()), "world_size": module.get_world_size(),
                    "rank": module.get_rank()})
        except Exception:
            pass
        return result

    init_process_group._provision_patched = True
    module.init_process_group = init_process_group
    for name in _COLLECTIVES:
        fn = getattr(module, name, None)
        if fn is None:
            continue

        def make(fn):
            @functools.wraps(fn)
            def collective(*args, **kwargs):
                _state["collectives"] += 1
                return fn(*args, **kwargs)
            return collective

        setattr(module, name, make(fn))


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
    "torch.autograd": _patch_autograd,
    "torch.optim.optimizer": _patch_optimizer,
    "torch.distributed.distributed_c10d": _patch_c10d,
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
    _hygiene.install_excepthooks()
    _hygiene.install_warn()
    sys.meta_path.insert(0, _AfterImport())
    for name, patch in _PATCHES.items():  # already imported (unusual at start-up)
        if name in sys.modules:
            patch(sys.modules[name])
    import atexit

    atexit.register(lambda: (_state["loaders"] or _state["opt_steps"]) and _progress(force=True))
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
