"""Read dataset sources: a folder, a tar (any compression) or zip archive, WebDataset shards.

Each source lists its files as `Entry`s (checked by safety.py) and later yields the bytes of a
chosen list of entries in order, reading each file once. Used on the controller (to build the
manifest and the sample stream) and on the host (for host paths and downloads), so both sides agree
on the samples, their order and their labels.

Order: sorted by path components for folders; member order for archives (a compressed tar
cannot be read out of order without decompressing it again).
"""

import calendar
import os
import stat
import tarfile
import zipfile

from provision.agent.datasets import layouts
from provision.agent.datasets.layouts import Entry, LayoutError
from provision.agent.datasets.manifest import Manifest
from provision.agent.datasets.safety import (
    UnsafePathError,
    check_utf8,
    inside,
    link_target,
    member_relpath,
)

_SKIP_NAMES = ("__MACOSX", "Thumbs.db", "desktop.ini")
_KEEP_WDS_LABEL_MAX = 64 * 1024


class SourceError(ValueError):
    """The source is missing, unreadable, or changed while being read."""

    kind = "source"


def _skipped_name(part):
    return part.startswith(".") or part in _SKIP_NAMES


def iter_tar(tf):
    """Members of an open tarfile, without tarfile's ever-growing member list (a stream of a
    million members would otherwise keep a million TarInfo objects)."""
    while True:
        member = tf.next()
        if member is None:
            return
        tf.members = []
        yield member


def _wanted(relpath, labels_hint):
    base = relpath.rsplit("/", 1)[-1].lower()
    if base in layouts.LABEL_FILE_NAMES:
        return True
    if labels_hint and (relpath == labels_hint or relpath.endswith("/" + labels_hint)):
        return True
    return layouts.wds_split(relpath)[1].lower() in layouts.WDS_LABEL_EXTS


