"""All-reduce bus bandwidth: across this host's GPUs (NCCL) and across hosts (gloo or NCCL).

Each rank runs in its own child process (`python -c ... worker_main`), so a stuck collective
or rendezvous is ended by killing the child at a deadline rather than hanging the agent.
Across hosts every host runs ONE rank (on GPU 0 when it has GPUs): the figure is the
inter-node link. Rendezvous is torch.distributed's TCP store on the first host
(master_addr:master_port). Bandwidth follows nccl-tests: algbw = bytes / time and, for
all-reduce, busbw = algbw * 2(n-1)/n, the per-link traffic comparable to the link's speed.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from provision.agent.bench.common import Skip, cuda_available, import_torch, sig

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def busbw(algbw, n):
    """nccl-tests' all-reduce bus bandwidth: each rank sends and receives 2(n-1)/n of the data."""
    if n < 1:
        raise ValueError("world size must be at least 1, got %r" % n)
    return algbw * 2.0 * (n - 1) / n


def algbw(nbytes, seconds):
    return nbytes / seconds


# -- the rank process --------------------------------------------------------------------------


def worker_main():
    """Entry point of a rank process: config JSON on stdin, result JSON on the last stdout line."""
    cfg = json.loads(sys.stdin.readline())
    result = run_rank(cfg)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def run_rank(cfg):
    import datetime

    import torch
    import torch.distributed as dist

    backend = cfg["backend"]
    device = "cpu"
    if backend == "nccl":
        torch.cuda.set_device(cfg.get("local_device", 0))
        device = "cuda:%d" % cfg.get("local_device", 0)
    dist.init_process_group(
        backend,
        init_method="tcp://%s:%d" % (_bracket(cfg["master_addr"]), int(cfg["master_port"])),
        rank=int(cfg["rank"]),
        world_size=int(cfg["world_size"]),
        timeout=datetime.timedelta(seconds=float(cfg["timeout_s"])),
    )
    try:
        world = dist.get_world_size()
        rows = []
        for size_mb in cfg["sizes_mb"]:
            nbytes = int(size_mb * (1 << 20)) // 4 * 4
            tensor = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
            seconds = _time_allreduce(
                torch, dist, tensor, device, cfg["iters"], cfg.get("warmup", 2)
            )
            # The slowest rank decides how long a collective takes.
            agreed = torch.tensor([seconds], dtype=torch.float64, device=device)
            dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
            seconds = float(agreed.item())
            alg = algbw(nbytes, seconds)
            rows.append(
                {
                    "size_mb": size_mb,
                    "time_ms": round(seconds * 1e3, 4),
                    "algbw_gbs": sig(alg / 1e9),
                    "busbw_gbs": sig(busbw(alg, world) / 1e9),
                }
            )
            del tensor
        return {"rank": dist.get_rank(), "world_size": world, "backend": backend, "sizes": rows}
    finally:
        dist.destroy_process_group()


def _time_allreduce(torch, dist, tensor, device, iters, warmup):
    """Median seconds per all-reduce: synchronized per iteration, after warm-up."""
    # lazy: the agent starts per call on the host; loaded only by the all-reduce section
    from provision.agent.bench.timing import median

    on_gpu = device.startswith("cuda")
    for _ in range(warmup):
        dist.all_reduce(tensor)
    if on_gpu:
        torch.cuda.synchronize()
    dist.barrier()
    times = []
    for _ in range(iters):
        if on_gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dist.all_reduce(tensor)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            dist.all_reduce(tensor)  # gloo's all_reduce returns when it is done
            times.append(time.perf_counter() - t0)
    return median(times)


def _bracket(addr):
    return "[%s]" % addr if ":" in addr and not addr.startswith("[") else addr


# -- launching ranks ---------------------------------------------------------------------------


def _agent_root():
    """The sys.path entry holding the `provision` package: a folder, or the agent's zipapp."""
    import provision

    return os.path.dirname(os.path.dirname(os.path.abspath(provision.__file__)))


