"""The shape every agent command's reply declares: the one boundary where what a host answers is
checked before any CLI or engine code reads it (issue 29). remote/agent.py applies `check_reply`
to every result and `check_event` to every progress event; a reply that does not fit fails that
host only, with an AgentError naming the host, the command and the field.

The shapes name what the controller reads (provision/cli/, train/, staging/, modules/), with the
types it does arithmetic or string work on; keys the controller never reads pass unchecked. They
follow the agent's own conventions (docs/facts.md): any field may be null, and a section that
failed on the host is `{"error": "..."}`. The language: provision/remote/shape.py.
"""

from __future__ import annotations

from typing import Any

from provision.remote.shape import (
    AnyValue,
    Bool,
    Enum,
    ListOf,
    MapOf,
    Num,
    Obj,
    OneOf,
    Shape,
    ShapeError,
    Str,
)

TEXT = Str()
WORD = Str(256)  # names, versions, kinds, states the host may set freely
TEXTS = ListOf(TEXT)
SIZE = Num(0, 2.0**80)  # bytes, MiB, counts: never negative
COUNT = Num(0, 2.0**63, integer=True)
NUMBER = Num()  # finite, any sign (limits may be -1 for "unlimited")
GPUS_MAX = 1024
VERDICT = Enum("healthy", "degraded", "failing")
RUN_STATE = Enum("starting", "running", "finished", "failed", "stopped")

_DETECTED = Obj(evidence=TEXTS)
OS = Obj(id=WORD, version_id=WORD, pretty_name=TEXT, id_like=TEXT, kernel=WORD, arch=WORD, libc=WORD,
         uptime_s=SIZE, container=Obj(is_container=Bool(), type=WORD, evidence=TEXTS),
         virtualization=Obj(is_vm=Bool(), hypervisor=WORD, evidence=TEXTS),
         provider=Obj(name=WORD, evidence=TEXTS))
CPU = Obj(model=TEXT, vendor=WORD, sockets=SIZE, physical_cores=SIZE, logical_cpus=SIZE, affinity_cpus=SIZE,
          cgroup_quota_cpus=SIZE, cgroup_version=WORD, effective_cpus=SIZE, usable_cpus=SIZE, hypervisor_flag=Bool())
_BYTES = {k: SIZE for k in ("total_bytes", "available_bytes", "free_bytes", "swap_total_bytes", "swap_free_bytes",
                            "buffers_bytes", "cached_bytes", "swap_cached_bytes", "cgroup_limit_bytes",
                            "cgroup_usage_bytes", "effective_total_bytes", "effective_available_bytes")}
MEMORY = Obj(_BYTES, cgroup_version=WORD, shm=Obj(total_bytes=SIZE, free_bytes=SIZE),
             open_files=Obj(soft=NUMBER, hard=NUMBER))
DISKS = Obj(mounts=ListOf(Obj(mountpoint=TEXT, fs_type=WORD, source=TEXT, network=Bool(), read_only=Bool(),
                              total_bytes=SIZE, free_bytes=SIZE, writable=Bool(), device=Obj())),
            block_devices=ListOf(Obj(name=WORD, media=WORD, rotational=Bool(), model=TEXT, size_bytes=SIZE)),
            setup_mounts=ListOf(Obj()))
DATA_DIR = Obj(path=Str(4096), exists=Bool(), mountpoint=TEXT, fs_type=WORD, network=Bool(), media=WORD,
               free_bytes=SIZE, total_bytes=SIZE, writable=Bool(), reason=TEXT, rejected=ListOf(AnyValue()),
               network_dirs=ListOf(AnyValue()))
_ADDRESS = Obj(required=("address", "prefix"), address=WORD, prefix=Num(0, 128, integer=True), scope=WORD)
NETWORK = Obj(
    interfaces=ListOf(Obj(required=("name",), name=WORD, kind=WORD, virtual=Bool(), operstate=WORD,
                          mtu=SIZE, speed_mbps=SIZE, mac=WORD, ipv4=ListOf(_ADDRESS), ipv6=ListOf(_ADDRESS))),
    default_routes=ListOf(Obj(iface=WORD, family=WORD, destination=WORD, gateway=WORD, metric=NUMBER)),
    ib_devices=ListOf(Obj(required=("name",), name=WORD, ports=ListOf(Obj(
        port=OneOf(WORD, NUMBER), state=WORD, rate=WORD, link_layer=WORD, netdev=WORD)))),
    nccl_env=MapOf(TEXT), gpudirect_rdma=MapOf(Bool()))
PYTHON = Obj(agent=Obj(executable=Str(4096), version=WORD, implementation=WORD, prefix=Str(4096),
                       virtualenv=Bool(), conda=Bool()),
             system_pythons=ListOf(Obj(path=Str(4096), real_path=Str(4096), version=WORD)),
             conda=Obj(base=Str(4096), prefixes=ListOf(AnyValue()), envs=ListOf(AnyValue()), channels=ListOf(AnyValue())),
             pip=Obj(index_url=TEXT, index_from=WORD, extra_index_urls=TEXTS, trusted_hosts=TEXTS))
TORCH = Obj(installed=Bool(), version=WORD, cuda=WORD, hip=WORD, cudnn=OneOf(WORD, NUMBER), torchvision=WORD,
            torchaudio=WORD, location=Str(4096), python=Str(4096), reason=TEXT, nvidia_wheels=MapOf(WORD),
            other_envs=ListOf(AnyValue()))
