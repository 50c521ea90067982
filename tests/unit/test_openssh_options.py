"""The OpenSSH data plane's command lines and eligibility (provision/connection/openssh_args.py),
checked with `ssh -G` (how ssh itself reads them) and keys made by ssh-keygen; no host needed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from provision.connection import openssh_args as args
from provision.connection.base import ConnectOptions
from provision.connection.factory import connect
from provision.inventory.model import Host

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client")


def host(**kw) -> Host:
    fields = dict(name="gpu1", address="198.18.0.5", port=2222, user="root")
    fields.update(kw)
    return Host(**fields)


def resolved(h: Host, options: ConnectOptions, private_dir: Path) -> dict[str, str]:
    """What ssh makes of our arguments: `ssh -G` prints the effective options, lowercased."""
    (private_dir / "config").write_text(args.config_text(options, str(private_dir)))
    argv = ["ssh", "-G", *args.target_args(h, options, str(private_dir)), "--", h.connect_address]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)


def keypair(path: Path, passphrase: str = "", fmt: str | None = None) -> Path:
    cmd = [
        "ssh-keygen",
        "-q",
        "-t",
        "ed25519" if fmt is None else "rsa",
        "-N",
        passphrase,
        "-f",
        str(path),
    ]
    if fmt:
        cmd += ["-b", "2048", "-m", fmt]
    subprocess.run(cmd, check=True)
    return path


# -- options -------------------------------------------------------------------------------------
def test_accept_new_lists_the_project_file_first_then_the_users_then_extras(
    tmp_path, provision_env
):
    extra = tmp_path / "dir with space" / "100%.known"
    options = ConnectOptions(known_hosts="accept-new", extra_known_hosts=[str(extra)], connect_timeout=2.5,
                             keepalive=5, keepalive_count=4, ssh_config=os.devnull)  # fmt: skip
    seen = resolved(host(), options, tmp_path)
    assert seen["stricthostkeychecking"] == "accept-new"
    # first-seen keys go to the FIRST file: provision's own, never ~/.ssh/known_hosts
    assert (
        seen["userknownhostsfile"]
        == f"{provision_env.known_hosts} {provision_env.user_known_hosts} {extra}"
    )
    assert seen["hashknownhosts"] == "no" and seen["batchmode"] == "yes"
    assert (seen["connecttimeout"], seen["serveraliveinterval"], seen["serveralivecountmax"]) == (
        "3",
        "5",
        "4",
    )
    assert seen["ciphers"].startswith("aes128-gcm@openssh.com,aes256-gcm@openssh.com,")
    assert "chacha20-poly1305@openssh.com" in seen["ciphers"]  # the defaults stay, after GCM
    assert (seen["user"], seen["hostname"], seen["port"]) == ("root", "198.18.0.5", "2222")
    assert seen["loglevel"] == "ERROR" and seen["clearallforwardings"] == "yes"


def test_gcm_and_curve25519_first_unless_the_users_config_chooses(tmp_path, provision_env):
    plain = tmp_path / "plain_config"
    plain.write_text("Host gpu*\n  User root\n  # Ciphers aes256-ctr (a comment)\n")
    seen = resolved(host(), ConnectOptions(ssh_config=str(plain)), tmp_path)
    assert seen["kexalgorithms"].startswith("curve25519-sha256,curve25519-sha256@libssh.org,")
    assert "sntrup761x25519-sha512@openssh.com" in seen["kexalgorithms"]  # still offered, after
    assert seen["ciphers"].startswith("aes128-gcm@openssh.com,")
    own = tmp_path / "own_config"
    own.write_text("Host *\n  KexAlgorithms sntrup761x25519-sha512@openssh.com\n  ciphers=aes256-ctr\n")
    seen = resolved(host(), ConnectOptions(ssh_config=str(own)), tmp_path)
    assert seen["kexalgorithms"] == "sntrup761x25519-sha512@openssh.com"
    assert seen["ciphers"] == "aes256-ctr"


def test_strict_and_off(tmp_path, provision_env):
    strict = resolved(host(), ConnectOptions(known_hosts="strict", ssh_config=os.devnull), tmp_path)
    assert strict["stricthostkeychecking"] == "true"  # -G prints yes as true
    off = resolved(host(), ConnectOptions(known_hosts="off", ssh_config=os.devnull), tmp_path)
    assert off["stricthostkeychecking"] == "false"
    # a throwaway file in the private dir: nothing learnt with checking off is kept
    assert off["userknownhostsfile"] == str(tmp_path / "known_hosts")
    with pytest.raises(ValueError, match="--known-hosts must be one of"):
        args.known_hosts_options(ConnectOptions(known_hosts="maybe"), str(tmp_path))


def test_key_file_means_only_that_key_and_no_key_means_ssh_defaults(tmp_path):
    key = keypair(tmp_path / "id")
    argv = args.target_args(host(key_file=str(key)), ConnectOptions(), str(tmp_path))
    assert argv[argv.index("-i") + 1] == str(key)
    assert argv[argv.index("-i") + 2 : argv.index("-i") + 4] == ["-o", "IdentitiesOnly=yes"]
    bare = args.target_args(host(user=None, port=None), ConnectOptions(), str(tmp_path))
    assert "-i" not in bare and "-l" not in bare and "-p" not in bare
    assert bare[:2] == ["-F", str(tmp_path / "config")]


def test_ssh_config_aliases_and_jump_chain_resolve_through_the_users_config(tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text(
        "Host gate\n  HostName 198.18.0.1\n  User jumper\n  StrictHostKeyChecking no\n"
        "Host inner\n  HostName 198.18.9.9\n  Port 2200\n"
    )
    options = ConnectOptions(known_hosts="strict", ssh_config=str(config))
    seen = resolved(Host(name="inner", address="inner", proxy_jump="first,gate"), options, tmp_path)
    assert (seen["hostname"], seen["port"]) == ("198.18.9.9", "2200")
    assert seen["proxyjump"] == "first,gate"
    # our policy wins over the user's config: jump hops read it from the same generated -F file
    assert seen["stricthostkeychecking"] == "true"
    gate = subprocess.run(["ssh", "-G", "-F", str(tmp_path / "config"), "gate"], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    assert "hostname 198.18.0.1" in gate and "user jumper" in gate
    assert "stricthostkeychecking true" in gate and "batchmode yes" in gate


def test_master_and_session_command_lines(tmp_path):
    h = host()
    master = args.master_argv(h, ConnectOptions(), str(tmp_path))
    socket = str(tmp_path / "m")
    assert master[:4] == ["ssh", "-N", "-S", socket] and "-f" not in master
    assert "ControlMaster=yes" in master and "ControlPersist=no" in master
    assert f"KnownHostsCommand={tmp_path}/record-key %t %K" in master
    assert master[-2:] == ["--", "198.18.0.5"]
    session = args.session_argv(h, ConnectOptions(), str(tmp_path), "echo hi")
    assert session[:5] == ["ssh", "-S", socket, "-o", "ControlMaster=no"]
    assert session[-3:] == ["--", "198.18.0.5", "echo hi"]


def test_private_dir_is_0700_and_short():
    from provision.connection.openssh import _private_dir

    where = _private_dir()
    try:
        assert os.stat(where).st_mode & 0o777 == 0o700
        assert len(os.path.join(where, "m")) < 100
    finally:
        os.rmdir(where)


# -- eligibility ---------------------------------------------------------------------------------
def test_encrypted_keys_are_recognised_in_openssh_and_pem_format(tmp_path):
    assert not args.key_is_encrypted(keypair(tmp_path / "plain"))
    assert args.key_is_encrypted(keypair(tmp_path / "locked", "s3cret"))
    assert not args.key_is_encrypted(keypair(tmp_path / "pem", fmt="PEM"))
    assert args.key_is_encrypted(keypair(tmp_path / "pem-locked", "s3cret", fmt="PEM"))


def test_who_gets_openssh_and_who_paramiko(tmp_path, monkeypatch):
    plain = str(keypair(tmp_path / "plain"))
    locked = str(keypair(tmp_path / "locked", "s3cret"))
    options = ConnectOptions()
    monkeypatch.delenv(args.CLIENT_ENV, raising=False)
    assert args.openssh_unusable(host(key_file=plain), options) is None
    assert "encrypted" in args.openssh_unusable(host(key_file=locked), options)
    assert "password" in args.openssh_unusable(host(), ConnectOptions(password_env="PW"))
    assert "password" in args.openssh_unusable(host(vars={"password_env": "PW"}), options)
    assert "passphrase" in args.openssh_unusable(
        host(key_file=plain), ConnectOptions(passphrase_env="PP")
    )
    assert "cannot be read" in args.openssh_unusable(host(key_file=str(tmp_path / "nope")), options)
    assert (
        type(connect(host(key_file=plain), options, data_plane=True)).__name__
        == "OpenSSHConnection"
    )
    assert (
        type(connect(host(key_file=plain), options)).__name__ == "SSHConnection"
    )  # not the data plane
    assert (
        type(connect(host(key_file=locked), options, data_plane=True)).__name__ == "SSHConnection"
    )
    monkeypatch.setenv(args.CLIENT_ENV, "paramiko")
    assert args.openssh_unusable(host(key_file=plain), options) == "PROVISION_SSH_CLIENT=paramiko"
    assert type(connect(host(key_file=plain), options, data_plane=True)).__name__ == "SSHConnection"
    monkeypatch.delenv(args.CLIENT_ENV)
    monkeypatch.setenv("PATH", str(tmp_path))  # no ssh binary
    args._version_of.cache_clear()
    try:
        assert args.openssh_unusable(host(key_file=plain), options) == "no ssh binary on PATH"
    finally:
        monkeypatch.undo()
        args._version_of.cache_clear()


def test_the_openssh_transport_imports_no_paramiko_fabric_or_invoke():
    code = (
        "import sys, provision.connection.openssh, provision.connection.factory, provision.staging.stage\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('paramiko', 'fabric', 'invoke')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_dirs_of_killed_masters_are_swept_live_ones_kept(tmp_path):
    import socket

    from provision.connection.openssh import _sweep

    dead, live, young = (tmp_path / f"pvssh-{n}" for n in ("dead", "live", "young"))
    for d in (dead, live, young):
        d.mkdir()
    (dead / "m").touch()  # a socket file nobody listens on any more
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(live / "m"))
    listener.listen()
    old = time.time() - 7200
    for d in (dead, live):
        os.utime(d, (old, old))
    try:
        _sweep(str(tmp_path))
    finally:
        listener.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pvssh-live", "pvssh-young"]


def test_the_dir_of_a_provision_that_is_gone_is_swept_at_once(tmp_path):
    """A killed CLI's dir (its pid in the name, the process gone) goes on the next run, not an
    hour later; a running process's dir stays, as does one whose master still answers."""
    from provision.connection.openssh import _sweep

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no longer exists (reaped)
    killed = tmp_path / f"pvssh-{gone.pid}-abc123"
    running = tmp_path / f"pvssh-{os.getpid()}-def456"
    for d in (killed, running):
        d.mkdir()
        (d / "m").touch()
    _sweep(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [running.name]


def test_the_ssh_version_is_asked_once_per_binary_and_again_after_an_upgrade(tmp_path, monkeypatch):
    """`ssh -V` costs every CLI start ~30 ms before the handshake: it is remembered on disk, keyed
    by the binary, and a changed binary is asked again."""
    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "ssh"
    fake.parent.mkdir()

    def install(version: str) -> None:
        fake.write_text(f'#!/bin/sh\necho x >> "{calls}"\necho "OpenSSH_{version}, OpenSSL 3.0" >&2\n')
        fake.chmod(0o755)

    install("9.7p1")
    monkeypatch.setenv("PATH", str(fake.parent))
    monkeypatch.setenv("PROVISION_HOME", str(tmp_path / "state"))
    try:
        args._version_of.cache_clear()
        assert args.client_version() == (9, 7)
        args._version_of.cache_clear()  # a new provision process
        assert args.client_version() == (9, 7)
        assert calls.read_text().count("x") == 1
        install("10.20p1")  # an upgrade: another size (and mtime)
        args._version_of.cache_clear()
        assert args.client_version() == (10, 20)
        assert calls.read_text().count("x") == 2
        (tmp_path / "state" / "ssh-version").write_text("garbage")
        args._version_of.cache_clear()
        assert args.client_version() == (10, 20)  # a damaged memo is asked again
        assert calls.read_text().count("x") == 3
    finally:
        monkeypatch.undo()
        args._version_of.cache_clear()


def test_the_stage_cli_begins_the_handshake_before_its_heavy_imports(tmp_path):
    """`provision stage` spawns the OpenSSH master before it imports the staging stack and rich
    (~0.15 s of a run), so those overlap the handshake. Port 1 on loopback refuses: the run
    then fails as unreachable, which is all this needs."""
    data = tmp_path / "data" / "c"
    data.mkdir(parents=True)
    (data / "a.txt").write_text("a")
    seen = tmp_path / "seen"
    code = (
        "import subprocess, sys\n"
        "real = subprocess.Popen.__init__\n"
        "def spy(self, argv, *a, **k):\n"
        "    if '-N' in argv:\n"
        "        heavy = sorted(m for m in ('rich', 'provision.staging.stage') if m in sys.modules)\n"
        f"        open({str(seen)!r}, 'a').write(repr(heavy) + '\\n')\n"
        "    real(self, argv, *a, **k)\n"
        "subprocess.Popen.__init__ = spy\n"
        "from provision.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = dict(os.environ, HOME=str(tmp_path), PROVISION_HOME=str(tmp_path / "state"))
    env.pop(args.CLIENT_ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", code, "stage", str(tmp_path / "data"), "root@127.0.0.1:1",
         "--known-hosts", "off", "--connect-timeout", "2", "--ssh-config", os.devnull, "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 4, done.stderr  # unreachable: refused before the stage began
    entry = json.loads(done.stdout)["hosts"]["root@127.0.0.1:1"]
    assert entry["unreachable"] and "refused" in entry["error"], entry
    assert "resume" not in entry["error"]  # nothing was staged there to resume
    assert seen.read_text().splitlines()[0] == "[]", seen.read_text()
