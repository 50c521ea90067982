"""Dataset layouts: from a list of source entries to the ordered samples, labels and classes.

Pure functions over `Entry` lists (sources.py does the I/O), so the controller and the host build
the same manifest from the same files.

- imagefolder: CLASS/.../file -> label = index of CLASS in the sorted class names (torchvision's rule)
- labels:      files plus a labels file (CSV `path,label`, TSV, JSON lines, or `path label` text)
- webdataset:  tar shards; members grouped by key (the name up to the first dot of its basename)
- files:       every file, no labels

`auto` picks: a labels file at the root -> labels; only .tar shards -> webdataset; every file in
a subfolder -> imagefolder; else files.
"""

import csv
import io
import json
import re

LAYOUTS = ("auto", "imagefolder", "labels", "webdataset", "files")
LABEL_FILE_NAMES = ("labels.csv", "labels.tsv", "labels.jsonl", "labels.json", "labels.txt")
WDS_LABEL_EXTS = ("cls", "cls2", "label", "labels", "target", "class")
WDS_META_EXTS = ("json", "txt", "text", "caption", "meta", "__key__", "id", "idx")
IMAGE_EXTS = (
    "jpg",
    "jpeg",
    "png",
    "webp",
    "bmp",
    "gif",
    "tif",
    "tiff",
    "ppm",
    "pgm",
    "jxl",
    "avif",
    "heic",
)
SHARD_SUFFIXES = (".tar", ".tar.gz", ".tgz")
_HEADER_WORDS = (
    "path",
    "file",
    "filename",
    "file_name",
    "image",
    "img",
    "relpath",
    "name",
    "image_id",
)
_INT = re.compile(r"^[+-]?\d+$")


class LayoutError(ValueError):
    """The source does not fit the layout; the message says where (file:line) and what to do."""

    kind = "layout"


class Entry(object):
    """One file of the source. `small` holds its bytes when the lister kept them (labels files,
    WebDataset label members); `ref` is how the source reads it again."""

    __slots__ = ("relpath", "size", "mtime", "ref", "small")

    def __init__(self, relpath, size, mtime, ref=None, small=None):
        self.relpath = relpath
        self.size = size
        self.mtime = mtime
        self.ref = ref
        self.small = small

    def __repr__(self):
        return "Entry(%r, %d)" % (self.relpath, self.size)


def sort_key(relpath):
    """Component-wise order: `cat/x` before `cat-2/x`, as a directory walk (and ImageFolder) sees it."""
    return relpath.split("/")


def is_label_file_name(relpath):
    return "/" not in relpath and relpath.lower() in LABEL_FILE_NAMES


def is_shard(relpath):
    return relpath.lower().endswith(SHARD_SUFFIXES)


def wds_split(relpath):
    """("dir/000123", "seg.png") for "dir/000123.seg.png": WebDataset's key / extension rule."""
    head, _, base = relpath.rpartition("/")
    stem, dot, ext = base.partition(".")
    key = (head + "/" + stem) if head else stem
    return key, (ext if dot else "")


def detect(entries, labels_file=None):
    """The layout `auto` means for these entries (see the module docstring)."""
    if labels_file:
        return "labels"
    if not entries:
        return "files"
    if any(is_label_file_name(e.relpath) for e in entries):
        return "labels"
    if all(is_shard(e.relpath) for e in entries):
        return "webdataset"
    if all("/" in e.relpath for e in entries):
        return "imagefolder"
    return "files"


def looks_like_wds_shard(entries):
    """A single tar whose members come in key groups carrying a label member (000.jpg + 000.cls)."""
    if not entries:
        return False
    groups = {}
    for e in entries:
        key, ext = wds_split(e.relpath)
        groups.setdefault(key, set()).add(ext.lower())
    labelled = sum(1 for exts in groups.values() if exts & set(WDS_LABEL_EXTS))
    return (
        labelled > 0 and labelled * 2 >= len(groups) and all(len(x) >= 2 for x in groups.values())
    )


def strip_wrapper_dir(entries):
    """Drop a single top folder archives often wrap their content in (`data/cat/x.jpg`), as long
    as something stays nested below it. Returns (entries, stripped prefix)."""
    prefix = ""
    while entries and all("/" in e.relpath for e in entries):
        top = entries[0].relpath.split("/", 1)[0]
        if any(e.relpath.split("/", 1)[0] != top for e in entries):
            break
        rest = [e.relpath.split("/", 1)[1] for e in entries]
        if not any("/" in r or is_label_file_name(r) for r in rest):
            break  # a one-class image folder, not a wrapper
        for e, r in zip(entries, rest):  # noqa: B905 (3.8 has no strict=)
            e.relpath = r
        prefix += top + "/"
    return entries, prefix


# -- layouts ----------------------------------------------------------------------------------
def imagefolder(entries, where):
    stray = [e.relpath for e in entries if "/" not in e.relpath]
    if stray:
        raise LayoutError(
            "%s: imagefolder layout needs every file inside a class folder, but %d are at the top "
            "level (first: %r). Move them into class folders or use --layout files."
            % (where, len(stray), stray[0])
        )
    classes = sorted(set(e.relpath.split("/", 1)[0] for e in entries))
    index = dict((c, i) for i, c in enumerate(classes))
    labels = [index[e.relpath.split("/", 1)[0]] for e in entries]
    return entries, labels, classes


def files(entries, where):
    return entries, None, []


