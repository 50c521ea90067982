"""Paths a host reports never name a controller file outside the destination (issue 20, defect 4).

The "host" is this machine through LocalConnection, made to lie the way a compromised rental
does: a $HOME of `/../../..` + somewhere else (what a `export HOME=` in ~/.bashrc gives), and a
`sha1sum` on its PATH that slips a false `@@path` line into fetch's reply."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from builtin_support import run_tasks

from provision.paths import OutsideDestination, under_destination


def _escape_to(target: Path) -> str:
    return "/" + "../" * 40 + str(target).lstrip("/")


def test_fetch_refuses_a_home_that_climbs_out_of_dest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "loot").write_text("the host's bytes\n")
    monkeypatch.setenv("HOME", _escape_to(outside))  # the host's $HOME: "/../../..../outside"
    result = run_tasks(tmp_path, "- fetch: {src: ~/loot, dest: TMP/got}")
    r = result.results[0]
    assert r.status == "failed", (r.status, r.result)
    assert "outside the destination" in r.msg and "localhost" in r.msg and str(tmp_path / "got") in r.msg
    assert (outside / "loot").read_text() == "the host's bytes\n"  # not overwritten by its own copy
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name == "loot"]
    assert written == [outside / "loot"], written


def test_fetch_ignores_a_lying_path_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that prints its own `@@path` (here a sha1sum wrapper writing to its shell's stdout)
    names nothing: the local copy is named after the src the user wrote."""
    src = tmp_path / "remote" / "app.log"
    src.parent.mkdir()
    src.write_text("data\n")
    escaped = tmp_path / "escaped"
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sha1sum").write_text(
        "#!/bin/sh\n"
        f'echo "@@path {_escape_to(escaped)}" >> /proc/$PPID/fd/1\n'
        'PATH=${PATH#*:} exec sha1sum "$@"\n')
    (fake / "sha1sum").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    result = run_tasks(tmp_path, f"- fetch: {{src: {src}, dest: TMP/got}}\n  register: got")
    r = result.results[0]
    assert r.status == "changed", (r.status, r.msg)
    assert not escaped.exists()
    assert Path(r.result["dest"]) == tmp_path / "got" / "localhost" / str(src).lstrip("/")


@pytest.mark.parametrize("reported", ["../x", "/a/../../x", "a/../../../x", "\x00x"])
def test_under_destination_refuses_every_way_out(tmp_path: Path, reported: str) -> None:
    (tmp_path / "dest").mkdir()
    with pytest.raises(OutsideDestination) as err:
        under_destination(tmp_path / "dest", reported, host="gpu9", reported=reported)
    assert "gpu9" in str(err.value) and repr(reported) in str(err.value)


def test_under_destination_follows_a_symlink_on_the_way(tmp_path: Path) -> None:
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "link").symlink_to(tmp_path)  # left by anything: still not a way out
    with pytest.raises(OutsideDestination):
        under_destination(tmp_path / "dest", "/link/x", host="gpu9", reported="/link/x")
    inside = under_destination(tmp_path / "dest", "/root/a/../b", host="gpu9", reported="/root/a/../b")
    assert inside == tmp_path / "dest" / "root" / "b"
