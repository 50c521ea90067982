"""Bounded TCP probes between hosts, for choosing where torch.distributed meets (host side).

`listen` (on the would-be master): bind a free port on every address (the given one, else one
from a range, else any), report it as a progress event at once, then answer each connection
with one line naming the probe's token, until `expect` peers came, stdin closes (the controller
is done) or `hold_s` passes -- whichever is first; it never outlives its deadline.
`connect` (on every other host): open a TCP connection to each addr:port with a timeout, read
the token line (so a different service on that port does not count) and report ok/ms/error.
"""

import os
import random
import select
import socket
import time

MAX_HOLD_S = 600.0
MAX_TIMEOUT_S = 60.0
MAX_TARGETS = 16
RANGE_TRIES = 40


def _banner(token):
    return ("provision-fabric %s\n" % token).encode()


def _bind(port, port_range):
    """A listening socket on all addresses (as torch's TCPStore binds), IPv6 dual-stack where
    the host has it."""
    families = [socket.AF_INET6, socket.AF_INET] if socket.has_ipv6 else [socket.AF_INET]

    def attempt(number):
        last = None
        for family in families:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                sock.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", number))
                sock.listen(64)
                return sock, None
            except OSError as exc:
                sock.close()
                last = exc
                if getattr(exc, "errno", None) == 98:  # EADDRINUSE: the other family won't help
                    break
        return None, last

    if port:
        sock, error = attempt(int(port))
        if sock is None:
            raise RuntimeError(
                "port %s is not free on this host (%s): pick another with --master HOST:PORT, "
                "or leave the port out to let provision choose one" % (port, error)
            )
        return sock
    low, high = port_range or (29500, 29999)
    numbers = list(range(int(low), int(high) + 1))
    random.shuffle(numbers)
    for number in numbers[:RANGE_TRIES]:
        sock, _ = attempt(number)
        if sock is not None:
            return sock
    sock, error = attempt(0)
    if sock is None:
        raise RuntimeError("could not listen on any TCP port: %s" % error)
    return sock


def listen(request, ctx):
    hold_s = min(float(request.get("hold_s") or 30), MAX_HOLD_S)
    expect = int(request.get("expect") or 0)
    token = str(request.get("token") or "")
    sock = _bind(request.get("port"), request.get("port_range"))
    port = sock.getsockname()[1]
    started = time.monotonic()
    deadline = started + hold_s
    ctx.progress(listening=True, port=port)
    watched = [sock]
    stdin_fd = None
    if request.get("until_stdin_closes"):
        try:
            stdin_fd = ctx.stdin.fileno()
            watched.append(stdin_fd)
        except (AttributeError, OSError, ValueError):
            stdin_fd = None
    accepted = []
    why = "deadline"
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if expect and len(accepted) >= expect:
                why = "all peers came"
                break
            ready, _, _ = select.select(watched, [], [], min(left, 1.0))
            if stdin_fd is not None and stdin_fd in ready and not os.read(stdin_fd, 4096):
                why = "controller done"
                break
            if sock in ready:
                conn, peer = sock.accept()
                try:
                    conn.settimeout(2.0)
                    conn.sendall(_banner(token))
                    try:
                        conn.recv(64)  # the peer closes first: no TIME_WAIT left on this port
                    except OSError:
                        pass
                finally:
                    conn.close()
                address = peer[0]
                if address.startswith("::ffff:"):
                    address = address[7:]
                accepted.append(address)
    finally:
        sock.close()
    return {
        "port": port,
        "accepted": accepted,
        "ended": why,
        "held_s": round(time.monotonic() - started, 3),
    }


def _connect_one(addr, port, timeout, token):
    started = time.monotonic()
    result = {"addr": addr, "port": port, "ok": False, "ms": None, "error": None, "source": None}
    try:
        sock = socket.create_connection((addr, port), timeout=timeout)
    except socket.timeout:
        result["error"] = "no answer within %gs (a firewall drops it, or no route)" % timeout
        return result
    except ConnectionRefusedError:
        result["error"] = "connection refused (nothing listens there: wrong address or port closed)"
        return result
    except OSError as exc:
        result["error"] = exc.strerror or str(exc)
        return result
    result["ms"] = round((time.monotonic() - started) * 1000, 2)
    try:
        result["source"] = sock.getsockname()[0]
        sock.settimeout(max(0.1, timeout - (time.monotonic() - started)))
        data = b""
        while b"\n" not in data and len(data) < 256:
            chunk = sock.recv(256)
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        data = b""
        result["error"] = "connected, but no answer (%s)" % (exc.strerror or exc)
    finally:
        sock.close()
    if data.strip() == _banner(token).strip():
        result["ok"] = True
    elif result["error"] is None:
        result["error"] = "something else answers on %s:%s (not the probe listener)" % (addr, port)
    return result


def connect(request, ctx):
    timeout = min(float(request.get("timeout_s") or 5), MAX_TIMEOUT_S)
    token = str(request.get("token") or "")
    targets = list(request.get("targets") or [])[:MAX_TARGETS]
    results = []
    for target in targets:
        results.append(_connect_one(str(target["addr"]), int(target["port"]), timeout, token))
    return {"results": results}
