"""Fixtures for tests against the real SSH test fleet (see tests/fleet/fleet.py, docs/testing.md).

- `fleet`: 8 hosts gpu1..gpu8 for the whole session. Treat it as shared: do not change its host
  keys, passwords, links or python; use `make_fleet` for that.
- `make_fleet(n, **kwargs)`: a fleet of any size (up to 200) of your own, stopped after the test.
- `ssh_options`: ConnectOptions isolated from the user's ssh config (an empty ssh_config file),
  known_hosts policy accept-new into the per-test PROVISION_KNOWN_HOSTS.
- `connect`: opens an SSHConnection and closes it after the test.
- `rentals`: one host of every rental-like kind (tests/fleet/kinds.py, tests/fleet/rentals.py)
  for the whole session, with an inventory, an ssh_config and a CLI runner. Shared: don't change
  its keys, users or python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fleet import Fleet, FleetError, preflight
from rentals import Rentals, start_rentals

from provision.connection.base import ConnectOptions
from provision.connection.ssh import SSHConnection
from provision.inventory.model import Host


def _start(size: int, **kwargs) -> Fleet:
    reason = preflight()
    if reason:
        pytest.skip(f"SSH test fleet unavailable: {reason}")
    try:
        return Fleet(size, **kwargs).start()
    except FleetError as exc:
        pytest.fail(f"could not start a {size}-host test fleet: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def fleet() -> Iterator[Fleet]:
    started = _start(8)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def make_fleet() -> Iterator[Callable[..., Fleet]]:
    made: list[Fleet] = []

    def make(size: int = 1, **kwargs) -> Fleet:
        made.append(_start(size, **kwargs))
        return made[-1]

    try:
        yield make
    finally:
        for f in made:
            f.stop()


@pytest.fixture
def ssh_config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ssh") / "config"
    path.write_text("")  # given explicitly, so ~/.ssh/config and /etc/ssh/ssh_config are skipped
    return path


@pytest.fixture
def ssh_options(ssh_config_file: Path) -> ConnectOptions:
    return ConnectOptions(
        known_hosts="accept-new", connect_timeout=5.0, ssh_config=str(ssh_config_file)
    )


@pytest.fixture
def connect(ssh_options: ConnectOptions) -> Iterator[Callable[..., SSHConnection]]:
    """connect(host, options=None) -> an SSHConnection closed at the end of the test."""
    opened: list[SSHConnection] = []

    def open_one(host: Host, options: ConnectOptions | None = None) -> SSHConnection:
        conn = SSHConnection(host, options or ssh_options)
        opened.append(conn)
        return conn

    try:
        yield open_one
    finally:
        for conn in opened:
            conn.close()


@pytest.fixture(scope="session")
def rentals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rentals]:
    reason = preflight()
    if reason:
        pytest.skip(f"SSH test fleet unavailable: {reason}")
    try:
        started = start_rentals(tmp_path_factory.mktemp("rentals"))
    except FleetError as exc:
        pytest.fail(f"could not start the rental-like fleet: {exc}", pytrace=False)
    try:
        yield started
    finally:
        started.stop()
