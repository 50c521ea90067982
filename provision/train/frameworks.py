"""Advice in the user's terms: paths relative to the project that was shipped, and for a loader a
known framework built, that framework's own knob (a small registry), else the DataLoader line.

A loader's instrumentation record (provision/agent/train/instrument/sitecustomize.py) has its
creation `site`, the `frames` outside torch that led there (innermost first) and its `origin`
(the site of an earlier loader over the same dataset: accelerate's prepare() rebuilds the
user's). A framework is known by the package folder its frames pass through; a traceback's
frames name the framework the same way (its flag that chose the device).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PACKAGE = re.compile(r"/(?:site|dist)-packages/([A-Za-z_][\w]*)/")
RUN_CODE = re.compile(r"^.*/runs/[^/]+/code/")  # <data_dir>/runs/<run_id>/code/: the run's own copy
LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python")


@dataclass(frozen=True)
class Framework:
    name: str
    packages: tuple[str, ...]
    workers: str  # the knob that sets the training loader's num_workers; {n}: the count, {at}: the user's line
    settings: dict[str, str]  # a DataLoader setting -> this framework's spelling of it
    device: str  # how a run of it is told to use the CPU (or which GPU)


REGISTRY = (
    Framework("Hugging Face Trainer", ("transformers",),
              "TrainingArguments(dataloader_num_workers={n}) (`--dataloader_num_workers {n}` in scripts that "
              "parse TrainingArguments; the Trainer builds the loader, called from {at})",
              {"pin_memory=True": "dataloader_pin_memory=True",
               "persistent_workers=True": "dataloader_persistent_workers=True"},
              "TrainingArguments(use_cpu=True) (`--use_cpu`), or run it on a GPU host"),
    Framework("Lightning", ("lightning", "pytorch_lightning"),
              "num_workers={n} in the DataLoader your LightningModule / LightningDataModule returns "
              "({at}; a DataModule's `num_workers` argument where it has one)",
              {}, "Trainer(accelerator='cpu'), or run it on a GPU host"),
    Framework("timm", ("timm",),
              "`-j {n}` / `--workers {n}` (timm's train.py; its create_loader call is {at})",
              {}, "`--device cpu`, or run it on a GPU host"),
    Framework("accelerate", ("accelerate",),
              "num_workers={n} in the DataLoader you pass to accelerator.prepare() ({at})",
              {}, "Accelerator(cpu=True) (`accelerate launch --cpu`), or run it on a GPU host"),
)
# torchvision's reference scripts build their loaders themselves, with `-j/--workers` for num_workers
TORCHVISION_REFERENCE = re.compile(r"(?:^|/)references/(?:classification|detection|segmentation|"
                                   r"video_classification|similarity|optical_flow|depth)/train\.py:\d+$")


def user_path(site: str | None, workdir: str | None = None) -> str | None:
    """`main.py:269` for `/root/autodl-tmp/runs/<id>/code/main.py:269`: a path inside the shipped
    project is said relative to it; anything else (site-packages) as it is."""
    if not site:
        return site
    if workdir:
        root = workdir.rstrip("/") + "/"
        if site.startswith(root):
            return site[len(root):]
    return RUN_CODE.sub("", site)


def is_library(path: str) -> bool:
    return any(part in path for part in LIBRARY) or path.startswith("<")


def framework_of(paths: list[str]) -> Framework | None:
    """The registry's framework whose package these frames pass through (the first listed wins:
    the HF Trainer drives accelerate, not the other way round)."""
    packages = {m.group(1) for p in paths for m in [PACKAGE.search(p)] if m}
    return next((fw for fw in REGISTRY if packages & set(fw.packages)), None)


def _loader_paths(loader: dict[str, Any]) -> list[str]:
    return [p for p in [loader.get("site"), *(loader.get("frames") or []), loader.get("origin")] if p]


def user_site(loader: dict[str, Any], workdir: str | None = None) -> str | None:
    """The first frame of the loader's creation that is the user's code: the site itself when
    the user made it, else the line that called into the framework (or the loader it rebuilt)."""
    for path in [loader.get("origin"), loader.get("site"), *(loader.get("frames") or [])]:
        if path and not is_library(path):
            return user_path(path, workdir)
    return user_path(loader.get("site"), workdir)


def workers_knob(loader: dict[str, Any], n: int, settings: list[str], workdir: str | None = None) -> str:
    """How to give the training loader `n` workers (and `settings`), in the terms of whatever
    built it: a known framework's own argument, else the DataLoader line."""
    at = user_site(loader, workdir) or "?"
    fw = framework_of(_loader_paths(loader))
    if fw is not None:
        extra = [fw.settings.get(s, s) for s in settings]
        return (f"the training loader comes through {fw.name}: set " + fw.workers.format(n=n, at=at)
                + (f", and {', '.join(extra)}" if extra else ""))
    site = user_path(loader.get("site"), workdir)
    if site and TORCHVISION_REFERENCE.search(site):
        return (f"torchvision's reference train.py built the training loader ({site}): pass `-j {n}` / "
                f"`--workers {n}`" + (f", and set {', '.join(settings)} there" if settings else ""))
    where = f"the training loader ({site}): " if site else ""
    return f"set {where}DataLoader({', '.join([f'num_workers={n}', *settings])}, ...)"


def device_flag(frames: list[str]) -> str | None:
    """A known framework's way of choosing the CPU, when the traceback passes through it."""
    fw = framework_of(frames)
    return f"{fw.name} asked for a GPU (its default or the setting given): use {fw.device}" if fw else None
