"""Lookup plugins, evaluated on the controller as Ansible does: env, file, template, pipe,
lines, fileglob, first_found, items/list, vars, and the ones `with_*` loops use: subelements,
together, nested (community.general.cartesian), dict, sequence, indexed_items, random_choice,
flattened (community.general.flattened).

Relative paths are searched like Ansible's: the role's `files/` (`templates/` for template)
and the role directory, then the playbook's `files/` (`templates/`) and the playbook directory,
then the working directory. `pipe` runs its command with the controller's /bin/sh, bounded.
"""

from __future__ import annotations

import glob
import itertools
import os
import random
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

PIPE_TIMEOUT_S = 120.0
SUPPORTED = (
    "env",
    "file",
    "template",
    "pipe",
    "lines",
    "fileglob",
    "first_found",
    "items",
    "list",
    "vars",
    "varnames",
    "subelements",
    "together",
    "nested",
    "dict",
    "sequence",
    "indexed_items",
    "random_choice",
    "flattened",
)
# a lookup's other names (FQCN forms) -> provision's lookup
ALIASES = {
    "community.general.flattened": "flattened",
    "community.general.cartesian": "nested",
}


def canonical_lookup(kind: str) -> str:
    kind = kind.removeprefix("ansible.builtin.").removeprefix("ansible.legacy.")
    return ALIASES.get(kind, kind)


def _fail(message: str) -> jinja2.TemplateRuntimeError:
    return jinja2.TemplateRuntimeError(message)


def _subelements(terms: tuple[Any, ...]) -> list[Any]:
    """[(element, sub-element)] for each element's list at the dotted key (Ansible's)."""
    if len(terms) not in (2, 3) or not isinstance(terms[1], str):
        raise _fail("subelements: needs a list (or dict) of elements, a key, and optionally flags")
    flags = terms[2] if len(terms) == 3 else {}
    if not isinstance(flags, Mapping) or set(flags) - {"skip_missing"}:
        raise _fail("subelements: the third term may only be {skip_missing: true|false}")
    skip_missing = bool(flags.get("skip_missing", False))
    elements = terms[0]
    if isinstance(elements, Mapping):
        if elements.get("skipped", False) is not False:
            return []
        elements = list(elements.values())
    if not isinstance(elements, list):
        raise _fail("subelements: the first term must be a list or a dict")
    out: list[Any] = []
    path = terms[1].split(".")
    for element in elements:
        if not isinstance(element, Mapping):
            raise _fail(f"subelements: element {element!r} is not a mapping")
        if element.get("skipped", False) is not False:
            continue
        value: Any = element
        for index, key in enumerate(path):
            if not isinstance(value, Mapping) or key not in value:
                if skip_missing:
                    value = None
                    break
                raise _fail(f"could not find '{key}' key in iterated item '{element}'")
            value = value[key]
            if index + 1 < len(path) and not isinstance(value, Mapping):
                raise _fail(f"the key '{key}' should point to a dictionary, got '{value}'")
        if value is None and skip_missing:
            continue
        if not isinstance(value, list):
            raise _fail(f"the key {path[-1]} should point to a list, got '{value}'")
        out.extend([element, sub] for sub in value)
    return out


def _lists(kind: str, terms: tuple[Any, ...]) -> list[list[Any]]:
    lists = []
    for term in terms:
        if not isinstance(term, (list, tuple)):
            raise _fail(f"{kind}: every term must be a list, got {term!r}")
        lists.append(list(term))
    return lists


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        for item in value:
            out.extend(_flatten(item))
        return out
    return [] if value is None else [value]


_SEQ_SHORT = re.compile(
    r"^(?:(-?\d+|0x[0-9a-f]+)-)?(-?\d+|0x[0-9a-f]+)(?:/(-?\d+|0x[0-9a-f]+))?(?::(.+))?$", re.I
)


def _sequence(term: Any) -> list[str]:
    """`start=1 end=10 stride=2 format=x%02d` or `count=4`, or the short `1-10/2:x%02d`."""
    text = str(term).strip()
    opts: dict[str, str] = {}
    short = _SEQ_SHORT.match(text)
    if short and "=" not in text:
        start, end, stride, fmt = short.groups()
        opts = {"start": start or "1", "end": end}
        if stride:
            opts["stride"] = stride
        if fmt:
            opts["format"] = fmt
    else:
        for word in text.split():
            key, sep, value = word.partition("=")
            if not sep or key not in ("start", "end", "count", "stride", "format"):
                raise _fail(f"sequence: can't parse {word!r} (start= end= count= stride= format=)")
            opts[key] = value
    try:
        start = int(opts.get("start", "1"), 0)
        stride = int(opts.get("stride", "1"), 0)
        if "count" in opts:
            if "end" in opts:
                raise _fail("sequence: count and end are mutually exclusive")
            count = int(opts["count"], 0)
            if count <= 0:
                return []
            end = start + (count - 1) * stride
        elif "end" in opts:
            end = int(opts["end"], 0)
        else:
            raise _fail("sequence: needs end= or count=")
    except ValueError as exc:
        raise _fail(f"sequence: {exc}") from None
    fmt = opts.get("format", "%d")
    if stride == 0:
        return []
    if (stride > 0 and end < start) or (stride < 0 and end > start):
        raise _fail("sequence: to count backwards make stride negative")
    stop = end + (1 if stride > 0 else -1)
    return [fmt % i for i in range(start, stop, stride)]