def parse_labels_file(data, name):
    """[(line number, path, raw label)] from a labels file's bytes; format from its extension."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LayoutError("%s: not UTF-8 (%s); save it as UTF-8" % (name, exc)) from None
    lower = name.lower()
    rows = []
    if lower.endswith(".jsonl") or lower.endswith(".json"):
        stripped = text.lstrip()
        if lower.endswith(".json") and stripped[:1] in ("[", "{"):
            try:
                doc = json.loads(text)
            except ValueError as exc:
                raise LayoutError("%s: invalid JSON (%s)" % (name, exc)) from None
            items = list(doc.items()) if isinstance(doc, dict) else doc
            for n, item in enumerate(items, 1):
                rows.append(_json_row(item, name, n))
            return rows
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise LayoutError("%s:%d: invalid JSON (%s)" % (name, n, exc)) from None
            rows.append(_json_row(item, name, n))
        return rows
    if lower.endswith(".txt") and "," not in text and '"' not in text:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            parts = line.rsplit(None, 1)
            if len(parts) != 2:
                raise LayoutError("%s:%d: expected `path label`, got %r" % (name, n, line))
            rows.append((n, parts[0], parts[1]))
        return _drop_header(rows)
    reader = csv.reader(
        io.StringIO(text, newline=""), delimiter="\t" if lower.endswith(".tsv") else ","
    )
    for row in reader:
        n = reader.line_num
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(row) < 2:
            raise LayoutError("%s:%d: expected `path,label`, got %r" % (name, n, row))
        rows.append((n, row[0], row[1].strip()))
    return _drop_header(rows)


def _drop_header(rows):
    if rows and rows[0][1].strip().lower() in _HEADER_WORDS:
        return rows[1:]
    return rows


def _json_row(item, name, n):
    if isinstance(item, (list, tuple)) and len(item) == 2:
        return (n, item[0], item[1])
    if isinstance(item, dict):
        path = next(
            (item[k] for k in ("path", "file", "filename", "image", "relpath") if k in item), None
        )
        label = next((item[k] for k in ("label", "class", "target", "y") if k in item), None)
        if isinstance(path, str) and label is not None:
            return (n, path, label)
    raise LayoutError('%s:%d: expected {"path": ..., "label": ...}, got %r' % (name, n, item))


def label_values(raw_labels, where):
    """Integer labels stay integers (classes empty); names become sorted classes and indices."""
    if all(
        isinstance(x, int)
        and not isinstance(x, bool)
        or (isinstance(x, str) and _INT.match(x.strip()))
        for x in raw_labels
    ):
        return [int(x) for x in raw_labels], []
    names = [str(x).strip() if not isinstance(x, str) else x.strip() for x in raw_labels]
    classes = sorted(set(names))
    index = dict((c, i) for i, c in enumerate(classes))
    return [index[x] for x in names], classes


def labelled(entries, labels_name, labels_data, where, labels_inside=None):
    """Samples = the files the labels file lists, in source order. Unlisted files are skipped
    (reported as a warning); a listed file that is missing is an error naming file:line."""
    rows = parse_labels_file(labels_data, labels_name)
    if not rows:
        raise LayoutError("%s: the labels file lists no samples" % labels_name)
    wanted = {}
    for n, path, label in rows:
        rel = path[2:] if path.startswith("./") else path
        if rel in wanted:
            raise LayoutError(
                "%s:%d: %r is listed twice (first on line %d)"
                % (labels_name, n, rel, wanted[rel][0])
            )
        wanted[rel] = (n, label)
    by_path = dict((e.relpath, e) for e in entries)
    missing = [(n, p) for p, (n, _) in wanted.items() if p not in by_path]
    if missing:
        n, p = missing[0]
        raise LayoutError(
            "%s:%d: %r is not in %s (%d listed files are missing). Paths must be relative to the "
            "dataset root." % (labels_name, n, p, where, len(missing))
        )
    chosen = [e for e in entries if e.relpath in wanted]
    skipped = [e.relpath for e in entries if e.relpath not in wanted and e.relpath != labels_inside]
    labels, classes = label_values([wanted[e.relpath][1] for e in chosen], where)
    warnings = []
    if skipped:
        warnings.append(
            "%d files in %s are not in %s and were left out (first: %r)"
            % (len(skipped), where, labels_name, skipped[0])
        )
    return chosen, labels, classes, warnings


def wds_samples(shard_entries, where):
    """Group one shard's members by key; pick each group's data member and label.

    Returns [(data entry, raw label or None)] and warnings. Other members (json, txt, ...) are
    not stored in v1.
    """
    groups = []
    by_key = {}
    for e in shard_entries:
        key, ext = wds_split(e.relpath)
        if key not in by_key:
            by_key[key] = []
            groups.append((key, by_key[key]))
        by_key[key].append((ext.lower(), e))
    out = []
    no_data = []
    for key, members in groups:
        label = None
        for ext, e in members:
            if ext in WDS_LABEL_EXTS and e.small is not None:
                try:
                    label = e.small.decode("utf-8").strip()
                except UnicodeDecodeError:
                    raise LayoutError(
                        "%s: label member %r is not text" % (where, e.relpath)
                    ) from None
                break
        data = next((e for ext, e in members if ext.rsplit(".", 1)[-1] in IMAGE_EXTS), None)
        if data is None:
            data = next(
                (e for ext, e in members if ext not in WDS_LABEL_EXTS and ext not in WDS_META_EXTS),
                None,
            )
        if data is None:
            no_data.append(key)
            continue
        out.append((data, label))
    warnings = []
    if no_data:
        warnings.append(
            "%s: %d keys have no data member and were left out (first: %r)"
            % (where, len(no_data), no_data[0])
        )
    return out, warnings
