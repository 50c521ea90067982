"""Each core module for real on this machine (LocalConnection, temp dirs): what it does, that a
second run changes nothing, and that check mode changes nothing."""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provision.engine.results import PlaybookResult
from provision.engine.runner import run_playbook
from provision.inventory.model import Host
from provision.modules.text import edit_lines


def run_tasks(
    tmp_path: Path,
    tasks: str,
    check: bool = False,
    diff: bool = False,
    extra_vars: dict[str, Any] | None = None,
) -> PlaybookResult:
    pb = tmp_path / "site.yml"
    body = textwrap.indent(textwrap.dedent(tasks).strip("\n"), "    ")
    pb.write_text(
        f"- hosts: localhost\n  gather_facts: false\n  tasks:\n{body}\n".replace(
            "TMP", str(tmp_path)
        )
    )
    return run_playbook(
        pb, hosts=[Host("localhost", local=True)], check=check, diff=diff, extra_vars=extra_vars
    )


def statuses(result: PlaybookResult) -> list[str]:
    return [r.status for r in result.results]


def assert_idempotent(
    tmp_path: Path, tasks: str, expect_first: list[str] | None = None
) -> PlaybookResult:
    """First run succeeds (with the expected statuses); a check run and a second real run report
    no change."""
    first = run_tasks(tmp_path, tasks)
    failures = [(r.task, r.msg) for r in first.results if r.status == "failed"]
    assert first.ok, failures
    if expect_first is not None:
        assert statuses(first) == expect_first
    check = run_tasks(tmp_path, tasks, check=True)
    assert check.recap["localhost"].changed == 0, [(r.task, r.status) for r in check.results]
    second = run_tasks(tmp_path, tasks)
    assert second.ok
    assert second.recap["localhost"].changed == 0, [
        (r.task, r.status, r.result) for r in second.results
    ]
    return first


# -- command / shell ---------------------------------------------------------------------------


