"""Connections kept across runs (connection/openssh_kept.py): which master a connection may
reuse, the per-user directory's checks, the CLI's --persist and what picks OpenSSH for it.
The masters themselves run against real hosts in tests/fleet/test_kept_connections.py."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import stat

import pytest

from provision.cli.common import add_common_options, connect_options
from provision.connection import openssh_args as args
from provision.connection import openssh_kept as kept
from provision.connection.base import ConnectOptions
from provision.connection.factory import connect
from provision.inventory.model import Host

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client")


def host(**kw) -> Host:
    fields = dict(name="gpu1", address="198.18.0.5", port=2222, user="root")
    fields.update(kw)
    return Host(**fields)


def test_a_kept_master_is_shared_only_by_the_very_same_login(tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text("")
    base = ConnectOptions(persist=60, ssh_config=str(config))
    same = kept.key(host(), base)
    assert kept.key(host(), dataclasses.replace(base)) == same
    assert kept.key(host(name="alias-for-the-same"), base) == same  # the login, not the name
    others = [
        kept.key(host(user="ubuntu"), base),
        kept.key(host(port=22), base),
        kept.key(host(address="198.18.0.6"), base),
        kept.key(host(key_file=str(tmp_path / "id")), base),
        kept.key(host(proxy_jump="jump"), base),
        kept.key(host(), dataclasses.replace(base, known_hosts="strict")),
        kept.key(host(), dataclasses.replace(base, known_hosts="off")),
        kept.key(host(), dataclasses.replace(base, extra_known_hosts=[str(tmp_path / "kh")])),
        kept.key(host(), dataclasses.replace(base, keepalive=5)),
    ]
    assert same not in others and len(set(others)) == len(others)
    config.write_text("Host gpu1\n  HostName 198.18.0.9\n")  # an edited ssh config: another master
    assert kept.key(host(), base) != same


def test_the_per_user_directory_is_0700_and_refused_when_anyone_else_may_enter(tmp_path, monkeypatch):
    where = tmp_path / "kept"
    monkeypatch.setenv(kept.DIR_ENV, str(where))
    assert kept.checked_base() == str(where)
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    folder = kept.folder(host(), ConnectOptions(persist=60))
    assert os.path.dirname(folder) == str(where) and stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    where.chmod(0o755)
    with pytest.raises(kept.KeptDirError, match="mode 0700"):
        kept.checked_base()
    shutil.rmtree(where)
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    where.symlink_to(target)  # a planted link: its sockets could be anyone's
    with pytest.raises(kept.KeptDirError, match="not a directory"):
        kept.checked_base()
    assert kept.kept() == []  # nothing listed (nor ended) through it


def test_disconnect_matches_name_address_and_login_and_clears_dead_folders(tmp_path, monkeypatch):
    monkeypatch.setenv(kept.DIR_ENV, str(tmp_path / "kept"))
    options = ConnectOptions(persist=60)
    a = kept.folder(host(), options)
    kept.record_target(a, host(), "root@198.18.0.5:2222")
    b = kept.folder(host(name="gpu2", address="198.18.0.7"), options)
    kept.record_target(b, host(name="gpu2", address="198.18.0.7"), "root@198.18.0.7:2222")
    entries = {e.name: e for e in kept.kept()}
    assert set(entries) == {"gpu1", "gpu2"}
    assert all(entries["gpu1"].matches(t) for t in ("gpu1", "198.18.0.5", "root@198.18.0.5:2222"))
    assert not entries["gpu1"].matches("198.18.0.7") and not entries["gpu1"].matches("gpu")
    assert kept.disconnect(["gpu2"]) == []  # no master ran there: nothing ended...
    assert not os.path.exists(b) and os.path.exists(a)  # ...but its folder is cleared


def test_master_command_line_keeps_it_only_when_asked(tmp_path):
    assert "ControlPersist=no" in args.master_argv(host(), ConnectOptions(), str(tmp_path))
    assert "ControlPersist=60" in args.master_argv(host(), ConnectOptions(), str(tmp_path), 60)
    assert "ControlPersist=1" in args.master_argv(host(), ConnectOptions(), str(tmp_path), 0.2)


def test_kept_connections_put_the_control_plane_on_openssh(tmp_path, monkeypatch):
    monkeypatch.delenv(args.CLIENT_ENV, raising=False)
    assert type(connect(host(), ConnectOptions(persist=60))).__name__ == "OpenSSHConnection"
    assert type(connect(host(), ConnectOptions(persist=0))).__name__ == "SSHConnection"
    assert connect(host(), ConnectOptions(persist=60)).kept  # type: ignore[attr-defined]
    assert not connect(host(), ConnectOptions(persist=60), data_plane=True).kept  # type: ignore[attr-defined]
    # where ssh cannot log in unattended, paramiko as before (nothing kept)
    assert type(connect(host(), ConnectOptions(persist=60, password_env="PW"))).__name__ == "SSHConnection"


def test_persist_defaults_to_60_in_the_cli_and_refuses_negative_values():
    parser = argparse.ArgumentParser()
    add_common_options(parser)
    assert connect_options(parser.parse_args([])).persist == 60.0
    assert connect_options(parser.parse_args(["--persist", "0"])).persist == 0.0
    assert connect_options(parser.parse_args([])).executor is False
    assert connect_options(parser.parse_args(["--executor"])).executor is True
    with pytest.raises(SystemExit):
        connect_options(parser.parse_args(["--persist", "-1"]))


def test_the_sweep_of_dead_private_dirs_never_takes_the_kept_directory(tmp_path, monkeypatch):
    from provision.connection.openssh import _sweep

    monkeypatch.delenv(kept.DIR_ENV, raising=False)
    name = os.path.basename(kept.base_dir())
    where = tmp_path / name
    where.mkdir(mode=0o700)
    os.utime(where, (0, 0))  # as old as can be, no `m` socket in it
    _sweep(str(tmp_path), older_than=0)
    assert where.exists()


def test_provision_disconnect_with_nothing_kept(tmp_path, monkeypatch, capsys):
    from provision.cli.main import main

    monkeypatch.setenv(kept.DIR_ENV, str(tmp_path / "kept"))
    assert main(["disconnect", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ended": []}
    assert main(["disconnect", "gpu1"]) == 0
    assert "no kept connection to gpu1" in capsys.readouterr().err
