"""blockinfile and replace on this machine (LocalConnection, temp dirs): Ansible's semantics,
idempotence, check mode and diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin_support import assert_idempotent, ok, results, run_tasks

from provision.modules.text import block_edit


def test_blockinfile_inserts_updates_and_removes(tmp_path: Path) -> None:
    conf = tmp_path / "sshd_config"
    conf.write_text("Port 22\nPermitRootLogin yes\n")
    tasks = """
    - blockinfile:
        path: TMP/sshd_config
        insertafter: '^Port'
        block: |
          MaxSessions 20
          ClientAliveInterval 30
      register: r
    """
    first = assert_idempotent(tmp_path, tasks)
    (status, reg), = results(first)
    assert reg["msg"] == "Block inserted"
    assert conf.read_text() == (
        "Port 22\n# BEGIN ANSIBLE MANAGED BLOCK\nMaxSessions 20\nClientAliveInterval 30\n"
        "# END ANSIBLE MANAGED BLOCK\nPermitRootLogin yes\n"
    )
    assert reg["diff"][0]["before_header"] == f"{conf} (content)"
    assert "MaxSessions 20" in reg["diff"][0]["after"]
    # a new block replaces the old one in place; check mode leaves the file alone
    update = tasks.replace("MaxSessions 20", "MaxSessions 5")
    before = conf.read_text()
    assert run_tasks(tmp_path, update, check=True).recap["localhost"].changed == 1
    assert conf.read_text() == before
    ok(run_tasks(tmp_path, update))
    assert conf.read_text().count("BEGIN ANSIBLE MANAGED BLOCK") == 1
    assert "MaxSessions 5\n" in conf.read_text()
    removed = ok(run_tasks(tmp_path, "- blockinfile: {path: TMP/sshd_config, state: absent}"))
    assert results(removed)[0][1]["msg"] == "Block removed"
    assert conf.read_text() == "Port 22\nPermitRootLogin yes\n"


def test_blockinfile_create_markers_and_errors(tmp_path: Path) -> None:
    tasks = """
    - blockinfile:
        path: TMP/new/dir/env.sh
        create: yes
        marker: "## {mark} cuda"
        marker_begin: start
        marker_end: stop
        insertbefore: BOF
        mode: "0600"
        block: export CUDA_HOME=/usr/local/cuda
    """
    first = assert_idempotent(tmp_path, tasks)
    assert results(first)[0][1]["msg"] == "File created and ownership, perms or SE linux context changed"
    target = tmp_path / "new/dir/env.sh"
    assert target.read_text() == "## start cuda\nexport CUDA_HOME=/usr/local/cuda\n## stop cuda\n"
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    missing = run_tasks(tmp_path, "- blockinfile: {path: TMP/nope, block: x}")
    assert missing.results[0].status == "failed"
    assert "does not exist" in missing.results[0].msg and missing.results[0].result["rc"] == 257
    absent = ok(run_tasks(tmp_path, "- blockinfile: {path: TMP/nope, state: absent}"))
    assert absent.results[0].status == "ok"


@pytest.mark.parametrize(
    ("original", "args", "expected"),
    [
        (b"a\nb", {"block": "x"}, b"a\nb\n# BEGIN ANSIBLE MANAGED BLOCK\nx\n# END ANSIBLE MANAGED BLOCK\n"),
        (b"a\nb\n", {"block": "x", "insertbefore": "^b"}, b"a\n# BEGIN ANSIBLE MANAGED BLOCK\nx\n# END ANSIBLE MANAGED BLOCK\nb\n"),
        (b"a\nb\n", {"block": "x", "insertafter": "nomatch"}, b"a\nb\n# BEGIN ANSIBLE MANAGED BLOCK\nx\n# END ANSIBLE MANAGED BLOCK\n"),
        (b"a\n", {"block": "x", "prepend_newline": True}, b"a\n\n# BEGIN ANSIBLE MANAGED BLOCK\nx\n# END ANSIBLE MANAGED BLOCK\n"),
        (b"a\n", {"block": "x", "insertbefore": "BOF", "append_newline": True}, b"# BEGIN ANSIBLE MANAGED BLOCK\nx\n# END ANSIBLE MANAGED BLOCK\n\na\n"),
        (b"a\n# BEGIN ANSIBLE MANAGED BLOCK\nold\n# END ANSIBLE MANAGED BLOCK\nz\n", {"block": ""}, b"a\nz\n"),
        (None, {"block": "x"}, b"# BEGIN ANSIBLE MANAGED BLOCK\nx\n# END ANSIBLE MANAGED BLOCK\n"),
    ],
)
def test_block_edit_matches_ansible(original: bytes | None, args: dict, expected: bytes) -> None:
    assert block_edit(original, {"state": "present", **args}) == expected


def test_replace_regex_sections_backrefs_and_check(tmp_path: Path) -> None:
    conf = tmp_path / "hosts"
    conf.write_text("[a]\nport=1\nport=2\n[b]\nport=3\n")
    tasks = r"""
    - replace:
        path: TMP/hosts
        after: '\[a\]'
        before: '\[b\]'
        regexp: '^port=(\d)$'
        replace: 'port=\g<1>0'
      register: r
    """
    first = assert_idempotent(tmp_path, tasks)
    assert results(first)[0][1]["msg"] == "2 replacements made"
    assert conf.read_text() == "[a]\nport=10\nport=20\n[b]\nport=3\n"
    diff = results(first)[0][1]["diff"][0]
    assert diff["before"].count("port=1\n") == 1 and "port=10" in diff["after"]
    nomatch = ok(run_tasks(tmp_path, "- replace: {path: TMP/hosts, regexp: x, after: nothere}"))
    assert "did not match" in results(nomatch)[0][1]["msg"]
    missing = run_tasks(tmp_path, "- replace: {path: TMP/missing, regexp: x}")
    assert missing.results[0].status == "failed" and "does not exist" in missing.results[0].msg


def test_replace_bad_regex_is_rejected_before_running(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x\n")
    # arguments are checked when the task runs (Ansible's rule): the task fails, nothing ran
    bad = run_tasks(tmp_path, "- replace: {path: TMP/f, regexp: '([a'}").results[-1]
    assert bad.status == "failed" and "regular expression" in bad.msg, bad.msg
