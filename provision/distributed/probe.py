"""Check one candidate network for real: the master listens, every other host connects.

Each host's agent runs one bounded command (provision/agent/net_probe.py). The master's
listener reports its port as soon as it is bound, the other hosts probe it in parallel (one
thread per host, each on its own connection), and the controller then closes the listener's
stdin so it ends at once; its own deadline ends it in any case.
"""

from __future__ import annotations

import secrets
import threading
from typing import TYPE_CHECKING, Any

from provision.errors import ProvisionError

if TYPE_CHECKING:
    from provision.distributed.fabric import Candidate
    from provision.remote.agent import Agent

LISTEN_READY_S = 120.0  # the agent may have to be uploaded first
CALL_SLACK_S = 60.0  # interpreter start and agent upload on top of the probe's own timeout


def probe_candidate(
    agents: dict[str, Agent], cand: Candidate, order: list[str], *, port: int | None, timeout_s: float
) -> tuple[int, list[dict[str, Any]], str | None]:
    """(port, probes, None) when every host reached the master on `cand`; else (port or 0,
    probes, what went wrong)."""
    master = cand.master_host
    others = [n for n in order if n != master]
    token = secrets.token_hex(8)
    hold_s = LISTEN_READY_S + timeout_s * 2 + CALL_SLACK_S
    ready = threading.Event()
    done = threading.Event()
    box: dict[str, Any] = {}

    def on_event(event: dict[str, Any]) -> None:
        if event.get("listening"):
            box["port"] = int(event["port"])
            ready.set()

    class StdinUntilDone:
        """Sends nothing and ends (closing the listener's stdin) once the probes are done.
        Iterable afresh: Agent.call sends the payload again after uploading the agent."""

        def __iter__(self) -> Any:
            done.wait(hold_s)  # bounded: the listener's own deadline is hold_s too
            return iter(())

    def run_listener() -> None:
        try:
            box["listen"] = agents[master].call(
                "net_listen",
                {"port": port, "hold_s": hold_s, "expect": len(others), "token": token,
                 "until_stdin_closes": True},
                payload=StdinUntilDone(), on_event=on_event, timeout=hold_s + CALL_SLACK_S,
            )  # fmt: skip
        except ProvisionError as exc:
            box["listen_error"] = getattr(exc, "detail", str(exc))
        except Exception as exc:  # noqa: BLE001 - reported as this candidate's failure
            box["listen_error"] = f"{type(exc).__name__}: {exc}"
        finally:
            ready.set()

    listener = threading.Thread(target=run_listener, daemon=True, name=f"fabric-listen-{master}")
    listener.start()
    try:
        ready.wait(LISTEN_READY_S + CALL_SLACK_S)
        if "port" not in box:
            return port or 0, [], f"{master} could not listen: {box.get('listen_error') or 'no answer'}"
        chosen = box["port"]
        probes = _probe_all(agents, others, master, cand, chosen, token, timeout_s)
    finally:
        done.set()
        listener.join(hold_s + CALL_SLACK_S * 2)
    bad = [p for p in probes if not p["ok"]]
    if not others:
        return chosen, probes, None
    if bad:
        return chosen, probes, "; ".join(f"{p['from']} -> {p['addr']}:{p['port']}: {p['error']}" for p in bad)
    return chosen, probes, None


def _probe_all(agents: dict[str, Agent], others: list[str], master: str, cand: Candidate, port: int,
               token: str, timeout_s: float) -> list[dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}

    def probe(name: str) -> None:
        row: dict[str, Any] = {"from": name, "to": master, "addr": cand.master_addr, "port": port,
                               "ok": False, "ms": None, "error": None, "source": None}  # fmt: skip
        try:
            reply = agents[name].call(
                "net_probe", {"targets": [{"addr": cand.master_addr, "port": port}], "timeout_s": timeout_s,
                              "token": token},
                timeout=timeout_s + CALL_SLACK_S,
            )  # fmt: skip
            got = (reply.get("results") or [{}])[0]
            row.update(ok=bool(got.get("ok")), ms=got.get("ms"), error=got.get("error"), source=got.get("source"))
        except ProvisionError as exc:
            row["error"] = getattr(exc, "detail", str(exc))
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"{type(exc).__name__}: {exc}"
        results[name] = row

    threads = [threading.Thread(target=probe, args=(n,), daemon=True, name=f"fabric-probe-{n}") for n in others]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s + CALL_SLACK_S * 2)
    return [results.get(n) or {"from": n, "to": master, "addr": cand.master_addr, "port": port, "ok": False,
                               "ms": None, "error": "probe did not finish", "source": None} for n in others]  # fmt: skip
