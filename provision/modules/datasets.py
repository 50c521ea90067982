"""`stage_dataset`: a dataset to the host's local SSD as LMDB (docs/datasets.md).

With no `src`, stages the embedded sample dataset (generated once on the controller), so
`provision up` works on a fresh machine with no arguments.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provision.errors import HostError, ProvisionError
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.paths import state_dir

SAMPLE_NAME = "provision-sample"
_sample_lock = threading.Lock()  # `up` may generate it in the background while hosts stage


def sample_source() -> str:
    """The embedded sample as an ImageFolder on the controller, generated on first use."""
    # start-up time: a playbook loads every module; the sample generator only when this one runs
    from provision.samples import make_sample_dataset

    root = state_dir() / SAMPLE_NAME
    marker = root / ".complete"
    with _sample_lock:
        if not marker.exists():
            make_sample_dataset(root)
            marker.write_text("ok\n")
    return str(root)


def default_dest(facts: Any) -> str | None:
    """<data_dir>/datasets with the data dir the play's facts chose: a `data_dir` given as an
    extra var (which the facts honour) then holds for staging too, not only host vars."""
    data_dir = facts.get("data_dir") if isinstance(facts, Mapping) else None
    path = data_dir.get("path") if isinstance(data_dir, Mapping) else None
    return f"{str(path).rstrip('/')}/datasets" if path else None


@register
class StageDataset(Module):
    name = "stage_dataset"
    args = {
        "src": Arg("str", default=""),
        "name": Arg("str"),
        "dest": Arg("str"),
        "layout": Arg(
            "str", default="auto", choices=("auto", "imagefolder", "labels", "webdataset", "files")
        ),
        "labels": Arg("str"),
        "verify": Arg("bool", default=False),
        "clean": Arg("bool", default=False),
    }
    supports_check_mode = False

    def run(self, ctx: TaskContext) -> ModuleResult:
        # start-up time: a playbook loads every module; the staging stack only when this one runs
        from provision.staging.stage import stage_dataset

        src = ctx.args.get("src") or sample_source()
        name = ctx.args.get("name") or (None if ctx.args.get("src") else SAMPLE_NAME)
        dest = ctx.args.get("dest") or default_dest(ctx.facts)

        def on_event(event: dict[str, Any]) -> None:
            if ctx.on_progress and event.get("samples") is not None:
                ctx.on_progress(f"stage {event.get('samples')} samples")

        try:
            result = stage_dataset(
                ctx.connection,
                ctx.agent,
                src,
                name=name,
                dest=dest,
                layout=ctx.args["layout"],
                labels=ctx.args.get("labels"),
                verify=ctx.args["verify"],
                clean=ctx.args["clean"],
                on_event=on_event,
            )
        except HostError as exc:
            raise ModuleFailure(f"staging {src} failed: {exc.detail}") from None
        except ProvisionError as exc:
            raise ModuleFailure(f"staging {src} failed: {exc}") from None
        changed = not result.get("skipped")
        msg = f"{result.get('path')}: {result.get('count')} samples" + (
            " (already up to date)" if not changed else f" in {result.get('seconds', 0):.1f}s"
        )
        dataset = {
            k: result.get(k) for k in ("path", "count", "bytes", "seconds", "checksum", "network")
        }
        # staged without a name: the LMDB's own (<data>/datasets/NAME.lmdb), never "?" in reports
        dataset["name"] = (
            name or result.get("name") or Path(str(result.get("path") or "")).name.removesuffix(".lmdb")
        ) or None
        dataset["format"] = "lmdb"
        # the stage result's own `skipped` (nothing to do) is not Ansible's skipped (when: false)
        details = {k: v for k, v in result.items() if k != "skipped"}
        return ModuleResult(
            changed=changed,
            msg=msg,
            data={"dataset": dataset, "up_to_date": not changed, **details},
        )