def free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def interface_for(addr):
    """(interface name, local IPv4) this host uses to reach `addr`, or (None, None).

    gloo and NCCL pick an interface from the hostname by default, which on many images
    resolves to 127.0.1.1 and breaks cross-host rendezvous; the route to the master is right.
    """
    try:
        import fcntl
        import struct

        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.connect((addr, 9))  # UDP connect sends nothing; it only picks the route
        local_ip = probe.getsockname()[0]
        probe.close()
        for _index, name in socket.if_nameindex():
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                packed = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
                if socket.inet_ntoa(packed[20:24]) == local_ip:
                    return name, local_ip
            except OSError:
                continue  # no IPv4 address on this interface
            finally:
                sock.close()
        return None, local_ip
    except (OSError, ImportError):
        return None, None


def launch(configs, deadline_s, env_extra=None):
    """Run one rank process per config; [(result or None, error or None)] in config order."""
    code = (
        "import sys; sys.path.insert(0, %r); "
        "from provision.agent.bench.distributed import worker_main; worker_main()" % _agent_root()
    )
    env = dict(os.environ)
    env.update(env_extra or {})
    procs = []
    for cfg in configs:
        out_file, err_file = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=out_file,
            stderr=err_file,
            env=env,
            start_new_session=True,  # its own process group, so a kill takes its children too
        )
        proc.stdin.write((json.dumps(cfg) + "\n").encode())
        proc.stdin.close()
        procs.append((proc, out_file, err_file))
    end = time.monotonic() + deadline_s
    results = []
    for proc, out_file, err_file in procs:
        try:
            proc.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill(proc)
        results.append(_outcome(proc, out_file, err_file, deadline_s))
        out_file.close()
        err_file.close()
    return results


def _outcome(proc, out_file, err_file, deadline_s):
    if proc.returncode == -signal.SIGKILL:
        return (
            None,
            "rank did not finish within %.0f s (peer missing or network blocked?)" % deadline_s,
        )
    out_file.seek(0)
    lines = [
        x for x in out_file.read().decode("utf-8", "replace").splitlines() if x.startswith("{")
    ]
    if proc.returncode == 0 and lines:
        return json.loads(lines[-1]), None
    err_file.seek(0)
    tail = err_file.read().decode("utf-8", "replace").strip().splitlines()
    reason = next((x for x in reversed(tail) if "Error" in x), tail[-1] if tail else "")
    return None, "rank exited %s: %s" % (proc.returncode, reason.strip())


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()


# -- the section -------------------------------------------------------------------------------


def measure(request, quick):
    torch = import_torch()
    try:
        import torch.distributed as dist

        if not dist.is_available():
            raise Skip("this torch build has no torch.distributed")
    except ImportError:
        raise Skip("this torch build has no torch.distributed") from None
    out = {}
    gpus = torch.cuda.device_count() if cuda_available(torch) else 0
    if gpus >= 2:
        out["local"] = _local(torch, request, quick, gpus)
    else:
        out["local"] = {
            "status": "skipped",
            "reason": "%d GPU%s on this host: intra-host all-reduce needs 2+"
            % (gpus, "" if gpus == 1 else "s"),
        }
    spec = request.get("allreduce")
    if spec:
        out["multi_host"] = _multi_host(torch, spec, quick, gpus)
    else:
        out["multi_host"] = {
            "status": "skipped",
            "reason": "no multi-host all-reduce requested (allreduce)",
        }
    if all(part["status"] == "skipped" for part in out.values()):
        raise Skip("%s; %s" % (out["local"]["reason"], out["multi_host"]["reason"]))
    failed = [
        "%s: %s" % (name, part["reason"]) for name, part in out.items() if part["status"] == "error"
    ]
    if failed:
        out["status"] = "error"
        out["reason"] = "; ".join(failed)
    return out


def _interconnect(torch, request, gpus):
    """NVLink vs PCIe between this host's GPUs: request facts first, else NVML and P2P access."""
    # lazy: pynvml only where the all-reduce samples the GPUs
    from provision.agent.bench import nvml

    fact = request.get("interconnect")
    links = [nvml.active_nvlinks(nvml.handle_for_cuda(torch, i)) for i in range(gpus)]
    p2p = all(torch.cuda.can_device_access_peer(0, j) for j in range(1, gpus))
    if fact:
        kind = fact
    elif any(links):
        kind = "nvlink"
    elif all(v is not None for v in links):
        kind = "pcie"
    else:
        kind = None
    return {
        "kind": kind,
        "nvlink_active": links,
        "p2p": p2p,
        "source": "request" if fact else "nvml",
    }


