"""Agent command `verify_torch`: does the PyTorch in THIS Python work on this host's GPUs?

Runs with the target environment's interpreter (the controller passes python=<env python>).
Every check compares against a CPU float64 reference, so a wrong result is caught, not only a
crash. Python 3.8+, stdlib + torch only.

Request: {"matmul_size": 256, "expect_gpus": N or null, "memo_s": 0}
(`memo_s` > 0: a passed verification of the unchanged environment that old may answer, see
verify_memo.py; every passed verification is remembered)
Result: {"installed", "python", "torch": {...}, "cpu": {...}, "devices": [...], "problems": [...],
         "warnings": [...], "ok", "seconds"}
"""

import platform
import sys
import time
import warnings

from provision.agent import verify_memo

# fp32 on the GPU vs a float64 reference; TF32 is switched off while checking. Half precision
# (autocast) gets a looser bound: 10-bit (fp16) and 7-bit (bf16) mantissas.
_TOL = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 5e-2}


def _rel_err(got, ref):
    ref = ref.double()
    scale = float(ref.abs().max()) or 1.0
    return float((got.double().cpu() - ref).abs().max()) / scale


def _check(out, name, fn):
    """Run one check; record ok/error instead of raising, so one failure does not hide the rest."""
    t0 = time.time()
    try:
        detail = fn() or {}
        out[name] = dict(detail, ok=detail.get("ok", True), seconds=round(time.time() - t0, 4))
    except Exception as exc:  # a CUDA error message is the diagnosis the user needs
        out[name] = {"ok": False, "error": _first_line(exc)}
    return out[name]


def _first_line(exc):
    lines = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, lines[0] if lines else "")


def _compare(got, ref, dtype_name):
    err = _rel_err(got, ref)
    finite = bool(got.isfinite().all())
    return {"max_rel_err": err, "ok": finite and err <= _TOL[dtype_name], "finite": finite}


def _variant(torch):
    version = torch.__version__
    if "+" in version:
        return version.split("+", 1)[1]
    cuda = getattr(torch.version, "cuda", None)
    if cuda:
        return "cu" + "".join(cuda.split(".")[:2])
    if getattr(torch.version, "hip", None):
        return "rocm"
    return "cpu"


def _arch_support(arch_list, cap):
    """How a GPU of capability cap=(M, N) is served by the build: ('sm_86', 'sass'|'ptx'|None)."""
    major, minor = cap
    sass = []
    ptx = []
    for entry in arch_list:
        kind, _, digits = entry.partition("_")
        if not digits.isdigit() or len(digits) < 2:
            continue
        m, n = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and m == major and n <= minor:
            sass.append((m, n))
        elif kind == "compute" and (m, n) <= (major, minor):
            ptx.append((m, n))
    if sass:
        m, n = max(sass)
        return "sm_%d%d" % (m, n), "sass"
    if ptx:
        m, n = max(ptx)
        return "compute_%d%d" % (m, n), "ptx"
    return None, None


def _cpu_checks(torch, size):
    out = {}
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen)
    b = torch.randn(size, size, generator=gen)
    ref = a.double() @ b.double()
    _check(out, "matmul", lambda: _compare(a @ b, ref, "float32"))

    def conv():
        x = torch.randn(4, 8, 16, 16, generator=gen)
        w = torch.randn(16, 8, 3, 3, generator=gen)
        got = torch.nn.functional.conv2d(x, w, padding=1)
        return _compare(
            got, torch.nn.functional.conv2d(x.double(), w.double(), padding=1), "float32"
        )

    _check(out, "conv", conv)

    def autocast_bf16():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = a @ b
        res = _compare(y, ref, "bfloat16")
        res["dtype"] = str(y.dtype).replace("torch.", "")
        res["ok"] = res["ok"] and y.dtype == torch.bfloat16
        return res

    if hasattr(torch, "autocast"):
        _check(out, "autocast_bf16", autocast_bf16)
    return out


