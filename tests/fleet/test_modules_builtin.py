"""The builtin modules Ansible playbooks use, over real SSH to fleet hosts.

The shared fleet runs the modules that touch only a host's own /root (private tmpfs per host):
blockinfile, replace, unarchive (controller archive as one stream, and one already on the host),
fetch, slurp, find, script, raw, git (a bare repository made on the host), uri (an HTTP server
on the fleet bridge) and systemd's message on a host without systemd.

Modules that change the system (user, group, cron files, APT sources and keys, init.d services,
sysctl, mount) run on a fleet of their own whose host gets a private /etc (an overlay in that
host's mount namespace: the machine's /etc is never written), its own network namespace for
sysctl and its own mount namespace for mount. Nothing is mocked: the host's own useradd, gpg,
mount run.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import tarfile
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
    hosts: list,
    options: ConnectOptions,
    tasks: str,
    check: bool = False,
    extra_vars: dict[str, Any] | None = None,
) -> PlaybookResult:
    body = textwrap.indent(textwrap.dedent(tasks).strip("\n"), "    ")
    pb = tmp_path / "site.yml"
    pb.write_text(f"- hosts: all\n  gather_facts: false\n  tasks:\n{body}\n")
    return run_playbook(pb, hosts=hosts, options=options, check=check, diff=True, extra_vars=extra_vars)


def ok(result: PlaybookResult) -> PlaybookResult:
    failures = [(r.host, r.task, r.msg) for r in result.results if r.status == "failed"]
    assert result.ok and not failures, failures
    return result


def idempotent(tmp_path: Path, hosts: list, options: ConnectOptions, tasks: str, **kw: Any) -> PlaybookResult:
    first = ok(run(tmp_path, hosts, options, tasks, **kw))
    assert all(s.changed > 0 for s in first.recap.values()), first.recap
    check = ok(run(tmp_path, hosts, options, tasks, check=True, **kw))
    assert [(r.host, r.task) for r in check.results if r.status == "changed"] == []
    second = ok(run(tmp_path, hosts, options, tasks, **kw))
    assert [(r.host, r.task, r.result) for r in second.results if r.status == "changed"] == []
    return first


def on_host(fleet: Any, host: Any, cmd: str) -> str:
    return fleet.ns_exec(host, cmd).stdout


def test_text_archive_and_transfer_modules_over_ssh(tmp_path: Path, fleet: Any, ssh_options: ConnectOptions) -> None:
    hosts = fleet.provision_hosts()[:2]
    (tmp_path / "files").mkdir()
    members = {"app/run.sh": b"#!/bin/sh\necho run\n", "app/data/weights.bin": bytes(range(256)) * 400}
    with tarfile.open(tmp_path / "files" / "app.tgz", "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as zf:
        zf.writestr("cfg/a.ini", "[a]\nk=1\n")
    for h in fleet.hosts[:2]:
        fleet.ns_exec(h, "rm -rf /root/pvb && mkdir -p /root/pvb/app /root/pvb/cfg && "
                         "printf 'Port 22\\nX11Forwarding yes\\n' > /root/pvb/sshd_config")  # fmt: skip
        fleet.ns_exec(h, "base64 -d > /root/pvb/cfg.zip", input=base64.b64encode(zbuf.getvalue()).decode())
    tasks = """
    - blockinfile:
        path: /root/pvb/sshd_config
        insertbefore: '^X11'
        block: "ClientAliveInterval 30\\nMaxSessions {{ inventory_hostname | length }}"
    - replace: {path: /root/pvb/sshd_config, regexp: '^X11Forwarding yes$', replace: 'X11Forwarding no'}
    - unarchive: {src: app.tgz, dest: /root/pvb/app}
    - unarchive: {src: /root/pvb/cfg.zip, dest: /root/pvb/cfg, remote_src: yes}
    - fetch: {src: /root/pvb/sshd_config, dest: FETCHED}
    - slurp: {src: /root/pvb/app/app/run.sh}
      register: blob
    - find: {paths: /root/pvb, recurse: yes, patterns: ['*.sh', '*.ini']}
      register: found
    - copy:
        dest: /root/pvb/facts.json
        content: "{{ {'n': found.matched, 'script': (blob.content | b64decode)} | to_json }}"
    """.replace("FETCHED", str(tmp_path / "fetched"))
    idempotent(tmp_path, hosts, ssh_options, tasks)
    for h in fleet.hosts[:2]:
        assert on_host(fleet, h, "cat /root/pvb/sshd_config") == (
            "Port 22\n# BEGIN ANSIBLE MANAGED BLOCK\nClientAliveInterval 30\n"
            f"MaxSessions {len(h.name)}\n# END ANSIBLE MANAGED BLOCK\nX11Forwarding no\n"
        )
        digest = on_host(fleet, h, "sha256sum < /root/pvb/app/app/data/weights.bin").split()[0]
        assert digest == hashlib.sha256(members["app/data/weights.bin"]).hexdigest()
        assert on_host(fleet, h, "stat -c %a /root/pvb/app/app/run.sh").strip() == "755"
        assert on_host(fleet, h, "cat /root/pvb/cfg/cfg/a.ini") == "[a]\nk=1\n"
        assert json.loads(on_host(fleet, h, "cat /root/pvb/facts.json")) == {"n": 2, "script": "#!/bin/sh\necho run\n"}
        fetched = tmp_path / "fetched" / h.name / "root/pvb/sshd_config"
        assert fetched.read_text() == on_host(fleet, h, "cat /root/pvb/sshd_config")


def test_script_raw_git_and_systemd_message_over_ssh(tmp_path: Path, fleet: Any, ssh_options: ConnectOptions) -> None:
    hosts = fleet.provision_hosts()[:2]
    for h in fleet.hosts[:2]:
        fleet.ns_exec(
            h,
            "set -e; rm -rf /root/pvg; mkdir -p /root/pvg/w; cd /root/pvg/w; git init -q -b main; "
            "echo one > f; git add f; git -c user.name=t -c user.email=t@x commit -qm one; git tag v1; "
            "echo two > f; git -c user.name=t -c user.email=t@x commit -qam two; "
            "git clone -q --bare /root/pvg/w /root/pvg/up.git",
        )
    (tmp_path / "hello.sh").write_text('#!/bin/sh\necho "host=$(hostname) arg=$1"\n')
    tasks = f"""
    - script: {tmp_path}/hello.sh "{{{{ note }}}}"
      args: {{creates: /root/pvg/never}}
      register: s
    - raw: hostname
      register: r
    - git: {{repo: /root/pvg/up.git, dest: /root/pvg/co, version: v1}}
      register: g
    - copy: {{dest: /root/pvg/out.json, content: "{{{{ {{'s': s.stdout_lines, 'r': r.stdout | trim, 'after': g.after}} | to_json }}}}"}}
    """
    note = "a b; $(touch /root/PWNED)"
    result = ok(run(tmp_path, hosts, ssh_options, tasks, extra_vars={"note": note}))
    for h in fleet.hosts[:2]:
        out = json.loads(on_host(fleet, h, "cat /root/pvg/out.json"))
        assert out["s"] == [f"host={h.name} arg={note}"] and out["r"] == h.name
        assert out["after"] == on_host(fleet, h, "git -C /root/pvg/w rev-parse v1").strip()
        assert on_host(fleet, h, "cat /root/pvg/co/f") == "one\n"
        assert on_host(fleet, h, "test -e /root/PWNED && echo yes || echo no").strip() == "no"
    assert {r.task: r.status for r in result.results if r.host == hosts[0].name}["git"] == "changed"
    again = ok(run(tmp_path, hosts, ssh_options, "- git: {repo: /root/pvg/up.git, dest: /root/pvg/co, version: v1}"))
    assert [r.status for r in again.results] == ["ok", "ok"]
    # fleet hosts, like rented containers, have no systemd: the message says so
    nosd = run(tmp_path, hosts[:1], ssh_options, "- systemd: {name: nvidia-persistenced, state: started}")
    assert nosd.results[0].status == "failed"
    assert "systemd is not running on this host" in nosd.results[0].msg
    assert "container" in nosd.results[0].msg


@pytest.fixture
def http_on_bridge(fleet: Any) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps({"path": self.path, "auth": self.headers.get("Authorization")}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = http.server.ThreadingHTTPServer((fleet.controller_address, 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{fleet.controller_address}:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_uri_from_hosts(tmp_path: Path, fleet: Any, ssh_options: ConnectOptions, http_on_bridge: str) -> None:
    hosts = fleet.provision_hosts()[:3]
    tasks = f"""
    - uri: {{url: "{http_on_bridge}/v1/{{{{ inventory_hostname }}}}", url_username: ops, url_password: "{{{{ pw }}}}", force_basic_auth: yes}}
      register: u
    - copy: {{dest: /root/uri.json, content: "{{{{ u.json | to_json }}}}"}}
    """
    ok(run(tmp_path, hosts, ssh_options, tasks, extra_vars={"pw": "pa55"}))
    for h in fleet.hosts[:3]:
        got = json.loads(on_host(fleet, h, "cat /root/uri.json"))
        assert got == {"path": f"/v1/{h.name}", "auth": "Basic " + base64.b64encode(b"ops:pa55").decode()}


# -- system-changing modules on a host with a private /etc ----------------------------------------

_PRIVATE_ETC = (
    "set -e; mkdir -p /run/pv-etc/upper /run/pv-etc/work; "
    "mount -t overlay pv-etc -o lowerdir=/etc,upperdir=/run/pv-etc/upper,workdir=/run/pv-etc/work /etc"
)


@pytest.fixture
def private_host(make_fleet: Any) -> tuple[Any, Any]:
    own = make_fleet(1)
    host = own.hosts[0]
    own.ns_exec(host, _PRIVATE_ETC)
    return own, host


def test_user_group_cron_and_service_on_a_private_etc(tmp_path: Path, private_host: tuple[Any, Any], ssh_options: ConnectOptions) -> None:
    own, host = private_host
    hosts = own.provision_hosts()
    machine_passwd = Path("/etc/passwd").read_text()
    hashed = "$6$pvsalt$" + "x" * 86
    init = (
        "#!/bin/sh\nPID=/run/pvdemo.pid\ncase \"$1\" in\n"
        "  start) setsid sleep 1000 >/dev/null 2>&1 < /dev/null & echo $! > $PID ;;\n"
        "  stop) [ -f $PID ] && kill $(cat $PID) && rm -f $PID ;;\n"
        "  status) [ -f $PID ] && kill -0 $(cat $PID) 2>/dev/null ;;\n"
        "  *) exit 3 ;;\nesac\n"
    )
    own.ns_exec(host, "cat > /etc/init.d/pvdemo && chmod 755 /etc/init.d/pvdemo", input=init)
    tasks = f"""
    - group: {{name: trainers, gid: 4321}}
    - user: {{name: alice, uid: 4321, group: trainers, groups: [users], shell: /bin/bash, comment: Alice, password: '{hashed}'}}
      register: u
    - cron: {{name: nightly sync, minute: "5", hour: "2", user: alice, job: /usr/bin/true, cron_file: pv-sync}}
    - service: {{name: pvdemo, state: started}}
    """
    first = idempotent(tmp_path, hosts, ssh_options, tasks)
    reg = {r.task: r.result for r in first.results}["user"]
    assert reg["uid"] == 4321 and reg["home"] == "/home/alice" and reg["password"] != hashed
    assert hashed not in json.dumps([r.result for r in first.results])
    assert on_host(own, host, "getent passwd alice").strip() == "alice:x:4321:4321:Alice:/home/alice:/bin/bash"
    assert on_host(own, host, "getent shadow alice | cut -d: -f2").strip() == hashed
    assert on_host(own, host, "id -Gn alice").split() == ["trainers", "users"]
    assert on_host(own, host, "cat /etc/cron.d/pv-sync") == "#Ansible: nightly sync\n5 2 * * * alice /usr/bin/true\n"
    assert on_host(own, host, "/etc/init.d/pvdemo status && echo running").strip() == "running"
    stop = ok(run(tmp_path, hosts, ssh_options, "- service: {name: pvdemo, state: stopped}\n- user: {name: alice, state: absent, remove: yes}\n- group: {name: trainers, state: absent}"))
    assert [r.status for r in stop.results] == ["changed", "changed", "changed"]
    assert on_host(own, host, "getent passwd alice || echo gone").strip() == "gone"
    assert Path("/etc/passwd").read_text() == machine_passwd  # the machine's own /etc never changed


def test_apt_sources_and_keys_on_a_private_etc(tmp_path: Path, private_host: tuple[Any, Any], ssh_options: ConnectOptions) -> None:
    own, host = private_host
    hosts = own.provision_hosts()
    machine_sources = sorted(p.name for p in Path("/etc/apt/sources.list.d").iterdir())
    # a throwaway OpenPGP key made on the host (its own GNUPGHOME under /root)
    own.ns_exec(
        host,
        "export GNUPGHOME=/root/gnupg; mkdir -m 700 -p $GNUPGHOME; "
        "gpg --batch --pinentry-mode loopback --passphrase '' --quick-gen-key 'pv test <t@x>' ed25519 sign never "
        ">/dev/null 2>&1; gpg --armor --export > /root/key.asc",
    )
    tasks = """
    - apt_key: {file: /root/key.asc, keyring: /etc/apt/keyrings/pvtest.gpg}
      register: k
    - apt_repository: {repo: "deb [signed-by=/etc/apt/keyrings/pvtest.gpg] http://pkgs.example.invalid/debian trixie main", update_cache: no}
    - deb822_repository:
        name: PV Test
        uris: http://pkgs.example.invalid/cuda
        suites: /
        signed_by: /etc/apt/keyrings/pvtest.gpg
    """
    first = idempotent(tmp_path, hosts, ssh_options, tasks)
    fp = {r.task: r.result for r in first.results}["apt_key"]["fp"]
    assert fp in on_host(own, host, "gpg --show-keys --with-colons /etc/apt/keyrings/pvtest.gpg")
    assert on_host(own, host, "cat /etc/apt/sources.list.d/pkgs_example_invalid_debian.list") == (
        "deb [signed-by=/etc/apt/keyrings/pvtest.gpg] http://pkgs.example.invalid/debian trixie main\n"
    )
    assert on_host(own, host, "cat /etc/apt/sources.list.d/pv-test.sources") == (
        "X-Repolib-Name: PV Test\nSigned-By: /etc/apt/keyrings/pvtest.gpg\nSuites: /\nTypes: deb\n"
        "URIs: http://pkgs.example.invalid/cuda\n"
    )
    gone = ok(run(tmp_path, hosts, ssh_options, """
    - apt_repository: {repo: "deb [signed-by=/etc/apt/keyrings/pvtest.gpg] http://pkgs.example.invalid/debian trixie main", state: absent, update_cache: no}
    - deb822_repository: {name: PV Test, state: absent}
    """))
    assert [r.status for r in gone.results] == ["changed", "changed"]
    assert on_host(own, host, "ls /etc/apt/sources.list.d").split() == machine_sources
    assert sorted(p.name for p in Path("/etc/apt/sources.list.d").iterdir()) == machine_sources


def test_sysctl_and_mount_in_the_hosts_own_namespaces(tmp_path: Path, private_host: tuple[Any, Any], ssh_options: ConnectOptions) -> None:
    own, host = private_host
    hosts = own.provision_hosts()
    # net.* settings belong to the host's network namespace; /etc/sysctl.d is the private /etc
    own.ns_exec(host, "sysctl -q -w net.ipv4.tcp_keepalive_time=7200")
    tasks = """
    - sysctl: {name: net.ipv4.tcp_keepalive_time, value: "600", sysctl_file: /etc/sysctl.d/90-pv.conf, sysctl_set: yes, reload: no}
    - mount: {path: /root/scratch, src: pvscratch, fstype: tmpfs, opts: "size=16m", state: mounted, fstab: /etc/fstab}
    """
    idempotent(tmp_path, hosts, ssh_options, tasks)
    assert on_host(own, host, "sysctl -n net.ipv4.tcp_keepalive_time").strip() == "600"
    assert on_host(own, host, "cat /etc/sysctl.d/90-pv.conf") == "net.ipv4.tcp_keepalive_time=600\n"
    assert "pvscratch /root/scratch tmpfs size=16m 0 0" in on_host(own, host, "cat /etc/fstab")
    assert on_host(own, host, "findmnt -n -o FSTYPE /root/scratch").strip() == "tmpfs"
    # a rented container: /proc/sys read-only. The message says why; ignoreerrors accepts it
    own.ns_exec(host, "mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys")
    task = "- sysctl: {name: net.ipv4.tcp_keepalive_time, value: '300', sysctl_file: /etc/sysctl.d/90-pv.conf, sysctl_set: yes, reload: no}"
    refused = run(tmp_path, hosts, ssh_options, task)
    assert refused.results[0].status == "failed" and "/proc/sys is read-only" in refused.results[0].msg
    accepted = ok(run(tmp_path, hosts, ssh_options, task.replace("reload: no", "reload: no, ignoreerrors: yes")))
    assert "read-only" in accepted.results[0].result["warnings"][0]
    assert on_host(own, host, "cat /etc/sysctl.d/90-pv.conf") == "net.ipv4.tcp_keepalive_time=300\n"
    unmount = ok(run(tmp_path, hosts, ssh_options, "- mount: {path: /root/scratch, state: unmounted}"))
    assert unmount.results[0].status == "changed"
    assert on_host(own, host, "findmnt -n /root/scratch || echo none").strip() == "none"
