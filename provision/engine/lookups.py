"""Lookup plugins, evaluated on the controller as ansible-core's (plugins/lookup/*.py): env,
file, template, pipe, lines, fileglob, first_found, vars, varnames, csvfile and ini
(engine/lookup_tables.py), and the list lookups `with_*` loops use (engine/lookup_lists.py).
Options are keyword arguments (`lookup('file', 'x', rstrip=False)`), typed as Ansible's
(engine/lookup_options.py); `errors=ignore|warn` and `wantlist=True` are every lookup's.

Relative names are searched as Ansible's `find_file_in_search_path` does
(`search_candidates`): for each entry of the task's `ansible_search_path` (its role, the
directory of its tasks file) `ENTRY/SUBDIR/NAME` then `ENTRY/NAME`, then the playbook's
directory the same way. `pipe` runs its command with the controller's /bin/sh, bounded.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from collections import ChainMap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from provision.engine import lookup_lists, lookup_tables
from provision.engine.lookup_options import lookup_error, options
from provision.engine.template_vars import template_vars

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
    "csvfile",
    "ini",
    "inventory_hostnames",
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


# -- the search path ---------------------------------------------------------------------------
_RE_TASKS = re.compile(r"(?:^|/)+tasks/?$")
_MAINS = ("main.yml", "main.yaml", "main")


def _is_role(path: str) -> bool:
    """Ansible's imperfect role detection of a search-path entry (DataLoader._is_role)."""
    parent = os.path.dirname(path)
    if _RE_TASKS.search(path) and any(os.path.exists(os.path.join(path, m)) for m in _MAINS):
        return True
    return any(
        os.path.exists(os.path.join(base, sub, m))
        for base in (os.path.normpath(path), parent)
        for sub in ("tasks", "meta")
        for m in _MAINS
    )


def search_candidates(ctx: Any, subdir: str | None, name: str) -> list[Path]:
    """Where Ansible looks for a relative `name` (path_dwim_relative_stack): for each entry of
    the task's `ansible_search_path` (else the playbook's directory) `ENTRY/SUBDIR/NAME`
    (unless NAME starts with SUBDIR/) and `ENTRY/NAME` — a role's tasks subfolder adds the role's
    own first — then the playbook's directory the same way."""
    stack = _ctx_get(ctx, "ansible_search_path")
    basedir = _ctx_get(ctx, "playbook_dir")
    basedir = basedir if isinstance(basedir, str) and basedir else os.getcwd()
    if not isinstance(stack, list) or not stack:
        stack = [basedir]
    in_role = _ctx_get(ctx, "role_path") is not None
    own_subdir = subdir is not None and name.split("/")[0] == subdir
    out: list[str] = []
    for entry in stack:
        if not isinstance(entry, str) or not entry:
            continue
        upath = os.path.normpath(os.path.abspath(entry))
        parent = os.path.dirname(upath)
        if (in_role or _is_role(entry)) and parent.endswith("/tasks"):
            if subdir is not None:
                out.append(os.path.join(os.path.dirname(parent), subdir, name))
            out.append(os.path.join(parent, name))
        if subdir is not None and not own_subdir:
            out.append(os.path.join(upath, subdir, name))
        out.append(os.path.join(upath, name))
    if subdir is not None and not own_subdir:
        out.append(os.path.join(basedir, subdir, name))
    out.append(os.path.join(basedir, name))
    return [Path(p) for p in dict.fromkeys(out)]


def find_file(ctx: Any, name: str, subdir: str | None = "files") -> Path | None:
    """The first existing place of `name` (absolute or `~`: itself), else None."""
    if name.startswith(("~", "/")):
        path = Path(os.path.expanduser(name))
        return path if path.exists() else None
    return next((p for p in search_candidates(ctx, subdir, name) if p.exists()), None)


def _missing(kind: str, name: str, ctx: Any, subdir: str | None) -> jinja2.TemplateRuntimeError:
    where = ", ".join(str(p) for p in search_candidates(ctx, subdir, name))
    return lookup_error(f"lookup('{kind}'): could not find {name!r} (looked in: {where})")


# -- the lookups -------------------------------------------------------------------------------
_TEMPLATE_SPEC = {
    "template_vars": ("dict", {}),
    "variable_start_string": ("str", "{{"),
    "variable_end_string": ("str", "}}"),
    "comment_start_string": ("str", "{#"),
    "comment_end_string": ("str", "#}"),
    "trim_blocks": ("bool", True),
    "convert_data": ("bool", True),  # deprecated in Ansible; no effect there either
    "jinja2_native": ("bool", True),
}


# The environment whose one `{{ }}` keeps its value, for the template lookup's overlay: given by
# engine/templating.py when it loads (it imports this module to offer lookup/query).
_NATIVE: list[jinja2.Environment | None] = [None]


def use_native_environment(env: jinja2.Environment) -> None:
    _NATIVE[0] = env


