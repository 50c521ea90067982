"""http(s) sources: the host downloads the archive itself, resumably, then stages it.

The download lands beside the dataset as NAME.lmdb.download (its validators in .download.json)
and is removed once the LMDB is complete, so a URL source briefly needs room for both. An
interrupted download continues with a Range request when the server supports it (If-Range makes
a changed file start over). Retries and timeouts are bounded. Proxy variables in the environment
(AutoDL's /etc/network_turbo) apply as they do for any urllib request.
"""

import json
import os
import time

from provision.agent.datasets import lmdb_writer
from provision.agent.datasets.builder import check_space, finished_result, stage_host_path
from provision.agent.datasets.lmdb_writer import DiskFullError, StageError

CHUNK = 1 << 20
RETRIES = 5
_MiB = 1024 * 1024


def _urllib():
    import urllib.error
    import urllib.request

    return urllib.request, urllib.error


def probe(url, timeout):
    """Validators of the remote file: {etag, last_modified, length, ranges} (HEAD; None fields
    when the server does not say)."""
    request_mod, error_mod = _urllib()
    info = {"url": url, "etag": None, "last_modified": None, "length": None, "ranges": False}
    try:
        req = request_mod.Request(url, method="HEAD")
        with request_mod.urlopen(req, timeout=timeout) as resp:
            h = resp.headers
            info["etag"] = h.get("ETag")
            info["last_modified"] = h.get("Last-Modified")
            length = h.get("Content-Length")
            info["length"] = int(length) if length and length.isdigit() else None
            info["ranges"] = (h.get("Accept-Ranges") or "").lower() == "bytes"
    except error_mod.HTTPError as exc:
        if exc.code in (404, 410, 401, 403):
            raise StageError("%s: HTTP %d %s" % (url, exc.code, exc.reason)) from None
    except (error_mod.URLError, OSError) as exc:
        raise StageError("cannot reach %s: %s" % (url, getattr(exc, "reason", exc))) from None
    return info


def source_id(info):
    return json.dumps(
        dict((k, info.get(k)) for k in ("url", "etag", "last_modified", "length")), sort_keys=True
    )


def download(url, target, info, emit, stall, free_margin=64 * _MiB):
    """Download url to target, resuming a previous partial download of the same file."""
    request_mod, error_mod = _urllib()
    side = target + ".json"
    want = source_id(info)
    have = 0
    try:
        with open(side) as fh:
            same = fh.read() == want
        have = os.path.getsize(target) if same else 0
    except OSError:
        pass
    if have == 0:
        with open(side, "w") as fh:
            fh.write(want)
        open(target, "wb").close()
    length = info.get("length")
    if length is not None and have == length:
        return have
    t0 = time.monotonic()
    attempt = 0
    last_emit = 0.0
    while True:
        headers = {}
        if have:
            headers["Range"] = "bytes=%d-" % have
            if info.get("etag") or info.get("last_modified"):
                headers["If-Range"] = info.get("etag") or info.get("last_modified")
        try:
            req = request_mod.Request(url, headers=headers)
            with request_mod.urlopen(req, timeout=max(stall, 10)) as resp:
                if have and resp.status != 206:
                    have = 0  # no ranges (or the file changed): start over
                mode = "ab" if have else "wb"
                with open(target, mode) as out:
                    while True:
                        chunk = resp.read(CHUNK)
                        if not chunk:
                            break
                        out.write(chunk)
                        have += len(chunk)
                        if length is None and have % (64 * _MiB) < CHUNK:
                            st = os.statvfs(os.path.dirname(target))
                            if st.f_bavail * st.f_frsize < free_margin:
                                raise DiskFullError(
                                    28,
                                    "disk nearly full while downloading %s to %s; the partial download is kept for a resume"
                                    % (url, target),
                                )
                        now = time.monotonic()
                        if now - last_emit >= 0.5:
                            last_emit = now
                            rate = have / max(now - t0, 1e-6)
                            emit(
                                phase="download",
                                bytes=have,
                                total_bytes=length,
                                bytes_per_s=round(rate),
                                eta_s=round((length - have) / rate, 1) if length and rate else None,
                            )
            if length is not None and have < length:
                raise OSError("connection closed at %d of %d bytes" % (have, length))
            return have
        except error_mod.HTTPError as exc:
            if exc.code == 416 and length is not None and have == length:
                return have
            if exc.code < 500 or attempt >= RETRIES:
                raise StageError(
                    "downloading %s: HTTP %d %s" % (url, exc.code, exc.reason)
                ) from None
        except DiskFullError:
            raise
        except OSError as exc:
            if getattr(exc, "errno", None) == 28:
                raise DiskFullError(
                    28,
                    "disk full while downloading %s to %s; the partial download is kept: free space and rerun"
                    % (url, target),
                ) from None
            if attempt >= RETRIES:
                raise StageError(
                    "downloading %s failed after %d attempts: %s; rerun to resume at byte %d"
                    % (url, attempt + 1, getattr(exc, "reason", exc), have)
                ) from None
        attempt += 1
        time.sleep(min(2**attempt * 0.25, 8.0))
        if not info.get("ranges"):
            have = 0  # resuming needs ranges; without them each retry starts over


def stage_url(path, source, emit, log, verify, clean, stall):
    url = source.get("url") or ""
    if not (url.startswith("http://") or url.startswith("https://")):
        raise StageError("only http:// and https:// URLs can be downloaded, not %r" % url)
    target = path + ".download"
    if clean:
        for p in (target, target + ".json"):
            try:
                os.remove(p)
            except OSError:
                pass
    info = probe(url, timeout=max(stall, 10))
    sid = source_id(info)
    final = lmdb_writer.describe(path)
    validated = info.get("etag") or info.get("last_modified")
    if (
        final
        and final.get("complete") == "1"
        and final.get("source_id") == sid
        and validated
        and not clean
    ):
        return finished_result(path, final, skipped=True, seconds=0.0)
    if info.get("length"):
        have = os.path.getsize(target) if os.path.exists(target) else 0
        # the archive, then an LMDB about as large while the archive still exists
        check_space(path, info["length"] - have + int(info["length"] * 1.1) + 16 * _MiB)
    t0 = time.monotonic()
    size = download(url, target, info, emit, stall)
    log("downloaded %s (%d bytes) in %.1fs" % (url, size, time.monotonic() - t0))
    result = stage_host_path(
        path,
        {"path": target, "layout": source.get("layout"), "labels": source.get("labels")},
        emit,
        log,
        verify,
        clean,
        stall,
        display=url,
        extra={"downloaded_bytes": size, "download_seconds": round(time.monotonic() - t0, 3)},
        extra_meta={"source_id": sid},
    )
    for p in (target, target + ".json"):
        try:
            os.remove(p)
        except OSError:
            pass
    return result