def _search_dirs(ctx: Any, subdir: str) -> list[Path]:
    """Ansible's path_dwim_relative_stack: for each entry of the task's `ansible_search_path`
    (its role, the directory of its tasks file) `ENTRY/SUBDIR`, `ENTRY` (and for a role's
    tasks/ directory the role's `SUBDIR` first), then the playbook's directory, then the cwd."""
    dirs: list[Path] = []
    stack = _ctx_get(ctx, "ansible_search_path")
    if not isinstance(stack, list) or not stack:
        role = _ctx_get(ctx, "role_path")
        stack = [role] if isinstance(role, str) and role else []
    for entry in stack:
        if not isinstance(entry, str) or not entry:
            continue
        base = Path(entry)
        if base.name == "tasks" and (base.parent / "tasks").is_dir() and base.parent != base:
            dirs += [base.parent / subdir, base.parent]
        dirs += [base / subdir, base]
    play = _ctx_get(ctx, "playbook_dir")
    if isinstance(play, str) and play:
        dirs += [Path(play) / subdir, Path(play)]
    dirs.append(Path.cwd())
    return list(dict.fromkeys(dirs))


def _ctx_get(ctx: Any, key: str) -> Any:
    try:
        value = ctx.resolve_or_missing(key)
    except Exception:  # an undefined magic var: no such search place
        return None
    return None if value is jinja2.utils.missing or isinstance(value, jinja2.Undefined) else value


class VarsContext:
    """What the lookups read of a Jinja context (`resolve_or_missing`), over plain variables:
    for `with_<lookup>` loops, whose terms are already rendered."""

    def __init__(self, variables: Mapping[str, Any]) -> None:
        self._vars = variables
        self.parent = variables  # a Jinja context's variables are its parent (names: varnames)

    def resolve_or_missing(self, key: str) -> Any:
        try:
            return self._vars[key]
        except KeyError:
            return jinja2.utils.missing


def _varnames(ctx: Any, term: Any) -> list[str]:
    """Ansible's `varnames`: the names of the variables the task sees that the regular expression
    `term` matches (`re.search`, so `^x$` for one exact name), in the variables' order."""
    if not isinstance(term, str):
        raise _fail(f'varnames: invalid setting identifier, "{term}" is not a string, it is a {type(term).__name__}')
    try:
        search = re.compile(term)
    except re.error as exc:
        raise _fail(f'varnames: unable to use "{term}" as a search parameter: {exc}') from None
    names: dict[str, None] = {}
    for source in (getattr(ctx, "parent", None), getattr(ctx, "vars", None)):
        if isinstance(source, Mapping):
            names.update(dict.fromkeys(k for k in source if isinstance(k, str)))
    return [name for name in names if search.search(name)]


def find_file(ctx: Any, name: str, subdir: str = "files") -> Path | None:
    path = Path(os.path.expanduser(name))
    if path.is_absolute():
        return path if path.exists() else None
    for base in _search_dirs(ctx, subdir):
        if (base / path).exists():
            return base / path
    return None


def _missing(kind: str, name: str, ctx: Any, subdir: str) -> jinja2.TemplateRuntimeError:
    where = ", ".join(str(d) for d in _search_dirs(ctx, subdir))
    return jinja2.TemplateRuntimeError(
        f"lookup('{kind}'): could not find {name!r} (looked in: {where})"
    )


def _render_file(ctx: Any, path: Path) -> str:
    template = ctx.environment.from_string(path.read_text(encoding="utf-8"))
    # shared: the task's (lazy) variables are used as they are, not copied (and rendered) first
    new = template.new_context(ctx.parent, shared=True, locals=ctx.get_exported())
    return ctx.environment.concat(template.root_render_func(new))  # type: ignore[attr-defined]


