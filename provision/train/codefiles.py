"""Which files of --dir are the code to ship: `git ls-files` (tracked plus untracked-not-ignored)
when the folder is in a git work tree, else a walk honouring .gitignore files (gitignore.py).
`.git/` is never shipped. The size guard stops a run from streaming a dataset or checkpoints
the user forgot to ignore, and names the biggest files."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from provision.agent.datasets import tarstream
from provision.errors import ConfigError
from provision.train import gitignore

DEFAULT_MAX_BYTES = 256 << 20
ALWAYS_SKIPPED = {".git", "__pycache__", ".provision-code.json"}


@dataclass(frozen=True)
class CodeFile:
    rel: str  # "/"-separated, relative to --dir
    path: Path
    size: int
    executable: bool
    sha256: str


def _git_files(root: Path) -> list[str] | None:
    try:
        inside = subprocess.run(["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"],
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        return None
    proc = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
        capture_output=True, timeout=60,
    )
    if proc.returncode != 0:
        raise ConfigError(f"--dir {root}: git ls-files failed: {proc.stderr.decode(errors='replace').strip()}")
    names = [n.decode("utf-8", "surrogateescape") for n in proc.stdout.split(b"\0") if n]
    return sorted(set(names))


def _walk_files(root: Path) -> list[str]:
    rules: list[gitignore.Rule] = []
    out: list[str] = []

    def visit(folder: Path, rel: str) -> None:
        ignore_file = folder / ".gitignore"
        if ignore_file.is_file():
            source = f"{rel + '/' if rel else ''}.gitignore"
            rules.extend(gitignore.parse(ignore_file.read_text(errors="replace"), rel, source))
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise ConfigError(f"--dir: cannot read {folder}: {exc.strerror}") from None
        for entry in entries:
            if entry.name in ALWAYS_SKIPPED:
                continue
            child = f"{rel}/{entry.name}" if rel else entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            if gitignore.ignored(rules, child, is_dir):
                continue
            if is_dir:
                visit(Path(entry.path), child)
            elif entry.is_file(follow_symlinks=True):
                out.append(child)

    visit(root, "")
    return out


def list_code(directory: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> list[CodeFile]:
    root = Path(directory).expanduser().resolve()
    if not root.is_dir():
        raise ConfigError(f"--dir {directory}: not a folder (give the folder with your training code)")
    names = _git_files(root)
    if names is None:
        names = _walk_files(root)
    files: list[CodeFile] = []
    total = 0
    for rel in names:
        if set(rel.split("/")) & ALWAYS_SKIPPED:
            continue
        path = root / rel
        try:
            st = path.stat()
        except OSError:
            continue  # deleted but still in the index
        if not stat.S_ISREG(st.st_mode):
            continue
        total += st.st_size
        files.append(CodeFile(rel, path, st.st_size, bool(st.st_mode & 0o111), ""))
    if total > max_bytes:
        biggest = sorted(files, key=lambda f: -f.size)[:5]
        listing = ", ".join(f"{f.rel} ({f.size / 1e6:.1f} MB)" for f in biggest)
        raise ConfigError(
            f"--dir {root}: {total / 1e6:.1f} MB of files to ship, over the {max_bytes / 1e6:.0f} MB "
            f"guard (largest: {listing}). Add data and checkpoints to .gitignore, stage datasets "
            "with `provision stage`, or raise --max-code-size."
        )
    return [CodeFile(f.rel, f.path, f.size, f.executable, _sha256(f.path)) for f in files]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def tar_chunks(files: list[CodeFile], chunk: int = 1 << 20):
    """The files as one uncompressed tar stream (the staging stream's tar writer)."""
    parts: list[bytes] = []
    size = 0
    for f in files:
        data = f.path.read_bytes()
        parts += [tarstream.header(f.rel, len(data), 0), data, tarstream.padding(len(data))]
        size += len(data) + 512
        if size >= chunk:
            yield b"".join(parts)
            parts, size = [], 0
    parts.append(tarstream.END)
    yield b"".join(parts)