def test_command_creates_removes_chdir_stdin_argv(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    result = run_tasks(
        tmp_path,
        """
        - command: touch made chdir=TMP/sub creates=TMP/sub/made
        - command: touch made chdir=TMP/sub creates=TMP/sub/made
        - command: cat
          args: {stdin: "from stdin"}
          register: c
        - command:
            argv: [printf, "%s|", "a b", "$HOME"]
          register: a
        - command: echo $HOME ~/x
          register: h
        - command: rm TMP/sub/made removes=TMP/sub/nothing
        - debug: msg="{{ c.stdout }} {{ a.stdout }} {{ h.stdout }}"
        """,
    )
    assert result.ok
    assert (tmp_path / "sub" / "made").exists()
    assert statuses(result) == ["changed", "ok", "changed", "changed", "changed", "ok", "ok"]
    home = os.path.expanduser("~")
    assert result.results[-1].result["msg"] == f"from stdin a b|$HOME| {home} {home}/x"


def test_command_failure_and_shell_features(tmp_path: Path) -> None:
    result = run_tasks(
        tmp_path,
        """
        - command: ls /definitely/not/here
          ignore_errors: true
          register: bad
        - shell: |
            set -e
            v={{ value }}
            cat <<EOF
            value=$v {{ value }}
            EOF
          args: {executable: /bin/bash}
          register: s
        - debug: msg="{{ bad.rc }} {{ s.stdout }}"
        """,
        extra_vars={"value": "x y $(id)"},
    )
    assert result.results[0].status == "failed" and result.results[0].ignored
    assert result.results[-1].result["msg"] == "2 value=x y $(id) x y $(id)"


# -- files -------------------------------------------------------------------------------------


def test_file_states_idempotent(tmp_path: Path) -> None:
    (tmp_path / "target").write_text("t")
    (tmp_path / "gone").mkdir()
    (tmp_path / "r" / "sub").mkdir(parents=True)
    (tmp_path / "r" / "sub" / "x").write_text("x")
    first = assert_idempotent(
        tmp_path,
        """
        - file: path=TMP/d/e state=directory mode=0750
        - file: path=TMP/d/e/f state=touch mode=u=rw,g=r,o= modification_time=preserve access_time=preserve
        - file: path=TMP/link src=TMP/target state=link
        - file: path=TMP/hard src=TMP/target state=hard
        - file: path=TMP/gone state=absent
        - file: path=TMP/r state=directory recurse=yes mode=u=rwX,g=rX,o=
        """,
        expect_first=["changed"] * 6,
    )
    assert first.ok
    assert oct((tmp_path / "r/sub").stat().st_mode & 0o777) == "0o750"
    assert oct((tmp_path / "r/sub/x").stat().st_mode & 0o777) == "0o640"
    assert oct((tmp_path / "d/e").stat().st_mode & 0o777) == "0o750"
    assert oct((tmp_path / "d/e/f").stat().st_mode & 0o777) == "0o640"
    assert os.readlink(tmp_path / "link") == str(tmp_path / "target")
    assert (tmp_path / "hard").stat().st_ino == (tmp_path / "target").stat().st_ino
    assert not (tmp_path / "gone").exists()


def test_file_errors_are_clear(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    result = run_tasks(
        tmp_path,
        """
        - file: path=TMP/plain state=directory
          ignore_errors: true
        - file: path=TMP/missing state=file
          ignore_errors: true
        - file: path=TMP/plain src=/etc state=link
          ignore_errors: true
        """,
    )
    msgs = [r.msg for r in result.results]
    assert "exists and is not a directory" in msgs[0]
    assert "does not exist" in msgs[1]
    assert "exists and is not a link" in msgs[2]


def test_copy_content_src_mode_backup_and_diff(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "payload.bin").write_bytes(
        bytes(range(256)) * 2000
    )  # 512 KB: two-step path
    (tmp_path / "dest").mkdir()
    tasks = """
        - copy: dest=TMP/dest/a.txt content="line1\\n" mode=0600
        - copy: src=payload.bin dest=TMP/dest/
        - copy: src=TMP/dest/a.txt dest=TMP/dest/b.txt remote_src=yes mode=0644
        """
    assert_idempotent(tmp_path, tasks, expect_first=["changed", "changed", "changed"])
    assert (tmp_path / "dest/a.txt").read_text() == "line1\n"
    assert oct((tmp_path / "dest/a.txt").stat().st_mode & 0o777) == "0o600"
    assert (tmp_path / "dest/payload.bin").read_bytes() == (
        tmp_path / "files/payload.bin"
    ).read_bytes()
    assert (tmp_path / "dest/b.txt").read_text() == "line1\n"
    # change content with backup + diff; force=no keeps an existing file
    result = run_tasks(
        tmp_path,
        """
        - copy: dest=TMP/dest/a.txt content="line2\\n" backup=yes
          register: r
        - copy: dest=TMP/dest/b.txt content="other" force=no
        """,
        diff=True,
    )
    assert statuses(result) == ["changed", "ok"]
    assert Path(result.results[0].result["backup_file"]).read_text() == "line1\n"
    assert result.results[0].result["diff"][0]["before"] == "line1\n"
    assert oct((tmp_path / "dest/a.txt").stat().st_mode & 0o777) == "0o600"  # mode kept on replace
    assert (tmp_path / "dest/b.txt").read_text() == "line1\n"


def test_copy_validate_rejects_bad_content(tmp_path: Path) -> None:
    result = run_tasks(
        tmp_path,
        """
        - copy:
            dest: TMP/conf.json
            content: "not json"
            validate: python3 -m json.tool %s
          ignore_errors: true
        - copy:
            dest: TMP/conf.json
            content: '{"ok": true}'
            validate: python3 -m json.tool %s
        """,
    )
    assert statuses(result) == ["failed", "changed"]
    assert "validation failed" in result.results[0].msg
    assert (tmp_path / "conf.json").read_text() == '{"ok": true}'


def test_template_renders_with_vars_and_reports_errors(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "app.conf.j2").write_text(
        "name={{ app }}\n{% for p in ports %}port={{ p }}\n{% endfor %}"
    )
    (tmp_path / "templates" / "bad.j2").write_text("ok\n{{ undefined_in_template }}\n")
    assert_idempotent(
        tmp_path,
        """
        - template: src=app.conf.j2 dest=TMP/app.conf mode=0644
          vars: {app: demo, ports: [80, 443]}
        """,
        expect_first=["changed"],
    )
    assert (tmp_path / "app.conf").read_text() == "name=demo\nport=80\nport=443\n"
    result = run_tasks(tmp_path, "- template: src=bad.j2 dest=TMP/bad\n")
    assert "bad.j2" in result.results[0].msg and "undefined_in_template" in result.results[0].msg


def test_lineinfile_idempotent_and_semantics(tmp_path: Path) -> None:
    (tmp_path / "cfg").write_text("# header\nport=80\nname=x\n")
    assert_idempotent(
        tmp_path,
        """
        - lineinfile: path=TMP/cfg regexp=^port= line=port=8080
        - lineinfile: path=TMP/cfg line=added insertafter="^# header"
        - lineinfile: path=TMP/cfg regexp=^name= state=absent
        - lineinfile: path=TMP/new line=created create=yes mode=0600
        """,
        expect_first=["changed"] * 4,
    )
    assert (tmp_path / "cfg").read_text() == "# header\nadded\nport=8080\n"
    assert (tmp_path / "new").read_text() == "created\n"


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        ("a\nb\n", {"line": "c"}, "a\nb\nc\n"),
        ("a\nb", {"line": "c"}, "a\nb\nc\n"),
        ("a\nb\n", {"line": "c", "insertbefore": "BOF"}, "c\na\nb\n"),
        ("a\nb\n", {"line": "c", "insertbefore": "^b"}, "a\nc\nb\n"),
        ("x=1\nx=2\n", {"line": "x=9", "regexp": "^x="}, "x=1\nx=9\n"),
        ("x=1\nx=2\n", {"line": "x=9", "regexp": "^x=", "firstmatch": True}, "x=9\nx=2\n"),
        ("v=1.2\n", {"line": r"v=\1.0", "regexp": r"^v=(\d+)\..*", "backrefs": True}, "v=1.0\n"),
        ("a\n", {"line": "zz", "regexp": "nomatch", "backrefs": True}, "a\n"),
        ("a\nb\na\n", {"line": "a", "state": "absent"}, "b\n"),
    ],
)
def test_lineinfile_edits(text: str, args: dict[str, Any], expected: str) -> None:
    full = {"state": "present", **args}
    assert edit_lines(text, full)[0] == expected