def _pipe(command: str) -> str:
    try:
        proc = subprocess.run(
            ["/bin/sh", "-c", command],
            capture_output=True,
            text=True,
            timeout=PIPE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise jinja2.TemplateRuntimeError(
            f"lookup('pipe'): the command did not finish within {PIPE_TIMEOUT_S:g}s"
        ) from None
    if proc.returncode != 0:
        raise jinja2.TemplateRuntimeError(
            f"lookup('pipe'): the command exited with {proc.returncode}: "
            f"{proc.stderr.strip()[-300:] or 'no message'}"
        )
    return proc.stdout.rstrip("\n")


def _first_found(
    ctx: Any, terms: tuple[Any, ...], kwargs: dict[str, Any], subdir: str = "files"
) -> list[str]:
    files: list[str] = []
    paths: list[str] = list(kwargs.get("paths") or [])
    skip = bool(kwargs.get("skip", False))
    for term in terms:
        for entry in term if isinstance(term, list) else [term]:
            if isinstance(entry, Mapping):
                files += list(entry.get("files") or [])
                paths += list(entry.get("paths") or [])
                skip = bool(entry.get("skip", skip))
            else:
                files.append(str(entry))
    files += list(kwargs.get("files") or [])
    for name in files:
        candidates = [Path(p) / name for p in paths] if paths else []
        for candidate in candidates:
            if candidate.exists():
                return [str(candidate)]
        found = find_file(ctx, name, subdir)
        if found is not None:
            return [str(found)]
    if skip:
        return []
    raise jinja2.TemplateRuntimeError(
        f"lookup('first_found'): none of {files} exist; add `skip: true` to allow that"
    )


def run_lookup(ctx: Any, kind: str, terms: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The lookup's values as a list (query's shape)."""
    kind = canonical_lookup(kind)
    subdir = kwargs.pop("_subdir", "files")  # a with_first_found loop's action decides (Ansible)
    if kind == "first_found":
        return _first_found(ctx, terms, kwargs, subdir)
    if kind == "subelements":
        return _subelements(terms)
    if kind == "together":
        return [list(t) for t in itertools.zip_longest(*_lists(kind, terms))]
    if kind == "nested":
        lists = _lists(kind, terms)
        return [list(t) for t in itertools.product(*lists)] if lists else []
    if kind == "indexed_items":
        return [[i, v] for i, v in enumerate(_flatten_once(terms))]
    if kind == "random_choice":
        items = list(terms)
        return [random.choice(items)] if items else []
    if kind == "flattened":
        return _flatten(list(terms))
    values: list[Any] = []
    for term in terms:
        if kind == "env":
            values.append(os.environ.get(str(term), kwargs.get("default", "")))
        elif kind in ("file", "template"):
            subdir = "files" if kind == "file" else "templates"
            path = find_file(ctx, str(term), subdir)
            if path is None or not path.is_file():
                raise _missing(kind, str(term), ctx, subdir)
            if kind == "file":
                text = path.read_text(encoding="utf-8")
                values.append(text.rstrip("\n") if kwargs.get("rstrip", True) else text)
            else:
                values.append(_render_file(ctx, path))
        elif kind == "pipe":
            values.append(_pipe(str(term)))
        elif kind == "fileglob":
            pattern = str(term)
            if not os.path.isabs(pattern):
                for base in _search_dirs(ctx, "files"):
                    matches = sorted(glob.glob(str(base / pattern)))
                    if matches:
                        values.extend(m for m in matches if os.path.isfile(m))
                        break
            else:
                values.extend(m for m in sorted(glob.glob(pattern)) if os.path.isfile(m))
        elif kind in ("items", "list"):
            values.extend(term if isinstance(term, list) else [term])
        elif kind == "lines":
            values.extend(_pipe(str(term)).splitlines())
        elif kind == "dict":
            if not isinstance(term, Mapping):
                raise _fail(f"dict: needs a mapping, got {type(term).__name__}")
            values.extend({"key": k, "value": v} for k, v in term.items())
        elif kind == "sequence":
            values.extend(_sequence(term))
        elif kind == "varnames":
            values.extend(_varnames(ctx, term))
        elif kind == "vars":
            value = _ctx_get(ctx, str(term))
            if value is None and "default" not in kwargs:
                raise jinja2.TemplateRuntimeError(f"lookup('vars'): no variable named {term!r}")
            values.append(kwargs.get("default") if value is None else value)
        else:
            raise jinja2.TemplateRuntimeError(
                f"lookup plugin {kind!r} is not supported (supported: {', '.join(SUPPORTED)})"
            )
    return values


def _flatten_once(terms: tuple[Any, ...]) -> list[Any]:
    out: list[Any] = []
    for term in terms:
        out.extend(term if isinstance(term, list) else [term])
    return out


@jinja2.pass_context
def lookup(ctx: Any, kind: str, *terms: Any, **kwargs: Any) -> Any:
    """`lookup(...)`: one value alone, several strings joined with commas, other values (and
    none) as the list (ansible-core 2.19's rule), or the list with `wantlist=True`."""
    wantlist = kwargs.pop("wantlist", False)
    values = run_lookup(ctx, kind, terms, kwargs)
    if wantlist:
        return values
    if kind in ("fileglob",):
        return ",".join(str(v) for v in values)
    if kind == "first_found":
        return values[0] if values else ""
    if len(values) == 1:
        return values[0]
    if all(isinstance(v, str) for v in values):  # Ansible: strings joined, anything else as is
        return ",".join(values)
    return values


@jinja2.pass_context
def query(ctx: Any, kind: str, *terms: Any, **kwargs: Any) -> list[Any]:
    kwargs.pop("wantlist", None)
    return run_lookup(ctx, kind, terms, kwargs)
