"""What `provision train --dir` ships: .gitignore rules (git's semantics, for non-git folders),
git ls-files in a repository, the size guard, and the tar stream the host unpacks."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest

from provision.agent.datasets.tarstream import read_members
from provision.errors import ConfigError
from provision.train import gitignore
from provision.train.codefiles import list_code, tar_chunks


@pytest.mark.parametrize(
    ("patterns", "path", "is_dir", "expected"),
    [
        ("*.pt", "model.pt", False, True),
        ("*.pt", "ckpt/model.pt", False, True),
        ("*.pt\n!keep.pt", "keep.pt", False, False),
        ("data/", "data", True, True),
        ("data/", "data", False, False),  # a trailing slash matches folders only
        ("/build", "build", True, True),
        ("/build", "src/build", True, False),  # anchored to the .gitignore's folder
        ("docs/*.md", "docs/a.md", False, True),
        ("docs/*.md", "docs/sub/a.md", False, False),  # * does not cross /
        ("docs/**/*.md", "docs/sub/deep/a.md", False, True),
        ("**/logs", "a/b/logs", True, True),
        ("runs/**", "runs/x/y", False, True),
        ("# comment\n\n", "comment", False, False),
        ("\\#hash", "#hash", False, True),
        ("file?.txt", "file1.txt", False, True),
        ("file[0-9].txt", "filex.txt", False, False),
    ],
)
def test_gitignore_rules(patterns: str, path: str, is_dir: bool, expected: bool) -> None:
    assert gitignore.ignored(gitignore.parse(patterns), path, is_dir) is expected


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_walk_honours_nested_gitignores_and_never_ships_dot_git(tmp_path: Path) -> None:
    _tree(tmp_path, {
        ".gitignore": "*.ckpt\ndata/\n",
        "train.py": "print(1)\n", "model/net.py": "x = 1\n", "model/best.ckpt": "weights",
        "data/big.bin": "data", "sub/.gitignore": "local.txt\n", "sub/local.txt": "no",
        "sub/kept.txt": "yes", ".git/config": "[core]", "__pycache__/x.pyc": "",
    })
    names = [f.rel for f in list_code(tmp_path)]
    assert names == sorted(names)
    assert set(names) == {".gitignore", "train.py", "model/net.py", "sub/.gitignore", "sub/kept.txt"}


def test_git_repository_uses_ls_files(tmp_path: Path) -> None:
    _tree(tmp_path, {".gitignore": "out/\n", "train.py": "print(1)\n", "out/log.txt": "x", "new.py": "y"})
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "train.py", ".gitignore"], check=True)
    names = {f.rel for f in list_code(tmp_path)}
    assert names == {".gitignore", "train.py", "new.py"}  # untracked but not ignored ships too


def test_size_guard_names_the_biggest_files(tmp_path: Path) -> None:
    _tree(tmp_path, {"train.py": "print(1)\n"})
    (tmp_path / "dataset.bin").write_bytes(b"\0" * 300_000)
    with pytest.raises(ConfigError) as err:
        list_code(tmp_path, max_bytes=100_000)
    assert "dataset.bin" in str(err.value) and ".gitignore" in str(err.value)


def test_not_a_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a folder"):
        list_code(tmp_path / "missing")


def test_tar_stream_round_trips_names_and_bytes(tmp_path: Path) -> None:
    _tree(tmp_path, {"a.py": "A", "dir/ü name.py": "B" * 3000, "x" * 120 + ".py": "C"})
    files = list_code(tmp_path)
    data = b"".join(tar_chunks(files, chunk=1024))
    got = dict(read_members(io.BytesIO(data)))
    assert got == {f.rel: f.path.read_bytes() for f in files}
    assert all(len(f.sha256) == 64 for f in files)
