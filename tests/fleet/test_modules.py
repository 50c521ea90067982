"""Each core module against the SSH test fleet, and idempotency: a second run of every module
reports changed=0 (and a check run before it changes nothing)."""

from __future__ import annotations

import hashlib
import http.server
import io
import textwrap
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provision.connection.base import ConnectOptions
from provision.engine.results import PlaybookResult
from provision.engine.runner import run_playbook


def run(
    tmp_path: Path,
    fleet: Any,
    options: ConnectOptions,
    tasks: str,
    hosts: int = 3,
    check: bool = False,
    extra_vars: dict[str, Any] | None = None,
    name: str = "site.yml",
) -> PlaybookResult:
    body = textwrap.indent(textwrap.dedent(tasks).strip("\n"), "    ")
    pb = tmp_path / name
    pb.write_text(f"- hosts: all\n  gather_facts: false\n  tasks:\n{body}\n")
    return run_playbook(
        pb,
        hosts=fleet.provision_hosts()[:hosts],
        options=options,
        check=check,
        extra_vars=extra_vars,
    )


def idempotent(
    tmp_path: Path,
    fleet: Any,
    options: ConnectOptions,
    tasks: str,
    hosts: int = 3,
    extra_vars: dict[str, Any] | None = None,
) -> PlaybookResult:
    first = run(tmp_path, fleet, options, tasks, hosts, extra_vars=extra_vars)
    failures = [(r.host, r.task, r.msg) for r in first.results if r.status == "failed"]
    assert first.ok, failures
    assert all(s.changed > 0 for s in first.recap.values())
    check = run(tmp_path, fleet, options, tasks, hosts, check=True, extra_vars=extra_vars)
    changed = [(r.host, r.task, r.result) for r in check.results if r.status == "changed"]
    assert check.ok and changed == [], changed
    second = run(tmp_path, fleet, options, tasks, hosts, extra_vars=extra_vars)
    assert second.ok
    changed = [(r.host, r.task) for r in second.results if r.status == "changed"]
    assert changed == [], f"second run changed: {changed}"
    return first


def on_host(fleet: Any, host: int, cmd: str) -> str:
    return fleet.ns_exec(fleet.hosts[host], cmd).stdout


def test_file_copy_template_lineinfile(
    tmp_path: Path, fleet: Any, ssh_options: ConnectOptions
) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "motd.j2").write_text(
        "host={{ inventory_hostname }} name={{ who }}\n"
    )
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "blob.bin").write_bytes(
        bytes(range(256)) * 1200
    )  # > 256 KiB: check-then-send
    idempotent(
        tmp_path,
        fleet,
        ssh_options,
        """
        - file: path=/tmp/pv-mod/dir state=directory mode=0750
        - copy: dest=/tmp/pv-mod/dir/conf content="plain\\n" mode=0640
        - copy: src=blob.bin dest=/tmp/pv-mod/dir/
        - template: src=motd.j2 dest=/tmp/pv-mod/motd
        - lineinfile: path=/tmp/pv-mod/dir/plain.txt line="second line" create=yes
        - lineinfile: path=/root/.pv-rc line="export A=1" create=yes
        - file: path=/tmp/pv-mod/link src=/tmp/pv-mod/motd state=link
        - file: path=/tmp/pv-mod/gone state=absent
        """,
        extra_vars={"who": "o'brien $(touch /root/PWNED)"},
    )
    for index in range(3):
        name = fleet.hosts[index].name
        assert (
            on_host(fleet, index, "cat /tmp/pv-mod/motd")
            == f"host={name} name=o'brien $(touch /root/PWNED)\n"
        )
        assert on_host(fleet, index, "cat /tmp/pv-mod/dir/plain.txt") == "second line\n"
        assert on_host(fleet, index, "stat -c %a /tmp/pv-mod/dir /tmp/pv-mod/dir/conf").split() == [
            "750",
            "640",
        ]
        blob = on_host(fleet, index, "sha1sum < /tmp/pv-mod/dir/blob.bin").split()[0]
        assert blob == hashlib.sha1((tmp_path / "files/blob.bin").read_bytes()).hexdigest()
        assert (
            on_host(fleet, index, "ls /root/PWNED 2>&1 || true")
            .strip()
            .endswith("No such file or directory")
        )


