"""user/group, sysctl, pause, mount/mount_facts, apt sources and services on this machine, without
changing it: check mode against accounts every Linux has (root), files under temp dirs, and the
pure editing functions. The real changes run on fleet hosts with a private /etc
(tests/fleet/test_modules_builtin.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from builtin_support import assert_idempotent, ok, results, run_tasks

from provision.modules.mount import edit_fstab
from provision.modules.repos import edit_sources, parse_source, render_deb822, suggest_filename
from provision.modules.sysctl import edit_sysctl_file

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="account modules need root, as useradd does")


@root_only
def test_user_and_group_check_mode_reads_without_changing(tmp_path: Path) -> None:
    passwd = Path("/etc/passwd").read_bytes()
    result = ok(run_tasks(tmp_path, """
    - user: {name: root}
      register: r
    - user: {name: pv-nobody-h6, uid: 4242, groups: [root], comment: test}
    - group: {name: root}
    - group: {name: pv-nogroup-h6, gid: 4243}
    - user: {name: pv-nobody-h6, state: absent}
    """, check=True))
    assert [s for s, _ in results(result)] == ["ok", "changed", "ok", "changed", "ok"]
    reg = results(result)[0][1]
    assert reg["uid"] == 0 and reg["home"] and reg["state"] == "present"
    assert Path("/etc/passwd").read_bytes() == passwd


def test_user_password_must_be_a_hash(tmp_path: Path) -> None:
    # arguments are checked when the task runs (Ansible's rule): the task fails, nothing ran
    bad = run_tasks(tmp_path, "- user: {name: x, password: plaintext}").results[-1]
    assert bad.status == "failed" and "crypt hash" in bad.msg, bad.msg


def test_sysctl_file_edits_without_touching_the_kernel(tmp_path: Path) -> None:
    conf = tmp_path / "99-pv.conf"
    conf.write_text("# tuned\nvm.swappiness = 60\nvm.swappiness=61\nnet.core.somaxconn=128\n")
    tasks = "- sysctl: {name: vm.swappiness, value: '10', sysctl_file: TMP/99-pv.conf, reload: no}"
    assert_idempotent(tmp_path, tasks)
    assert conf.read_text() == "# tuned\nvm.swappiness=10\nnet.core.somaxconn=128\n"
    ok(run_tasks(tmp_path, "- sysctl: {name: net/core/somaxconn, state: absent, sysctl_file: TMP/99-pv.conf, reload: no}"))
    assert conf.read_text() == "# tuned\nvm.swappiness=10\n"
    unknown = run_tasks(tmp_path, "- sysctl: {name: pv.no.such.key, value: '1', sysctl_file: TMP/x.conf, reload: no}")
    assert unknown.results[0].status == "failed" and "does not exist" in unknown.results[0].msg


@pytest.mark.parametrize(
    ("text", "key", "value", "present", "expected"),
    [
        ("", "a.b", "1", True, "a.b=1\n"),
        ("a.b = 2\n# a.b=3\n", "a.b", "1", True, "a.b=1\n# a.b=3\n"),
        ("x=1\na.b=2\n", "a.b", None, False, "x=1\n"),
    ],
)
def test_edit_sysctl_file(text: str, key: str, value: str | None, present: bool, expected: str) -> None:
    assert edit_sysctl_file(text, key, value, present) == expected


def test_pause_waits_and_never_blocks_on_a_prompt(tmp_path: Path) -> None:
    result = ok(run_tasks(tmp_path, "- pause: {seconds: 0}\n- pause: {prompt: Continue?}"))
    (s1, r1), (s2, r2) = results(result)
    assert s1 == s2 == "ok" and r1["stdout"] == "Paused for 0 seconds"
    assert r2["msg"] == "Not waiting for response to prompt as stdin is not interactive" and r2["user_input"] == ""
    # arguments are checked when the task runs (Ansible's rule): the task fails, nothing ran
    bad = run_tasks(tmp_path, "- pause: {seconds: 1, minutes: 1}").results[-1]
    assert bad.status == "failed" and "mutually exclusive" in bad.msg, bad.msg


def test_mount_facts_and_fstab_entries(tmp_path: Path) -> None:
    facts = ok(run_tasks(tmp_path, "- mount_facts: {sources: [dynamic]}\n- debug:\n    msg: \"{{ mount_points['/'].fstype }}\""))
    assert results(facts)[1][1]["msg"]  # "/" is always mounted; its type depends on the machine
    fstab = tmp_path / "fstab"
    fstab.write_text("# static\nUUID=1 / ext4 defaults 0 1\n")
    tasks = "- mount: {path: /data/my disk, src: /dev/sdb1, fstype: xfs, opts: noatime, state: present, fstab: TMP/fstab}"
    assert_idempotent(tmp_path, tasks)
    assert fstab.read_text() == "# static\nUUID=1 / ext4 defaults 0 1\n/dev/sdb1 /data/my\\040disk xfs noatime 0 0\n"
    ok(run_tasks(tmp_path, "- mount: {path: /data/my disk, state: absent_from_fstab, fstab: TMP/fstab}"))
    assert fstab.read_text() == "# static\nUUID=1 / ext4 defaults 0 1\n"
    assert edit_fstab("a /x t o 0 0\n", {"src": "b", "path": "/x", "fstype": "t", "opts": "o", "dump": "0", "passno": "0"}, "/x") == "b /x t o 0 0\n"


def test_apt_sources_editing_like_ansible() -> None:
    assert parse_source("# deb http://a/ x main # note") == (True, False, "deb http://a/ x main", "note")
    assert suggest_filename("deb [arch=amd64 signed-by=/k.gpg] https://user:pw@download.docker.com/linux/debian trixie stable", None) == (
        "download_docker_com_linux_debian.list"
    )
    files = {
        "/etc/apt/sources.list": "deb  http://deb.debian.org/debian trixie main\n",
        "/etc/apt/sources.list.d/x.list": "# deb http://x.org/apt stable main\n",
    }
    assert edit_sources(files, "deb http://deb.debian.org/debian trixie main", "present", "/n.list") == {}
    assert edit_sources(files, "deb http://x.org/apt stable main", "present", "/n.list") == {
        "/etc/apt/sources.list.d/x.list": "deb http://x.org/apt stable main\n"
    }
    assert edit_sources(files, "deb http://new.org/ stable main", "present", "/etc/apt/sources.list.d/new_org.list") == {
        "/etc/apt/sources.list.d/new_org.list": "deb http://new.org/ stable main\n"
    }
    only = {"/etc/apt/sources.list.d/y.list": "deb http://y.org/ s main\n"}
    assert edit_sources(only, "deb http://y.org/ s main", "absent", "") == {"/etc/apt/sources.list.d/y.list": None}
    assert render_deb822({"name": "CUDA", "types": ["deb"], "uris": ["https://x/"], "suites": ["/"], "enabled": True, "components": None}) == (
        "Enabled: yes\nX-Repolib-Name: CUDA\nSuites: /\nTypes: deb\nURIs: https://x/\n"
    )