def _render_file(ctx: Any, term: str, path: Path, opts: Mapping[str, Any]) -> Any:
    """A template file rendered as Ansible's template lookup: `{% include %}` and friends
    searched in its own folder, then each search-path entry's `templates/` and the entry; the
    template_* variables and `ansible_managed` added; one value stays native (none is None)."""
    stack = _ctx_get(ctx, "ansible_search_path")
    searchpath = [str(path.parent)]
    for entry in stack if isinstance(stack, list) else []:
        searchpath += [os.path.join(entry, "templates"), entry]
    if _NATIVE[0] is None:
        raise lookup_error("the template lookup needs provision.engine.templating loaded")
    env = _NATIVE[0].overlay(
        loader=jinja2.FileSystemLoader(searchpath),
        variable_start_string=opts["variable_start_string"],
        variable_end_string=opts["variable_end_string"],
        comment_start_string=opts["comment_start_string"],
        comment_end_string=opts["comment_end_string"],
        trim_blocks=bool(opts["trim_blocks"]),
        keep_trailing_newline=False,  # an include's last newline goes; the file's own comes back
    )
    source = path.read_text(encoding="utf-8")
    try:
        template = env.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise lookup_error(f"{path}:{exc.lineno}: {exc.message}") from None
    managed = {} if _ctx_get(ctx, "ansible_managed") is None else {"ansible_managed": True}
    extra = template_vars(term, str(path.resolve()), None, managed)
    layers = ChainMap(dict(opts["template_vars"] or {}), extra, ctx.parent)
    # shared: the task's (lazy) variables are used as they are, not copied (and rendered) first
    out = list(template.root_render_func(template.new_context(layers, shared=True)))
    if not out:
        return None
    result = out[0] if len(out) == 1 else "".join(str(v) for v in out)
    if isinstance(result, str):  # Ansible's preserve_trailing_newlines
        missing = (len(source) - len(source.rstrip("\n"))) - (len(result) - len(result.rstrip("\n")))
        result += "\n" * max(missing, 0)
    return result


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
        raise lookup_error(
            f"lookup('pipe'): the command did not finish within {PIPE_TIMEOUT_S:g}s"
        ) from None
    if proc.returncode != 0:
        raise lookup_error(
            f"lookup('pipe'): the command exited with {proc.returncode}: "
            f"{proc.stderr.strip()[-300:] or 'no message'}"
        )
    return proc.stdout.rstrip("\n")


def _split_on(value: Any, splitters: str) -> list[str]:
    """Ansible's first_found: a string splits on `splitters` (deprecated there, still done)."""
    if isinstance(value, str):
        return re.split("[" + re.escape(splitters) + "]", value)
    out: list[str] = []
    for item in value or []:
        out.extend(_split_on(item, splitters))
    return out


_FIRST_FOUND_SPEC = {"files": (None, []), "paths": (None, []), "skip": ("bool", False)}


def _first_found(
    ctx: Any, terms: tuple[Any, ...], kwargs: dict[str, Any], subdir: str | None
) -> list[str]:
    """The first file of the terms (names, lists of them, or `{files, paths, skip}` mappings;
    with `paths`, each path joined to each name) found by the search path; `[]` with `skip`."""
    opts = options("first_found", _FIRST_FOUND_SPEC, kwargs)

    def candidates(items: Any) -> list[str]:
        found: list[str] = []
        for term in items:
            if isinstance(term, Mapping):
                opts.update(options("first_found", _FIRST_FOUND_SPEC, term))
                names = opts["files"]
            elif isinstance(term, str):
                names = [term]
            elif isinstance(term, (list, tuple)):
                found += candidates(term)
                continue
            else:
                raise lookup_error(
                    "Invalid term supplied. A string, dict or list is required, not "
                    f"{type(term).__name__!r})."
                )
            files = _split_on(names, ",;")
            paths = _split_on(opts["paths"], ",:;")
            found += [os.path.join(p, f) for p in paths for f in files] if paths else files
        return found

    names = candidates(list(terms) or opts["files"])
    for name in names:
        path = find_file(ctx, name, subdir)
        if path is not None:
            return [os.path.normpath(os.path.abspath(path))]
    if opts["skip"]:
        return []
    where = f" in {subdir}/ or" if subdir else ""
    raise lookup_error(
        f"No file was found when using first_found. (looked for {names}{where} beside the "
        "task's role, tasks file and playbook; `skip: true` allows none)"
    )


def _varnames(ctx: Any, terms: tuple[Any, ...]) -> list[str]:
    """The names of the variables the task sees that each regular expression matches
    (`re.search`), in the variables' order."""
    names: dict[str, None] = {}
    for source in (getattr(ctx, "parent", None), getattr(ctx, "vars", None)):
        if isinstance(source, Mapping):
            names.update(dict.fromkeys(k for k in source if isinstance(k, str)))
    out: list[str] = []
    for term in terms:
        if not isinstance(term, str):
            raise lookup_error(
                f'Invalid setting identifier, "{term}" is not a string, it is a {type(term)}'
            )
        try:
            search = re.compile(term)
        except re.error as exc:
            raise lookup_error(f'Unable to use "{term}" as a search parameter: {exc}') from None
        out += [name for name in names if search.search(name)]
    return out


