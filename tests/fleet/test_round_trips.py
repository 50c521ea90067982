"""Round trips per host of the control plane (issue 30), counted by the delay proxy in front of a
fleet host's sshd (tests/fleet/delay_proxy.py, RTT 0: counts only, never timings)."""

from __future__ import annotations

import dataclasses

import pytest
from delay_proxy import DelayProxy

from provision.connection import openssh_kept as kept
from provision.connection.openssh import OpenSSHConnection
from provision.remote.executor import ExecutorConnection


@pytest.fixture
def proxied(make_fleet, ssh_options):
    """(the host behind a counting proxy, options keeping its OpenSSH master, the proxy)."""
    own = make_fleet(1)
    fh = own.hosts[0]
    proxy = DelayProxy({fh.name: (fh.address, fh.port)}, 0.0)
    host = fh.as_host(address="127.0.0.1", port=proxy.ports[fh.name])
    options = dataclasses.replace(ssh_options, persist=30)
    yield host, options, proxy
    kept.disconnect([host.name])


def test_an_executor_over_a_kept_connection_costs_one_round_trip_per_command(proxied):
    host, options, proxy = proxied
    with ExecutorConnection(OpenSSHConnection(host, options)) as warm:  # the master, the bundle
        assert warm.run("true").ok
    proxy.reset()
    with ExecutorConnection(OpenSSHConnection(host, options)) as conn:  # a run while it is kept
        first = conn.run("echo one; exit 3")
        assert (first.exit_code, first.stdout) == (3, "one\n")
        assert "PROVISION_STDIN_HEAD" not in conn.run("env").stdout  # the carrier is no command's
        assert conn.run("cat", stdin=b"typed\n").stdout == "typed\n"
        assert conn.started == 1
    # the session's open, its exec carrying the first command, one per later command, its close:
    # the first command waits for no stdin (sshd opens it only after the exec's reply)
    assert proxy.trips[host.name] == 1 + 1 + 2 + 1, proxy.trips