def test_command_shell_stat_and_facts(
    tmp_path: Path, fleet: Any, ssh_options: ConnectOptions
) -> None:
    result = run(
        tmp_path,
        fleet,
        ssh_options,
        """
        - command: hostname
          register: h
          changed_when: false
        - shell: echo "{{ value }}" | wc -c; echo $HOME
          register: s
          changed_when: false
        - command: touch /tmp/pv-cmd-once creates=/tmp/pv-cmd-once
        - stat: path=/tmp/pv-cmd-once
          register: st
        - facts:
        - assert:
            that:
              - h.stdout == inventory_hostname
              - s.stdout_lines[0] | int == value | length + 1
              - s.stdout_lines[1] == '/root'
              - st.stat.exists
              - ansible_hostname == inventory_hostname
              - provision_data_dir == '/root/autodl-tmp'
              - ansible_user_uid == 0
        """,
        extra_vars={"value": "a'b\"c $(id) `id`"},
    )
    assert result.ok, [(r.host, r.task, r.msg) for r in result.results if r.status == "failed"]
    again = run(
        tmp_path, fleet, ssh_options, "- command: touch /tmp/pv-cmd-once creates=/tmp/pv-cmd-once\n"
    )
    assert all(s.changed == 0 for s in again.recap.values())


@pytest.fixture
def http_root(tmp_path: Path, fleet: Any) -> Iterator[tuple[str, Path]]:
    """An HTTP server on the controller's fleet address (the hosts route to it)."""
    root = tmp_path / "www"
    root.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer((fleet.controller_address, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{fleet.controller_address}:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def test_get_url_and_wait_for(
    tmp_path: Path, fleet: Any, ssh_options: ConnectOptions, http_root: tuple[str, Path]
) -> None:
    url, root = http_root
    (root / "model.bin").write_bytes(b"weights" * 1000)
    digest = hashlib.sha256(b"weights" * 1000).hexdigest()
    idempotent(
        tmp_path,
        fleet,
        ssh_options,
        f"""
        - file: path=/tmp/pv-dl state=directory
        - get_url: url={url}/model.bin dest=/tmp/pv-dl/model.bin checksum=sha256:{digest} mode=0600
        - wait_for: host={fleet.controller_address} port={url.rsplit(":", 1)[1]} timeout=10
        - wait_for: path=/tmp/pv-dl/model.bin timeout=5
        """,
    )
    assert on_host(fleet, 0, "stat -c %a /tmp/pv-dl/model.bin").strip() == "600"
    bad = run(
        tmp_path,
        fleet,
        ssh_options,
        f"""
        - get_url: url={url}/model.bin dest=/tmp/pv-dl/other.bin checksum=sha256:{"1" * 64}
        """,
        hosts=1,
    )
    assert "checksum mismatch" in bad.results[0].msg
    assert on_host(fleet, 0, "ls /tmp/pv-dl").split() == ["model.bin"]


def _wheel(name: str, version: str) -> bytes:
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{dist}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for arc, text in files.items():
            zf.writestr(arc, text)
    return buf.getvalue()


@pytest.mark.slow
def test_venv_and_pip(tmp_path: Path, fleet: Any, ssh_options: ConnectOptions) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "pvfleet-1.0-py3-none-any.whl").write_bytes(_wheel("pvfleet", "1.0"))
    idempotent(
        tmp_path,
        fleet,
        ssh_options,
        """
        - file: path=/root/wheels state=directory
        - copy: src=pvfleet-1.0-py3-none-any.whl dest=/root/wheels/
        - venv: path=/root/autodl-tmp/venv
        - pip:
            name: pvfleet==1.0
            virtualenv: /root/autodl-tmp/venv
            extra_args: --no-index
            find_links: [/root/wheels]
        """,
        hosts=2,
    )
    out = on_host(
        fleet, 1, "/root/autodl-tmp/venv/bin/python -c 'import pvfleet; print(pvfleet.VERSION)'"
    )
    assert out.strip() == "1.0"


def test_apt_present_and_check_mode(
    tmp_path: Path, fleet: Any, ssh_options: ConnectOptions
) -> None:
    """dpkg is shared with this machine: only an installed package for real, a missing one in
    check mode (nothing installed)."""
    result = run(
        tmp_path,
        fleet,
        ssh_options,
        """
        - apt: name=coreutils,tar state=present
        - apt: name=sl state=present
          check_mode: true
          register: would
        - assert: {that: "('sl' in would.packages) == would.changed"}
        """,
        hosts=2,
    )
    assert result.ok, [(r.task, r.msg) for r in result.results if r.status == "failed"]
    assert [r.status for r in result.for_host(fleet.hosts[0].name)][0] == "ok"


def test_set_fact_debug_assert_fail(
    tmp_path: Path, fleet: Any, ssh_options: ConnectOptions
) -> None:
    result = run(
        tmp_path,
        fleet,
        ssh_options,
        """
        - set_fact: {n: "{{ inventory_hostname | regex_replace('gpu', '') | int }}"}
        - debug: msg="host {{ n }}"
        - assert: {that: n | int >= 1}
        - fail: msg="only gpu2 fails"
          when: inventory_hostname == 'gpu2'
        - debug: msg=after
        """,
    )
    assert result.failed_hosts == ["gpu2"]
    assert [r.result.get("msg") for r in result.for_host("gpu1") if r.action == "debug"] == [
        "host 1",
        "after",
    ]