def test_stat(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("abc")
    result = run_tasks(
        tmp_path,
        """
        - stat: path=TMP/f
          register: s
        - stat: path=TMP/none
          register: n
        - debug: msg="{{ s.stat.exists }} {{ s.stat.size }} {{ s.stat.checksum }} {{ s.stat.isreg }} {{ n.stat.exists }}"
        """,
    )
    assert (
        result.results[-1].result["msg"] == f"True 3 {hashlib.sha1(b'abc').hexdigest()} True False"
    )


# -- net ---------------------------------------------------------------------------------------


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "www"
    root.mkdir()
    (root / "data.txt").write_text("payload\n")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_get_url_checksum_and_idempotency(tmp_path: Path, http_server: str) -> None:
    digest = hashlib.sha256(b"payload\n").hexdigest()
    (tmp_path / "dl").mkdir()
    (tmp_path / "dl2").mkdir()
    assert_idempotent(
        tmp_path,
        f"""
        - get_url: url={http_server}/data.txt dest=TMP/dl/data.txt checksum=sha256:{digest} mode=0644
        - get_url: url={http_server}/data.txt dest=TMP/dl2/
        """,
        expect_first=["changed", "changed"],
    )
    assert (tmp_path / "dl/data.txt").read_text() == "payload\n"
    assert (tmp_path / "dl2/data.txt").read_text() == "payload\n"
    result = run_tasks(
        tmp_path,
        f"""
        - get_url: url={http_server}/data.txt dest=TMP/dl/bad.txt checksum=sha256:{"0" * 64}
          ignore_errors: true
        - get_url: url={http_server}/missing dest=TMP/dl/missing.txt
          ignore_errors: true
        """,
    )
    assert "checksum mismatch" in result.results[0].msg
    assert "download of" in result.results[1].msg
    assert not (tmp_path / "dl/bad.txt").exists() and not (tmp_path / "dl/missing.txt").exists()


def test_wait_for_port_and_path(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    port = listener.getsockname()[1]
    try:
        (tmp_path / "ready").write_text("state: READY\n")
        result = run_tasks(
            tmp_path,
            f"""
            - wait_for: port={port} timeout=10
            - wait_for: path=TMP/ready search_regex=READY timeout=5
            - wait_for: path=TMP/never timeout=1 sleep=0.2
              ignore_errors: true
            """,
        )
    finally:
        listener.close()
    assert statuses(result) == ["ok", "ok", "failed"]
    assert "Timeout when waiting for" in result.results[2].msg


# -- packages ----------------------------------------------------------------------------------


def _wheel(directory: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel, built by hand (no network, no build backend)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},,\n" for path in files) + f"{dist}/RECORD,,\n"
    files[f"{dist}/RECORD"] = record
    path = directory / f"{name}-{version}-py3-none-any.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for arc, text in files.items():
            zf.writestr(arc, text)
    path.write_bytes(buf.getvalue())
    return path


@pytest.mark.slow
def test_venv_and_pip_into_it(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "pvtiny", "1.0")
    _wheel(wheels, "pvtiny", "2.0")
    tasks = f"""
        - venv: path=TMP/env python={sys.executable}
        - pip:
            name: [pvtiny==1.0]
            virtualenv: TMP/env
            extra_args: --no-index
            find_links: [TMP/wheels]
        """
    assert_idempotent(tmp_path, tasks, expect_first=["changed", "changed"])
    out = subprocess.run(
        [str(tmp_path / "env/bin/python"), "-c", "import pvtiny; print(pvtiny.VERSION)"],
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "1.0"
    result = run_tasks(
        tmp_path,
        """
        - pip: name=pvtiny>=2 virtualenv=TMP/env extra_args=--no-index find_links=TMP/wheels
        - pip: name=pvtiny state=absent virtualenv=TMP/env
        - pip: name=pvtiny state=absent virtualenv=TMP/env
        - pip: name=nosuchpkg-pv virtualenv=TMP/env extra_args=--no-index find_links=TMP/wheels
          ignore_errors: true
        """,
    )
    assert statuses(result) == ["changed", "changed", "ok", "failed"]
    assert "pip failed" in result.results[-1].msg


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("apt-get"), reason="needs root and apt")
def test_apt_installed_package_and_check_mode_for_a_missing_one(tmp_path: Path) -> None:
    """Real dpkg queries; nothing is installed (check mode for the missing package)."""
    present = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", "coreutils"], capture_output=True, text=True
    )
    assert "installed" in present.stdout
    missing = "sl"
    if (
        "install ok installed"
        in subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", missing], capture_output=True, text=True
        ).stdout
    ):
        pytest.skip(f"{missing} is installed here; the check-mode case needs a missing package")
    result = run_tasks(
        tmp_path,
        f"""
        - apt: name=coreutils state=present
        - apt: name={missing} state=present
          check_mode: true
          register: would
        - debug: msg="{{{{ would.packages }}}}"
        """,
    )
    assert statuses(result) == ["ok", "changed", "ok"]
    assert result.results[-1].result["msg"] == [missing]
    assert (
        "install ok installed"
        not in subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", missing], capture_output=True, text=True
        ).stdout
    )