def _local(torch, request, quick, gpus):
    sizes = [16, 256] if quick else [1, 16, 64, 256, 1024]
    timeout_s = 60.0 if quick else 120.0
    port = free_port()
    configs = [
        {
            "backend": "nccl",
            "master_addr": "127.0.0.1",
            "master_port": port,
            "rank": r,
            "world_size": gpus,
            "local_device": r,
            "sizes_mb": sizes,
            "iters": 5 if quick else 20,
            "timeout_s": timeout_s,
        }
        for r in range(gpus)
    ]
    results = launch(configs, timeout_s * 2)
    out = {"backend": "nccl", "gpus": gpus, "interconnect": _interconnect(torch, request, gpus)}
    first, error = results[0]
    errors = [e for _, e in results if e]
    if first is None or errors:
        out.update(status="error", reason="; ".join(errors))
        return out
    out.update(
        status="ok", sizes=first["sizes"], busbw_gbs=max(r["busbw_gbs"] for r in first["sizes"])
    )
    kind = out["interconnect"]["kind"]
    if kind == "nvlink":
        out["note"] = "NVLink between GPUs: bus bandwidth of hundreds of GB/s is expected"
    elif kind == "pcie":
        out["note"] = "no active NVLink: all-reduce goes over PCIe%s, a few to tens of GB/s" % (
            "" if out["interconnect"]["p2p"] else " through host memory (no P2P access)"
        )
    return out


def _multi_host(torch, spec, quick, gpus):
    missing = [
        k for k in ("master_addr", "master_port", "world_size", "rank") if spec.get(k) in (None, "")
    ]
    if missing:
        raise ValueError(
            "request allreduce is missing %s: give master_addr/master_port of the first host, "
            "world_size (number of hosts) and this host's rank" % ", ".join(missing)
        )
    world = int(spec["world_size"])
    rank = int(spec["rank"])
    if world < 2 or not 0 <= rank < world:
        raise ValueError(
            "request allreduce: rank %d / world_size %d: need world_size >= 2, 0 <= rank < world_size"
            % (rank, world)
        )
    backend = spec.get("backend") or ("nccl" if gpus else "gloo")
    if backend == "nccl" and not gpus:
        raise ValueError("request allreduce.backend=nccl but this host has no CUDA GPU: use gloo")
    timeout_s = float(spec.get("timeout_s") or (60 if quick else 120))
    sizes = spec.get("sizes_mb") or ([1, 16] if quick else [1, 16, 64, 256])
    addr = str(spec["master_addr"])
    env = {}
    iface, local_ip = (None, None)
    var = "NCCL_SOCKET_IFNAME" if backend == "nccl" else "GLOO_SOCKET_IFNAME"
    chosen = spec.get("env") or {}  # the controller's fabric choice (provision/distributed/fabric.py)
    if chosen:
        env.update({str(k): str(v) for k, v in chosen.items() if k not in ("MASTER_ADDR", "MASTER_PORT")})
        iface = env.get(var)
        if ":" not in addr and addr not in LOOPBACK:
            local_ip = interface_for(addr)[1]
    elif addr in LOOPBACK:
        iface = "lo"
    elif ":" not in addr:
        iface, local_ip = interface_for(addr)
    if iface and not chosen and not os.environ.get(var):
        env[var] = iface
    cfg = {
        "backend": backend,
        "master_addr": addr,
        "master_port": int(spec["master_port"]),
        "rank": rank,
        "world_size": world,
        "local_device": 0,
        "sizes_mb": sizes,
        "iters": int(spec.get("iters") or (5 if quick else 20)),
        "timeout_s": timeout_s,
    }
    ((result, error),) = launch([cfg], timeout_s * 2 + 30, env)
    out = {
        "backend": backend,
        "world_size": world,
        "rank": rank,
        "master": "%s:%s" % (addr, spec["master_port"]),
        "interface": env.get(var) or os.environ.get(var) or iface,
        "local_ip": local_ip,
        "fabric_env": {k: env[k] for k in sorted(env)},
    }
    if error:
        hint = (
            " - check that rank 0 runs on %s, that port %s is reachable from every host, and that "
            "all hosts use the same world_size" % (addr, spec["master_port"])
        )
        out.update(status="error", reason=error + hint)
        return out
    out.update(
        status="ok", sizes=result["sizes"], busbw_gbs=max(r["busbw_gbs"] for r in result["sizes"])
    )
    return out