def _gpu_checks(torch, index, size, arch_list, problems, warn):
    dev = torch.device("cuda", index)
    props = torch.cuda.get_device_properties(index)
    cap = (props.major, props.minor)
    info = {
        "index": index,
        "name": props.name,
        "capability": "%d.%d" % cap,
        "memory_bytes": int(props.total_memory),
    }
    served_by, how = _arch_support(arch_list, cap) if arch_list else (None, None)
    info["arch"] = {"served_by": served_by, "how": how}
    label = "GPU %d (%s, sm_%d%d)" % (index, props.name, cap[0], cap[1])
    if arch_list and how is None:
        problems.append(
            "%s: this torch build has no kernels for it (arch list %s); install a build that includes sm_%d%d"
            % (label, " ".join(arch_list), cap[0], cap[1])
        )
    elif how == "ptx":
        warn.append(
            "%s runs JIT-compiled %s PTX (no SASS in this build): slow first use"
            % (label, served_by)
        )

    gen = torch.Generator().manual_seed(index + 1)
    a = torch.randn(size, size, generator=gen)
    b = torch.randn(size, size, generator=gen)
    ref = a.double() @ b.double()
    matmul_tf32 = torch.backends.cuda.matmul.allow_tf32
    cudnn_tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # a true fp32 comparison
    torch.backends.cudnn.allow_tf32 = False
    try:
        with torch.cuda.device(index):

            def matmul():
                got = a.to(dev) @ b.to(dev)
                torch.cuda.synchronize(dev)
                return _compare(got, ref, "float32")

            _check(info, "matmul", matmul)

            def conv():
                x = torch.randn(4, 8, 16, 16, generator=gen)
                w = torch.randn(16, 8, 3, 3, generator=gen)
                expected = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
                got = torch.nn.functional.conv2d(x.to(dev), w.to(dev), padding=1)
                torch.cuda.synchronize(dev)
                res = _compare(got, expected, "float32")
                # cuDNN runs this conv when it is available and enabled (the default)
                res["cudnn"] = bool(
                    torch.backends.cudnn.is_available() and torch.backends.cudnn.enabled
                )
                return res

            _check(info, "conv", conv)

            autocast = {}
            for name, dtype in (("float16", torch.float16), ("bfloat16", torch.bfloat16)):
                if dtype == torch.bfloat16 and cap < (8, 0):
                    autocast[name] = {"ok": True, "skipped": "bf16 needs sm_80+"}
                    continue

                def run(dtype=dtype, name=name):
                    with torch.autocast("cuda", dtype=dtype):
                        y = a.to(dev) @ b.to(dev)
                    torch.cuda.synchronize(dev)
                    res = _compare(y, ref, name)
                    res["dtype"] = str(y.dtype).replace("torch.", "")
                    res["ok"] = res["ok"] and y.dtype == dtype
                    return res

                _check(autocast, name, run)
            info["autocast"] = autocast
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
        torch.backends.cudnn.allow_tf32 = cudnn_tf32
    for name in ("matmul", "conv"):
        res = info.get(name) or {}
        if not res.get("ok"):
            problems.append(
                "%s: %s %s"
                % (
                    label,
                    name,
                    res.get("error")
                    or "result differs from the CPU reference (max rel err %.3g)"
                    % res.get("max_rel_err", float("nan")),
                )
            )
    for name, res in info["autocast"].items():
        if not res.get("ok"):
            problems.append(
                "%s: autocast %s %s" % (label, name, res.get("error") or "wrong result or dtype")
            )
    return info


def verify(request, ctx):
    remembered = verify_memo.recall(request)
    if remembered is not None:
        return remembered
    result = _verify(request, ctx)
    verify_memo.remember(request, result)
    return result


def _verify(request, ctx):
    t0 = time.time()
    size = int(request.get("matmul_size") or 256)
    expect_gpus = request.get("expect_gpus")
    problems = []
    warn = []
    result = {
        "installed": False,
        "python": {"executable": sys.executable, "version": platform.python_version()},
        "torch": None,
        "cpu": {},
        "devices": [],
        "problems": problems,
        "warnings": warn,
    }
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install raising OSError on a missing .so
        problems.append(
            "torch is not importable in %s: %s: %s" % (sys.executable, type(exc).__name__, exc)
        )
        result["ok"] = False
        result["seconds"] = round(time.time() - t0, 3)
        return result
    result["installed"] = True
    cuda = getattr(torch.version, "cuda", None)
    with warnings.catch_warnings(
        record=True
    ) as caught:  # torch says why CUDA is unusable as a warning
        warnings.simplefilter("always")
        available = bool(torch.cuda.is_available())
    cuda_warnings = [str(w.message).strip() for w in caught]
    info = {
        "version": torch.__version__,
        "variant": _variant(torch),
        "cuda": cuda,
        "hip": getattr(torch.version, "hip", None),
        "cudnn": None,
        "nccl": None,
        "arch_list": [],
        "cuda_available": available,
        "device_count": torch.cuda.device_count() if available else 0,
        "cuda_warnings": cuda_warnings,
    }
    result["torch"] = info
    try:
        info["cudnn"] = (
            torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        )
    except Exception as exc:
        warn.append("cuDNN version unavailable: %s" % exc)
    if available:
        try:
            info["arch_list"] = list(torch.cuda.get_arch_list())
        except Exception as exc:
            warn.append("torch.cuda.get_arch_list() failed: %s" % exc)
        try:
            v = torch.cuda.nccl.version()
            info["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except Exception:
            pass  # no NCCL in this build (e.g. Windows/CPU): not a problem for one-host checks

    ctx.progress(step="cpu")
    result["cpu"] = _cpu_checks(torch, size)
    for name, res in result["cpu"].items():
        if not res.get("ok"):
            problems.append(
                "CPU %s: %s"
                % (
                    name,
                    res.get("error")
                    or "wrong result (max rel err %.3g)" % res.get("max_rel_err", float("nan")),
                )
            )

    gpus = int(expect_gpus) if expect_gpus is not None else None
    if gpus:
        if not cuda:
            problems.append(
                "torch %s is a CPU-only build but the host has %d NVIDIA GPU(s)"
                % (torch.__version__, gpus)
            )
        elif not available:
            why = cuda_warnings[0] if cuda_warnings else "no reason given by torch"
            problems.append(
                "torch.cuda.is_available() is False with %d GPU(s) present: %s" % (gpus, why)
            )
        elif info["device_count"] != gpus:
            warn.append(
                "torch sees %d GPU(s), the host has %d (CUDA_VISIBLE_DEVICES?)"
                % (info["device_count"], gpus)
            )
    if available:
        for i in range(info["device_count"]):
            ctx.progress(step="gpu", index=i)
            try:
                result["devices"].append(
                    _gpu_checks(torch, i, size, info["arch_list"], problems, warn)
                )
            except Exception as exc:
                problems.append("GPU %d: %s" % (i, _first_line(exc)))
    result["ok"] = not problems
    result["seconds"] = round(time.time() - t0, 3)
    return result