NVIDIA = Obj(driver_version=WORD, cuda_driver_version=WORD, kernel_module_version=WORD, source=WORD,
             gpu_count=SIZE, reason=TEXT, error=TEXT, pci_devices=ListOf(AnyValue()), toolkits=ListOf(Obj(
                 path=Str(4096), version=WORD)))
_GPU_MEMORY = Obj(total_mib=SIZE, used_mib=SIZE, free_mib=SIZE, reserved_mib=SIZE)
_PCIE = Obj(gen_current=SIZE, width_current=SIZE, gen_max=SIZE, width_max=SIZE)
GPU = Obj(index=COUNT, name=TEXT, uuid=WORD, compute_capability=OneOf(WORD, NUMBER), memory=_GPU_MEMORY,
          pcie=_PCIE)
FACTS = Obj(schema=NUMBER, hostname=Str(1024), os=OS, cpu=CPU, memory=MEMORY, disks=DISKS, data_dir=DATA_DIR,
            network=NETWORK, python=PYTHON, torch=TORCH, nvidia=NVIDIA, gpus=ListOf(GPU, GPUS_MAX),
            timings_ms=MapOf(NUMBER), seconds=NUMBER)

_ERRORS = Obj(uncorrected=SIZE, corrected=SIZE)
HEALTH_GPU = Obj(
    index=COUNT, name=TEXT, verdict=VERDICT, reasons=TEXTS, notes=TEXTS, memory=_GPU_MEMORY, pcie=_PCIE,
    ecc=Obj(volatile=_ERRORS, aggregate=_ERRORS, enabled=Bool()),
    retired_pages=Obj(single_bit=SIZE, double_bit=SIZE, pending=OneOf(Bool(), SIZE)),
    remapped_rows=Obj(uncorrectable=SIZE, correctable=SIZE, pending=OneOf(Bool(), SIZE),
                      failure=OneOf(Bool(), SIZE)),
    xid_events=ListOf(Obj(xid=NUMBER)), temperature=Obj(gpu_c=NUMBER), power=Obj(draw_w=NUMBER, limit_w=NUMBER),
    clocks=Obj(sm_mhz=SIZE, max_sm_mhz=SIZE), utilization=Obj(gpu_pct=NUMBER), clock_event_reasons=ListOf(WORD),
    processes=ListOf(AnyValue()))
HEALTH = Obj(verdict=VERDICT, reasons=TEXTS, gpus=ListOf(HEALTH_GPU, GPUS_MAX), nvidia=NVIDIA,
             host=Obj(verdict=VERDICT, reasons=TEXTS, notes=TEXTS, load_average=ListOf(NUMBER, 16),
                      cpu=Obj(effective_cpus=SIZE, usable_cpus=SIZE), memory=Obj(_BYTES),
                      data_dir=Obj(path=Str(4096), free_bytes=SIZE)),
             kernel_log=Obj(unmatched_xid=ListOf(AnyValue())))

RUN = Obj(run_id=WORD, state=RUN_STATE, exit_code=Num(-(2**31), 2**31, integer=True), age_s=NUMBER,
          seconds=NUMBER, created=NUMBER, started=NUMBER, ended=NUMBER, command=ListOf(TEXT), workdir=Str(4096),
          log=Str(4096), rank=COUNT, world_size=COUNT, stop_command=TEXT)
TAIL = ListOf(TEXT, 1 << 20)
WATCHER = Obj(status=WORD, command=TEXT, log=Str(4096), after_s=NUMBER, started=NUMBER)

# command -> the shape of its result's data (an object: Agent.call checks that for every command)
RESULTS: dict[str, Shape] = {
    "ping": Obj(protocol=NUMBER, python=WORD, executable=Str(4096)),
    "facts": FACTS,
    "health": HEALTH,
    "stage": Obj(count=COUNT, checksum=WORD, path=Str(4096), skipped=Bool(), compression=Obj()),
    "dataset_status": Obj(path=Str(4096), count=COUNT, checksum=WORD),
    "stage_codecs": Obj(codecs=ListOf(WORD, 64)),
    "verify_dataset": Obj(count=COUNT, ok=Bool()),
    "verify_torch": Obj(ok=Bool(), version=WORD),
    "bench": Obj(),
    "train_code_plan": Obj(required=("have",), have=MapOf(WORD)),
    "train_start": Obj(run=RUN),
    "train_list": Obj(required=("runs",), runs=ListOf(RUN)),
    "train_status": Obj(required=("run", "tail"), run=RUN, tail=TAIL),
    "train_follow": Obj(offset=COUNT, ended=Bool(), run=RUN),
    "train_stop": Obj(run=RUN),
    "train_summary": Obj(run=RUN, tail=TAIL),
    "train_idle": Obj(watcher=WATCHER, cancelled=Bool(), log=Str(4096)),
    "net_listen": Obj(port=Num(0, 65535, integer=True)),
    "net_probe": Obj(),
    "train_torch": Obj(),
}
# command -> the shape of its progress events (the others' events are read by their own checker:
# a stage's by staging/progress.clean_event)
EVENTS: dict[str, Shape] = {
    "train_follow": Obj(lines=TAIL),
}


def check_reply(command: str, data: Any) -> None:
    """Raise ShapeError when `data` (a command's result) does not fit its declared shape."""
    shape = RESULTS.get(command)
    if shape is None:
        shape = Obj()  # a command added later without a declaration: an object, at least
    shape.check(data, "")


def check_event(command: str, event: Any) -> None:
    shape = EVENTS.get(command)
    if shape is not None:
        shape.check(event, "")


__all__ = ["EVENTS", "RESULTS", "ShapeError", "check_event", "check_reply"]
