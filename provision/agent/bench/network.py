"""Latency and download throughput to the package index or mirror the host will install from.

Everything is bounded: a few TCP connects with a timeout each, and one download that stops at
a byte limit or a time limit, whichever comes first. The download goes through urllib, so it
takes the same proxy (http_proxy/https_proxy, e.g. a platform's network_turbo) pip would;
the TCP connects go straight to the server. Credentials in URLs never reach the output.
"""

import socket
import time
from urllib.parse import urlsplit, urlunsplit
from urllib.request import Request, getproxies, proxy_bypass, urlopen

from provision.agent.bench.common import Skip, sig
from provision.agent.bench.timing import median


def redact(url):
    """The URL with any user:password@ replaced, safe to log and report."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, "***@" + host, parts.path, parts.query, parts.fragment))


def _connect_times(host, port, count, timeout):
    times, errors = [], []
    for _ in range(count):
        start = time.perf_counter()
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
            times.append(time.perf_counter() - start)
            sock.close()
        except OSError as exc:
            errors.append(str(exc))
    return times, errors


def _proxy_for(url):
    scheme = urlsplit(url).scheme
    host = urlsplit(url).hostname or ""
    proxies = getproxies()
    if scheme in proxies and not proxy_bypass(host):
        return redact(proxies[scheme])
    return None


def probe(url, max_bytes, max_seconds, connects=3, timeout=5.0):
    """TCP connect latency, time to first byte and throughput for one URL, all bounded."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("network url %r: expected http(s)://host/..." % redact(url))
    port = parts.port or (443 if parts.scheme == "https" else 80)
    out = {"url": redact(url), "proxy": _proxy_for(url)}
    start = time.perf_counter()
    try:
        socket.getaddrinfo(parts.hostname, port)
        out["dns_ms"] = round((time.perf_counter() - start) * 1e3, 3)
    except OSError as exc:
        out["dns_error"] = str(exc)
    times, errors = _connect_times(parts.hostname, port, connects, timeout)
    out["connect_ms"] = round(median(times) * 1e3, 3) if times else None
    if errors:
        out["connect_errors"] = errors[:3]
    chunk = 1 << 16
    total = 0
    began = time.perf_counter()
    try:
        response = urlopen(Request(url, headers={"User-Agent": "provision-bench"}), timeout=timeout)
        try:
            out["http_status"] = response.getcode()
            first = response.read(chunk)
            out["ttfb_ms"] = round((time.perf_counter() - began) * 1e3, 3)
            total = len(first)
            body_start = time.perf_counter()
            while first and total < max_bytes and time.perf_counter() - began < max_seconds:
                data = response.read(min(chunk, max_bytes - total))
                if not data:
                    break
                total += len(data)
            elapsed = time.perf_counter() - body_start
        finally:
            response.close()
    except Exception as exc:  # HTTP errors, timeouts, TLS failures: reported, not fatal
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
        out["status"] = "error"
        return out
    out["bytes"] = total
    out["seconds"] = round(time.perf_counter() - began, 3)
    # Throughput over the body after the first chunk, so the request latency is not in it.
    body = total - min(total, chunk)
    out["mb_s"] = sig(body / elapsed / 1e6) if body > 0 and elapsed > 0 else None
    out["complete"] = total < max_bytes and time.perf_counter() - began < max_seconds
    if body < (1 << 20):
        out["note"] = (
            "under 1 MiB downloaded: throughput is dominated by latency; give a larger file URL"
        )
    out["status"] = "ok"
    return out


def measure(request, quick):
    net = request.get("network") or {}
    urls = list(net.get("urls") or [])
    if net.get("url"):
        urls.insert(0, net["url"])
    if not urls and request.get("index_url"):
        urls.append(request["index_url"])
    if not urls:
        raise Skip("no index or mirror URL given (request network.url)")
    max_bytes = int(net.get("max_bytes") or ((8 if quick else 64) << 20))
    max_seconds = float(net.get("max_seconds") or (3.0 if quick else 10.0))
    timeout = float(net.get("timeout_s") or 5.0)
    results = [probe(u, max_bytes, max_seconds, 3 if quick else 5, timeout) for u in urls]
    out = {"max_bytes": max_bytes, "max_seconds": max_seconds, "targets": results}
    ok = [r for r in results if r.get("mb_s")]
    if ok:
        best = max(ok, key=lambda r: r["mb_s"])
        out["best_mb_s"] = best["mb_s"]
        out["best_url"] = best["url"]
    if not any(r.get("status") == "ok" for r in results):
        out["status"] = "error"
        out["reason"] = "; ".join("%s: %s" % (r["url"], r.get("error")) for r in results)
    return out