# -- control -----------------------------------------------------------------------------------


def test_control_modules(tmp_path: Path) -> None:
    (tmp_path / "vars").mkdir()
    (tmp_path / "vars" / "extra.yml").write_text("from_file: 7\n")
    result = run_tasks(
        tmp_path,
        """
        - include_vars: extra.yml
        - set_fact: {doubled: "{{ from_file * 2 }}"}
        - assert:
            that: [doubled | int == 14, "from_file == 7"]
            success_msg: all good
        - assert:
            that: doubled | int == 15
            fail_msg: "doubled is {{ doubled }}"
          ignore_errors: true
        - debug: var=doubled
        - fail: msg="stop {{ doubled }}"
        - debug: msg=not-reached
        """,
    )
    assert statuses(result) == ["ok", "ok", "ok", "failed", "ok", "failed"]
    assert result.results[2].msg == "all good"
    assert result.results[3].msg == "doubled is 14"
    assert result.results[4].result["doubled"] == 14
    assert result.results[5].msg == "stop 14"


def test_facts_module_regathers(tmp_path: Path) -> None:
    result = run_tasks(
        tmp_path,
        """
        - facts:
        - debug: msg="{{ ansible_processor_vcpus }} {{ provision_user.name }}"
        """,
    )
    assert result.ok, [r.msg for r in result.results]
    vcpus, user = str(result.results[-1].result["msg"]).split()
    assert int(vcpus) >= 1 and user
