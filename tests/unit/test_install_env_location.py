"""Where managed envs go and where later commands look for them (provision/install/
environment.py): the login user's home without become, the system location under become,
`provision_env_root` over both; the lookup finds either, in the order the mode installs to. The
root-owned install itself runs over real sudo on the fleet (tests/fleet/test_rentals_commands.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provision.connection.local import LocalConnection
from provision.errors import ConfigError
from provision.inventory.model import Host
from provision.remote.become import Become, BecomeConnection
from provision.remote.environment import (
    SYSTEM_ENV_ROOT,
    default_env_path,
    env_candidates,
    env_root_of,
    find_env,
)

RUNPOD = {"os": {"provider": {"name": "runpod"}}}


def test_default_location_by_mode_and_override() -> None:
    assert default_env_path({}) == "~/.provision/envs/provision"
    assert default_env_path({}, system=True) == f"{SYSTEM_ENV_ROOT}/provision" == "/opt/provision/envs/provision"
    assert default_env_path({}, "proj", system=True, root="/data/envs/") == "/data/envs/proj"
    assert default_env_path(RUNPOD, system=True).startswith("/workspace/")  # the volume survives a stop


def test_lookup_order_follows_the_mode_and_the_root_var_is_the_only_place() -> None:
    user, system = "~/.provision/envs/provision", "/opt/provision/envs/provision"
    assert env_candidates({}, {}, become=False) == [user, system]
    assert env_candidates({}, {}, become=True) == [system, user]
    assert env_candidates({}, {"provision_env_root": "/srv/envs"}, become=True) == ["/srv/envs/provision"]


def test_env_root_var_must_be_a_host_path() -> None:
    assert env_root_of({"provision_env_root": "~/envs"}) == "~/envs"
    assert env_root_of({}) is None
    with pytest.raises(ConfigError, match="provision_env_root='envs'.*absolute path"):
        env_root_of({"provision_env_root": "envs"})


def _fake_env(path: Path) -> None:
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_text("#!/bin/sh\n")
    (path / "bin" / "python").chmod(0o755)


def test_find_env_returns_the_first_candidate_with_a_python(tmp_path: Path) -> None:
    conn = LocalConnection(Host(name="localhost", address="127.0.0.1", local=True))
    first, second = tmp_path / "a" / "provision", tmp_path / "b" / "provision"
    assert find_env(conn, [str(first), str(second)]) is None
    _fake_env(second)
    assert find_env(conn, [str(first), str(second)]) == str(second)
    _fake_env(first)
    assert find_env(conn, [str(first), str(second)]) == str(first)
    # `~/` is the login user's home, expanded on the host; odd characters stay one word
    odd = tmp_path / "it's $here" / "provision"
    _fake_env(odd)
    assert find_env(conn, [str(tmp_path / "none"), str(odd)]) == str(odd)


@pytest.mark.skipif(os.geteuid() != 0, reason="runs as root here (become mode 'root')")
def test_become_connection_writes_readable_files_and_refuses_env_values(tmp_path: Path) -> None:
    conn = BecomeConnection(LocalConnection(Host(name="localhost", address="127.0.0.1", local=True)), Become("root"))
    target = tmp_path / "deep" / "manifest.json"
    conn.put(b'{"a": 1}\n', str(target), mode=0o644)
    assert target.read_bytes() == b'{"a": 1}\n' and (target.stat().st_mode & 0o777) == 0o644
    assert conn.get(str(target)) == b'{"a": 1}\n'
    previous = os.umask(0o077)  # a strict login umask: the env must still be readable by others
    try:
        made = conn.run(f"mkdir {tmp_path}/d && touch {tmp_path}/d/f && stat -c %a {tmp_path}/d/f")
        plain = conn.inner.run(f"touch {tmp_path}/g && stat -c %a {tmp_path}/g")
    finally:
        os.umask(previous)
    assert plain.stdout.strip() == "600"  # what the login umask alone gives
    assert made.ok and made.stdout.strip() == "644"
    with pytest.raises(ValueError, match="stdin"):
        conn.run("true", env={"SECRET": "x"})
    with pytest.raises(OSError, match="reading"):
        conn.get(str(tmp_path / "missing"))
