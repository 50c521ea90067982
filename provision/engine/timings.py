"""Where a run's time went, per host: every step with its seconds, its share of the run's wall
time, its phases, and what ran in parallel with it. `provision up --json` prints it as
`timings`; the host's report carries it as `timings` and renders it as the "Timings" table.

A host's steps run one after another (the hosts themselves in parallel), so a step's seconds are
its wall time and the steps plus `between_steps_seconds` (connecting, play set-up, waiting for
a lockstep turn) add up to the run's total. What overlaps happens inside a step, and the step
says so: the index probes of an install asked all at once, a stage's reading, sending and
host-side writing.
"""

from __future__ import annotations

from typing import Any


def _results_of(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A task's registered result, or its loop items' results."""
    result = item.get("result") or {}
    items = result.get("results")
    if isinstance(items, list):
        return [r for r in items if isinstance(r, dict)]
    return [result] if isinstance(result, dict) else []


def _install_of(result: dict[str, Any]) -> dict[str, Any]:
    install = result.get("install")
    return install if isinstance(install, dict) else result


def phases_of(item: dict[str, Any]) -> dict[str, float]:
    """Sub-step seconds a step reported (an install's facts/plan/index/pip/verify...)."""
    out: dict[str, float] = {}
    if item.get("action") == "install_torch":
        for result in _results_of(item):
            for name, secs in (_install_of(result).get("seconds") or {}).items():
                if isinstance(secs, (int, float)) and name != "total":
                    out[name] = round(out.get(name, 0.0) + float(secs), 3)
    return out


def parallel_of(item: dict[str, Any]) -> list[str]:
    """What ran at the same time as other work inside this step (short phrases)."""
    action = item.get("action")
    notes: list[str] = []
    for result in _results_of(item):
        if action == "install_torch" and "index" in (_install_of(result).get("seconds") or {}):
            notes.append("index probes: every candidate index asked at once, bounded")
        if action == "stage_dataset":
            data = result.get("dataset") if isinstance(result.get("dataset"), dict) else result
            if data.get("skipped"):
                continue
            line = "source read ∥ send ∥ LMDB writes on the host"
            codec = (data.get("compression") or {}).get("codec")
            if codec == "zstd":
                line += " (zstd chosen by measured pace)"
            notes.append(line)
    return list(dict.fromkeys(notes))


def host_timings(
    results: list[dict[str, Any]],
    total_seconds: float,
    background: dict[str, float] | None = None,
) -> dict[str, dict[str, Any]]:
    """{host: {total_seconds, steps_seconds, between_steps_seconds, steps: [...], background}}
    from a run's results (PlaybookResult.to_json()["results"]) and the run's wall time. Every
    result is a step, in run order, skipped ones included (at ~0 s). `background`: {what:
    seconds} of controller work that ran beside the steps (not in their sum)."""
    by_host: dict[str, list[dict[str, Any]]] = {}
    for item in results:
        by_host.setdefault(str(item.get("host")), []).append(
            {
                "step": item.get("task"),
                "action": item.get("action"),
                "status": item.get("status"),
                "seconds": round(float(item.get("seconds") or 0.0), 3),
                "phases": phases_of(item),
                "parallel": parallel_of(item),
            }
        )
    out: dict[str, dict[str, Any]] = {}
    for host, steps in by_host.items():
        busy = sum(s["seconds"] for s in steps)
        total = max(float(total_seconds), busy)  # rounding can put the steps a hair above
        for s in steps:
            s["share"] = round(s["seconds"] / total, 4) if total > 0 else 0.0
        out[host] = {
            "total_seconds": round(total, 3),
            "steps_seconds": round(busy, 3),
            "between_steps_seconds": round(total - busy, 3),
            "steps": steps,
            "background": dict(background or {}),
        }
    return out


def timing_rows(timings: dict[str, Any] | None) -> list[list[str]]:
    """The report's "Timings" table: step, seconds, share, what ran in parallel; then the time
    between steps and the total (the column sums to it)."""
    if not timings or not timings.get("steps"):
        return []
    rows = []
    for s in timings["steps"]:
        phases = ", ".join(f"{k} {v:.1f}s" for k, v in (s.get("phases") or {}).items() if v >= 0.05)
        step = str(s.get("step") or s.get("action") or "?")
        if s.get("status") == "skipped":
            step += " (skipped)"
        rows.append(
            [
                step + (f" — {phases}" if phases else ""),
                f"{float(s.get('seconds') or 0):.2f}",
                f"{100 * float(s.get('share') or 0):.1f}%",
                "; ".join(s.get("parallel") or []) or "—",
            ]
        )
    total = float(timings.get("total_seconds") or 0)
    between = float(timings.get("between_steps_seconds") or 0)
    share = f"{100 * between / total:.1f}%" if total > 0 else "—"
    rows.append(["between steps (connect, play set-up)", f"{between:.2f}", share, "—"])
    for what, secs in (timings.get("background") or {}).items():
        rows.append(
            [f"in the background: {what}", f"{float(secs):.2f}", "—", "beside the steps above"]
        )
    rows.append(["total", f"{total:.2f}", "100%" if total > 0 else "—", ""])
    return rows