def _read_file(path, limit):
    """Up to `limit` bytes of a file: os.read, without a file object (2x faster for small files)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, limit)
        if len(data) < limit and data:
            parts = [data]
            got = len(data)
            while got < limit:
                more = os.read(fd, limit - got)
                if not more:
                    break
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        return data
    finally:
        os.close(fd)


class FolderSource(object):
    kind = "folder"

    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.where = self.root

    def list(self, labels_hint=None):
        """Every regular file below the root, sorted; refuses symlinks that leave the root."""
        root_real = os.path.realpath(self.root)
        entries, warnings, odd = [], [], []
        # each folder carries the real paths above it: a link back up the tree is a loop
        stack = [("", self.root, (root_real,))]
        while stack:
            rel_dir, abs_dir, ancestors = stack.pop()
            try:
                items = list(os.scandir(abs_dir))
            except OSError as exc:
                raise SourceError("cannot list %s: %s" % (abs_dir, exc.strerror or exc)) from None
            for item in items:
                name = item.name
                if name[0] == "." or name in _SKIP_NAMES:  # _skipped_name, inlined: per file
                    continue
                rel = rel_dir + name
                if not rel.isascii():  # ASCII is valid UTF-8: most names skip the encode
                    check_utf8(rel, self.where)
                path = item.path
                if item.is_symlink():
                    if not inside(root_real, path):
                        raise UnsafePathError(
                            "%s is a symlink to %s, outside the source folder %s; refusing to "
                            "follow it. Copy the file into the folder or remove the link."
                            % (path, os.path.realpath(path), self.root)
                        )
                    if not os.path.exists(path):
                        warnings.append("%s is a broken symlink; left out" % path)
                        continue
                try:
                    st = os.stat(path)
                except OSError as exc:
                    raise SourceError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
                if stat.S_ISDIR(st.st_mode):
                    real = os.path.realpath(path)
                    if real in ancestors:
                        warnings.append("%s links back to a folder above it; not followed" % path)
                        continue
                    stack.append((rel + "/", path, ancestors + (real,)))
                elif stat.S_ISREG(st.st_mode):
                    entries.append(Entry(rel, st.st_size, int(st.st_mtime), path))
                else:
                    odd.append(rel)
        if odd:
            warnings.append(
                "%d special files (fifos, sockets, devices) left out (first: %r)"
                % (len(odd), odd[0])
            )
        entries.sort(key=lambda e: layouts.sort_key(e.relpath))
        return entries, warnings

    def read_small(self, entry):
        with open(entry.ref, "rb") as fh:
            return fh.read()

    def iter_data(self, entries):
        for e in entries:
            try:
                data = _read_file(e.ref, e.size + 1)
            except OSError as exc:
                raise SourceError("cannot read %s: %s" % (e.ref, exc.strerror or exc)) from None
            if len(data) != e.size:
                raise SourceError(
                    "%s changed while staging (was %d bytes, now %d); rerun to stage the new version"
                    % (e.ref, e.size, len(data))
                )
            yield data


class TarSource(object):
    kind = "tar"

    def __init__(self, path, where=None):
        self.path = path
        self.where = where or path

    def _open(self, mode):
        try:
            return tarfile.open(self.path, mode)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise SourceError("cannot read the archive %s: %s" % (self.where, exc)) from None

    def list(self, labels_hint=None):
        entries, warnings, links = [], [], []
        tf = self._open("r:*")
        try:
            for ordinal, m in enumerate(iter_tar(tf)):
                if m.isdir():
                    continue
                rel = member_relpath(m.name, self.where)
                if any(_skipped_name(p) for p in rel.split("/")):
                    continue
                check_utf8(rel, self.where)
                if m.issym() or m.islnk():
                    link_target(rel, m.linkname, self.where, hard=m.islnk())  # refuses escapes
                    links.append(rel)
                    continue
                if not m.isfile():
                    continue
                e = Entry(rel, m.size, int(m.mtime), ordinal)
                if _wanted(rel, labels_hint) and m.size <= 1 << 30:
                    e.small = tf.extractfile(m).read()
                entries.append(e)
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise SourceError("cannot read the archive %s: %s" % (self.where, exc)) from None
        finally:
            tf.close()
        if links:
            warnings.append(
                "%s: %d link members left out (links inside archives are not staged; first: %r)"
                % (self.where, len(links), links[0])
            )
        return entries, warnings

    def read_small(self, entry):
        if entry.small is None:
            raise SourceError("%s: %r was not kept while listing" % (self.where, entry.relpath))
        return entry.small

    def iter_data(self, entries):
        """One sequential pass; `entries` must be in member order (they are: manifest order)."""
        wanted = [e.ref for e in entries]
        if not wanted:
            return
        tf = self._open("r|*")
        pos = 0
        try:
            for ordinal, m in enumerate(iter_tar(tf)):
                if ordinal != wanted[pos]:
                    continue
                e = entries[pos]
                data = tf.extractfile(m).read()
                if len(data) != e.size:
                    raise SourceError(
                        "%s: member %r changed while staging" % (self.where, e.relpath)
                    )
                yield data
                pos += 1
                if pos == len(wanted):
                    return
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise SourceError("cannot read the archive %s: %s" % (self.where, exc)) from None
        finally:
            tf.close()
        if pos < len(wanted):
            raise SourceError(
                "%s ended before member %r; did it change?" % (self.where, entries[pos].relpath)
            )


class ZipSource(object):
    kind = "zip"

    def __init__(self, path, where=None):
        self.path = path
        self.where = where or path
        self._zf = None

    def _zip(self):
        if self._zf is None:
            try:
                self._zf = zipfile.ZipFile(self.path)
            except (zipfile.BadZipFile, OSError) as exc:
                raise SourceError("cannot read the zip %s: %s" % (self.where, exc)) from None
        return self._zf

    def list(self, labels_hint=None):
        entries, warnings, links = [], [], []
        zf = self._zip()
        for info in zf.infolist():
            if info.is_dir():
                continue
            rel = member_relpath(info.filename, self.where)
            if any(_skipped_name(p) for p in rel.split("/")):
                continue
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                link_target(rel, zf.read(info).decode("utf-8", "replace"), self.where)
                links.append(rel)
                continue
            mtime = calendar.timegm(tuple(info.date_time) + (0, 0, 0))
            e = Entry(rel, info.file_size, mtime, info)
            if _wanted(rel, labels_hint):
                e.small = zf.read(info)
            entries.append(e)
        if links:
            warnings.append(
                "%s: %d symlink members left out (first: %r)" % (self.where, len(links), links[0])
            )
        return entries, warnings

    def read_small(self, entry):
        return entry.small if entry.small is not None else self._zip().read(entry.ref)

    def iter_data(self, entries):
        zf = self._zip()
        for e in entries:
            try:
                yield zf.read(e.ref)
            except (zipfile.BadZipFile, OSError, RuntimeError) as exc:
                raise SourceError("%s: cannot read %r: %s" % (self.where, e.relpath, exc)) from None


class WebDatasetSource(object):
    """Tar shards, read shard by shard; a sample is a key group's data member."""

    kind = "webdataset"

    def __init__(self, shards, where):
        self.shards = shards  # [(relpath, path)]
        self.where = where

    def list(self, labels_hint=None):
        samples, warnings = [], []
        for shard_no, (shard_rel, path) in enumerate(self.shards):
            src = TarSource(
                path, where=os.path.join(self.where, shard_rel) if shard_rel else self.where
            )
            entries, w = src.list()
            warnings.extend(w)
            if entries and all(layouts.is_shard(e.relpath) for e in entries):
                raise LayoutError(
                    "%s holds tar shards itself; point at the shard files instead" % src.where
                )
            picked, w = layouts.wds_samples(entries, src.where)
            warnings.extend(w)
            for data, label in picked:
                rel = (shard_rel + "/" + data.relpath) if shard_rel else data.relpath
                samples.append((Entry(rel, data.size, data.mtime, (shard_no, data.ref)), label))
        return samples, warnings

    def iter_data(self, entries):
        by_shard = []
        for e in entries:
            shard_no, ordinal = e.ref
            if not by_shard or by_shard[-1][0] != shard_no:
                by_shard.append((shard_no, []))
            by_shard[-1][1].append(Entry(e.relpath, e.size, e.mtime, ordinal))
        for shard_no, group in by_shard:
            rel, path = self.shards[shard_no]
            for data in TarSource(path, where=os.path.join(self.where, rel)).iter_data(group):
                yield data