def _vars(ctx: Any, terms: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[Any]:
    """Each named variable's value; an unknown one is `default`, else an undefined value that
    fails where it is used (Ansible's)."""
    default = kwargs.get("default")
    out: list[Any] = []
    for term in terms:
        if not isinstance(term, str):
            raise lookup_error(f"Variable name must be 'str' not {type(term).__name__!r}.")
        try:
            value = ctx.resolve_or_missing(term)
        except Exception as exc:  # the variable's own template failed: so does the lookup
            raise lookup_error(str(exc)) from None
        if value is jinja2.utils.missing:
            value = (
                ctx.environment.undefined(hint=f"No variable named {term!r} was found.")
                if default is None
                else default
            )
        out.append(value)
    return out


_FILE_SPEC = {"rstrip": ("bool", True), "lstrip": ("bool", False)}


def _fileglob(ctx: Any, term: str) -> list[str]:
    base = os.path.basename(term)
    if base != term:
        found = find_file(ctx, os.path.dirname(term), "files")
        dirs = [str(found)] if found is not None else []
    else:
        stack = _ctx_get(ctx, "ansible_search_path")
        if not isinstance(stack, list) or not stack:
            play = _ctx_get(ctx, "playbook_dir")
            stack = [play if isinstance(play, str) and play else os.getcwd()]
        dirs = [d for entry in stack for d in (os.path.join(entry, "files"), entry)]
    for folder in dirs:
        matches = [m for m in sorted(glob.glob(os.path.join(folder, base))) if os.path.isfile(m)]
        if matches:
            return matches
    return []


def run_lookup(ctx: Any, kind: str, terms: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The lookup's values as a list (query's shape)."""
    kind = canonical_lookup(kind)
    # a with_first_found loop's action decides its folder (Ansible); lookup() searches none
    subdir = kwargs.pop("_subdir", None)
    listed = lookup_lists.list_lookup(kind, terms, kwargs)
    if listed is not None:
        return listed
    if kind == "first_found":
        return _first_found(ctx, terms, kwargs, subdir)
    if kind == "varnames":
        return _varnames(ctx, terms)
    if kind == "vars":
        return _vars(ctx, terms, kwargs)
    if kind in ("csvfile", "ini"):
        table = lookup_tables.csvfile if kind == "csvfile" else lookup_tables.ini
        return table(lambda name: find_file(ctx, name, "files"), terms, kwargs)
    if kind == "inventory_hostnames":
        return lookup_lists.inventory_hostnames({"groups": _ctx_get(ctx, "groups")}, terms)
    if kind not in SUPPORTED:
        raise lookup_error(
            f"lookup plugin {kind!r} is not supported (supported: {', '.join(SUPPORTED)})"
        )
    values: list[Any] = []
    for term in terms:
        if kind == "env":
            name = str(term).split()[0] if str(term).split() else ""
            values.append(os.environ.get(name, kwargs.get("default", "")))
        elif kind in ("file", "template"):
            subdir = "files" if kind == "file" else "templates"
            path = find_file(ctx, str(term), subdir)
            if path is None or not path.is_file():
                raise _missing(kind, str(term), ctx, subdir)
            if kind == "file":
                opts = options("file", _FILE_SPEC, kwargs)
                text = path.read_text(encoding="utf-8")
                text = text.lstrip() if opts["lstrip"] else text
                values.append(text.rstrip() if opts["rstrip"] else text)
            else:
                values.append(_render_file(ctx, str(term), path, options(kind, _TEMPLATE_SPEC, kwargs)))
        elif kind == "pipe":
            values.append(_pipe(str(term)))
        elif kind == "fileglob":
            pattern = str(term)
            if os.path.isabs(pattern):
                values.extend(m for m in sorted(glob.glob(pattern)) if os.path.isfile(m))
            else:
                values.extend(_fileglob(ctx, pattern))
        elif kind == "lines":
            values.extend(_pipe(str(term)).splitlines())
    return values


def _invoke(ctx: Any, kind: str, terms: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Ansible's _invoke_lookup: `errors=ignore|warn` turn a failure into None (`[]` as a
    list); else one value alone, several strings joined with commas, other values as the
    list; `wantlist=True` keeps the list."""
    wantlist = kwargs.pop("wantlist", False)
    errors = kwargs.pop("errors", "strict")
    try:
        values = run_lookup(ctx, kind, terms, kwargs)
    except jinja2.UndefinedError:
        raise  # an undefined term is the template's error, whatever `errors` says (Ansible)
    except Exception:
        if errors not in ("warn", "ignore"):
            raise
        return [] if wantlist else None
    if wantlist or not values:
        return values
    if len(values) == 1:
        return values[0]
    if all(isinstance(v, str) for v in values):
        return ",".join(values)
    return values


@jinja2.pass_context
def lookup(ctx: Any, kind: str, *terms: Any, **kwargs: Any) -> Any:
    return _invoke(ctx, kind, terms, kwargs)


@jinja2.pass_context
def query(ctx: Any, kind: str, *terms: Any, **kwargs: Any) -> list[Any]:
    kwargs["wantlist"] = True
    return _invoke(ctx, kind, terms, kwargs)
