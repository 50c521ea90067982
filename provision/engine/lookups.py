"""Lookup plugins, evaluated on the controller as Ansible does: env, file, template, pipe,
fileglob, first_found, items/list, vars.

Relative paths are searched like Ansible's: the role's `files/` (`templates/` for template)
and the role directory, then the playbook's `files/` (`templates/`) and the playbook directory,
then the working directory. `pipe` runs its command with the controller's /bin/sh, bounded.
"""

from __future__ import annotations

import glob
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

PIPE_TIMEOUT_S = 120.0
SUPPORTED = ("env", "file", "template", "pipe", "fileglob", "first_found", "items", "list", "vars")


def _search_dirs(ctx: Any, subdir: str) -> list[Path]:
    dirs: list[Path] = []
    for key in ("role_path", "playbook_dir"):
        base = _ctx_get(ctx, key)
        if isinstance(base, str) and base:
            dirs += [Path(base) / subdir, Path(base)]
    dirs.append(Path.cwd())
    return dirs


def _ctx_get(ctx: Any, key: str) -> Any:
    try:
        value = ctx.resolve_or_missing(key)
    except Exception:  # an undefined magic var: no such search place
        return None
    return None if value is jinja2.utils.missing or isinstance(value, jinja2.Undefined) else value


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


def _first_found(ctx: Any, terms: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
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
        found = find_file(ctx, name)
        if found is not None:
            return [str(found)]
    if skip:
        return []
    raise jinja2.TemplateRuntimeError(
        f"lookup('first_found'): none of {files} exist; add `skip: true` to allow that"
    )


def run_lookup(ctx: Any, kind: str, terms: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The lookup's values as a list (query's shape)."""
    kind = kind.removeprefix("ansible.builtin.")
    if kind == "first_found":
        return _first_found(ctx, terms, kwargs)
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


@jinja2.pass_context
def lookup(ctx: Any, kind: str, *terms: Any, **kwargs: Any) -> Any:
    """`lookup(...)`: one value alone, several joined with commas (Ansible), or the list with
    `wantlist=True`."""
    wantlist = kwargs.pop("wantlist", False)
    values = run_lookup(ctx, kind, terms, kwargs)
    if wantlist:
        return values
    if kind in ("fileglob",):
        return ",".join(str(v) for v in values)
    if kind == "first_found":
        return values[0] if values else ""
    return ",".join(str(v) for v in values) if len(values) != 1 else values[0]


@jinja2.pass_context
def query(ctx: Any, kind: str, *terms: Any, **kwargs: Any) -> list[Any]:
    kwargs.pop("wantlist", None)
    return run_lookup(ctx, kind, terms, kwargs)