class Plan(object):
    """A source plus its manifest: what to stage and how to read it."""

    def __init__(self, source, manifest, entries, warnings):
        self.source = source
        self.manifest = manifest
        self.entries = entries
        self.warnings = warnings

    def iter_samples(self, start=0):
        """(index, relpath, data) for samples start.. in manifest order, each file read once."""
        entries = self.entries[start:]
        for offset, data in enumerate(self.source.iter_data(entries)):
            i = start + offset
            yield i, self.manifest.paths[i], data


def archive_kind(path):
    """ "zip", "tar" or None, from the file's content (not its name)."""
    if zipfile.is_zipfile(path):
        return "zip"
    try:
        if tarfile.is_tarfile(path):
            return "tar"
    except (OSError, EOFError):
        pass
    return None


def open_source(path, layout="auto", labels=None, display=None):
    """A Plan for a folder or archive at `path` on this machine.

    `labels`: a labels file: a path on this machine, or a path relative to the dataset root.
    """
    if layout not in layouts.LAYOUTS:
        raise LayoutError("unknown layout %r; one of %s" % (layout, ", ".join(layouts.LAYOUTS)))
    where = display or path
    if not os.path.exists(path):
        raise SourceError("%s does not exist" % where)
    # An absolute labels path is a file on this machine; a relative one is looked up inside the
    # dataset first, then relative to the current directory.
    labels_external = labels if labels and os.path.isabs(labels) else None
    if labels_external and not os.path.isfile(labels_external):
        raise SourceError("labels file %s does not exist" % labels_external)
    labels_hint = None if labels_external else labels

    if os.path.isdir(path):
        source = FolderSource(path)
        source.where = where
        entries, warnings = source.list()
        if layout == "webdataset" or (
            layout == "auto"
            and not labels
            and entries
            and all(layouts.is_shard(e.relpath) for e in entries)
        ):
            shards = [(e.relpath, e.ref) for e in entries if layouts.is_shard(e.relpath)]
            return _wds_plan(WebDatasetSource(shards, where), where, warnings)
        return _plan(
            source, entries, warnings, layout, labels, labels_external, where, archive=False
        )

    kind = archive_kind(path)
    if kind is None:
        raise SourceError("%s is neither a folder nor a tar/zip archive" % where)
    source = TarSource(path, where) if kind == "tar" else ZipSource(path, where)
    entries, warnings = source.list(labels_hint)
    if kind == "tar" and (
        layout == "webdataset"
        or (layout == "auto" and not labels and layouts.looks_like_wds_shard(entries))
    ):
        return _wds_plan(WebDatasetSource([("", path)], where), where, warnings)
    if layout == "webdataset":
        raise LayoutError("%s: WebDataset shards must be tar files" % where)
    entries, _ = layouts.strip_wrapper_dir(entries)
    return _plan(source, entries, warnings, layout, labels, labels_external, where, archive=True)


