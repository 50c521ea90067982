"""The manifest: what a staged dataset must contain, sample by sample, in order.

Built once from the source (on the controller for a local folder or archive, on the host for a
host path or URL) by layouts.py, then sent with the stage request. Its fingerprint says whether a
finished or partial LMDB was built from the same source, which is what makes a rerun either a
no-op (same fingerprint, complete) or a resume (same fingerprint, partial).
"""

import base64
import hashlib
import json
import zlib

PAGE = 4096
# Values larger than about half a page go to their own overflow pages (whole pages each); smaller
# ones share leaf pages. Plus the index record per sample, plus B-tree branch pages and slack.
_OVERFLOW_THRESHOLD = 2000
_PER_SAMPLE_OVERHEAD = 16
_INDEX_RECORD = 49 + 16


class Manifest(object):
    """Samples in order: relative path, size, mtime (whole seconds), label; plus classes."""

    def __init__(self, layout, paths, sizes, mtimes, labels=None, classes=None, source=""):
        if not (len(paths) == len(sizes) == len(mtimes)):
            raise ValueError("manifest columns differ in length")
        if labels is not None and len(labels) != len(paths):
            raise ValueError("manifest labels differ in length from paths")
        self.layout = layout
        self.paths = paths
        self.sizes = sizes
        self.mtimes = mtimes
        self.labels = labels
        self.classes = list(classes or [])
        self.source = source
        self._fingerprint = None
        self._estimates = {}  # start -> estimate_lmdb_bytes(start): asked 3 times per stage

    def __len__(self):
        return len(self.paths)

    @property
    def total_bytes(self):
        return sum(self.sizes)

    def label(self, i):
        return None if self.labels is None else self.labels[i]

    def fingerprint(self):
        """sha256 over layout, classes and every (path, size, mtime, label): the source's identity.

        The source's location is left out on purpose: the same folder moved elsewhere is the same
        dataset.
        """
        if self._fingerprint is None:
            body = json.dumps(
                [self.layout, self.classes, self.paths, self.sizes, self.mtimes, self.labels],
                ensure_ascii=False,
                separators=(",", ":"),
            )
            self._fingerprint = "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()
        return self._fingerprint

    def estimate_lmdb_bytes(self, start=0):
        """Disk the LMDB file will take for samples start.. (an over-estimate, not a guess low)."""
        if start in self._estimates:
            return self._estimates[start]
        total = 0
        for i in range(start, len(self.sizes)):
            size = self.sizes[i]
            if size > _OVERFLOW_THRESHOLD:
                total += ((size + _PER_SAMPLE_OVERHEAD + PAGE - 1) // PAGE) * PAGE
            else:
                total += 2 * (size + _PER_SAMPLE_OVERHEAD)  # leaf pages half full, worst case
            total += 2 * (_INDEX_RECORD + len(self.paths[i].encode("utf-8")))
        estimate = int(total * 1.05) + 256 * 1024  # + meta pages, branch pages, the meta records
        self._estimates[start] = estimate
        return estimate

    # -- wire format ------------------------------------------------------------------------
    def to_wire(self):
        """A JSON-able dict; the columns are zlib-packed (a million paths is tens of MB as JSON)."""
        body = json.dumps(
            {
                "layout": self.layout,
                "classes": self.classes,
                "source": self.source,
                "paths": self.paths,
                "sizes": self.sizes,
                "mtimes": self.mtimes,
                "labels": self.labels,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode("utf-8")
        return {
            # level 1: a quarter of level 6's time (it is on every stage's start), ~20% larger
            "packed": base64.b64encode(zlib.compress(body, 1)).decode("ascii"),
            "count": len(self),
        }

    @classmethod
    def from_wire(cls, wire):
        try:
            body = json.loads(zlib.decompress(base64.b64decode(wire["packed"])).decode("utf-8"))
        except (KeyError, ValueError, zlib.error, TypeError) as exc:
            raise ValueError("bad manifest in the stage request: %s" % exc) from None
        return cls(
            body["layout"],
            body["paths"],
            body["sizes"],
            body["mtimes"],
            body.get("labels"),
            body.get("classes"),
            body.get("source", ""),
        )

    def summary(self):
        return {
            "layout": self.layout,
            "count": len(self),
            "bytes": self.total_bytes,
            "classes": len(self.classes),
            "labelled": self.labels is not None,
            "fingerprint": self.fingerprint(),
        }