def _plan(source, entries, warnings, layout, labels, labels_external, where, archive):
    if layout == "auto":
        layout = layouts.detect(entries, labels)
        if layout == "webdataset":
            raise LayoutError(
                "%s contains only tar shards inside an archive; unpack it first or point at the shards"
                % where
            )
    if layout == "labels":
        if labels_external:
            with open(labels_external, "rb") as fh:
                labels_data = fh.read()
            labels_name, labels_inside = labels_external, None
        else:
            target = labels or next(
                (e.relpath for e in entries if layouts.is_label_file_name(e.relpath)), None
            )
            entry = next((e for e in entries if e.relpath == target), None) if target else None
            if entry is None and labels and os.path.isfile(labels):
                return _plan(
                    source,
                    entries,
                    warnings,
                    "labels",
                    labels,
                    os.path.abspath(labels),
                    where,
                    archive,
                )
            if entry is None:
                raise LayoutError(
                    "%s: no labels file%s; give one with --labels FILE (CSV path,label or JSON lines)"
                    % (
                        where,
                        " %r" % target
                        if target
                        else " (labels.csv, labels.jsonl, ...) at the top level",
                    )
                )
            labels_data = source.read_small(entry)
            labels_name, labels_inside = "%s/%s" % (where.rstrip("/"), entry.relpath), entry.relpath
        chosen, label_list, classes, w = layouts.labelled(
            entries, labels_name, labels_data, where, labels_inside
        )
        warnings = warnings + w
    elif layout == "imagefolder":
        chosen, label_list, classes = layouts.imagefolder(entries, where)
    elif layout == "files":
        chosen, label_list, classes = layouts.files(entries, where)
    else:
        raise LayoutError("layout %r does not apply to %s" % (layout, where))
    manifest = Manifest(
        layout,
        [e.relpath for e in chosen],
        [e.size for e in chosen],
        [e.mtime for e in chosen],
        label_list,
        classes,
        source=where,
    )
    _check_unique(manifest.paths, where)
    return Plan(source, manifest, chosen, warnings)


def _wds_plan(source, where, warnings):
    samples, w = source.list()
    raw = [label for _, label in samples]
    entries = [e for e, _ in samples]
    if any(x is not None for x in raw):
        present = [x for x in raw if x is not None]
        values, classes = layouts.label_values(present, where)
        it = iter(values)
        labels = [next(it) if x is not None else None for x in raw]
    else:
        labels, classes = None, []
    manifest = Manifest(
        "webdataset",
        [e.relpath for e in entries],
        [e.size for e in entries],
        [e.mtime for e in entries],
        labels,
        classes,
        source=where,
    )
    _check_unique(manifest.paths, where)
    return Plan(source, manifest, entries, warnings + w)


def _check_unique(paths, where):
    if len(set(paths)) != len(paths):
        seen = set()
        dup = next(p for p in paths if p in seen or seen.add(p))
        raise LayoutError(
            "%s: %r appears twice (an archive with a repeated member?)" % (where, dup)
        )
