"""The transport against real sshd hosts: SSHConnection, Agent and for_each_host over real SSH.

Failure injection (wrong key, dead address, changed host key, no python3, link down) comes from
the fleet helpers; every check of host state that must not trust SSH goes through ns_exec.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import random
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import truth
import yaml
from fleet import Fleet, ShapingUnavailable, generate_keypair

from provision.connection.base import ConnectOptions
from provision.connection.ssh import SSHConnection
from provision.errors import AgentError, AuthError, HostKeyError, UnreachableError
from provision.inventory.model import Host
from provision.parallel import for_each_host
from provision.remote.agent import Agent


def _hostname(options: ConnectOptions):
    def work(host: Host) -> str:
        with SSHConnection(host, options) as conn:
            return conn.run("hostname").stdout.strip()

    return work


# -- fan-out ---------------------------------------------------------------------------------
def test_eight_hosts_in_parallel_each_answer_with_their_own_hostname(fleet: Fleet, ssh_options):
    outcomes = for_each_host(fleet.provision_hosts(), _hostname(ssh_options), forks=8)

    assert {name: o.message for name, o in outcomes.items() if not o.ok} == {}
    assert {name: o.value for name, o in outcomes.items()} == {
        f"gpu{i}": f"gpu{i}" for i in range(1, 9)
    }


def test_hosts_run_debian_python_not_the_controllers_pyenv(fleet: Fleet, connect):
    conn = connect(fleet.hosts[0].as_host())
    result = conn.run("command -v python3; python3 -c 'import sys; print(sys.version.split()[0])'")
    assert result.ok, result.stderr
    path, version = result.stdout.split()
    # the python3 the host's own session PATH finds (this machine's /usr), never pyenv's
    assert ".pyenv" not in path and path.startswith("/usr/")
    assert (
        version
        == subprocess.run(
            [path, "-c", "import sys; print(sys.version.split()[0])"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    assert conn.run("test -e /root/.pyenv").exit_code == 1  # the controller's /root is not visible


def test_inventory_written_by_the_fleet_reaches_its_hosts(fleet: Fleet, tmp_path, ssh_options):
    doc = yaml.safe_load(fleet.write_inventory(tmp_path / "hosts.yml", fmt="yaml").read_text())
    ini = fleet.write_inventory(tmp_path / "hosts.ini").read_text().splitlines()
    hosts = doc["all"]["children"]["gpus"]["hosts"]
    assert list(hosts) == [h.name for h in fleet.hosts]
    assert ini[0] == "[gpus]" and len(ini) == 1 + len(fleet.hosts)
    assert f"ansible_host={fleet.hosts[2].address}" in ini[3]
    vars3 = hosts["gpu3"]
    host = Host(
        name="gpu3",
        address=vars3["ansible_host"],
        port=vars3["ansible_port"],
        user=vars3["ansible_user"],
        key_file=vars3["ansible_ssh_private_key_file"],
    )
    assert _hostname(ssh_options)(host) == "gpu3"


# -- run / stream ------------------------------------------------------------------------------
def test_run_reports_exit_code_stdout_and_stderr_separately(fleet: Fleet, connect):
    conn = connect(fleet.hosts[1].as_host())

    result = conn.run("echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr, result.ok) == (
        3,
        "out\n",
        "err\n",
        False,
    )

    ok = conn.run("cat", stdin=b"from stdin\n")
    assert (ok.exit_code, ok.stdout, ok.stderr, ok.ok) == (0, "from stdin\n", "", True)

    # killed by a signal: a failure (128+9, as a shell reports it), not "connection lost"
    assert conn.run("kill -9 $$").exit_code == 137
    assert conn.run("true").ok


def test_run_timeout_returns_124_instead_of_hanging(fleet: Fleet, connect):
    conn = connect(fleet.hosts[1].as_host())
    result = conn.run("sleep 30", timeout=1)
    assert result.exit_code == 124
    assert conn.run("echo still usable").stdout == "still usable\n"


def test_stream_feeds_megabytes_to_stdin(fleet: Fleet, connect):
    conn = connect(fleet.hosts[2].as_host())
    rng = random.Random(7)
    chunks = [rng.randbytes(256 * 1024) for _ in range(16)]  # 4 MiB
    digest = hashlib.sha256(b"".join(chunks)).hexdigest()
    lines: list[str] = []

    result = conn.stream("sha256sum; echo done", source=iter(chunks), on_stdout_line=lines.append)

    assert result.ok, result.stderr
    assert lines == [f"{digest}  -", "done"]

    from_file = conn.stream("wc -c", source=io.BytesIO(b"".join(chunks)))
    assert from_file.stdout.strip() == str(4 * 1024 * 1024)


def test_stream_hands_over_lines_while_the_command_still_runs(fleet: Fleet, connect):
    """The command waits for input that is only sent after its first line reached the callback."""
    conn = connect(fleet.hosts[2].as_host())
    first_seen = threading.Event()
    lines: list[str] = []

    def on_line(line: str) -> None:
        lines.append(line)
        if line == "ready":
            first_seen.set()

    def source():
        first_seen.wait(timeout=20)
        yield b"reply-after-ready\n" if first_seen.is_set() else b"reply-too-early\n"

    result = conn.stream(
        "echo ready; read answer; echo got $answer; printf 'no newline'",
        source=source(),
        on_stdout_line=on_line,
        env={"LC_ALL": "C"},
    )
    assert result.ok, result.stderr
    assert lines == ["ready", "got reply-after-ready", "no newline"]


# -- files -------------------------------------------------------------------------------------
def test_put_get_round_trip_with_spaces_and_quotes_in_the_path(fleet: Fleet, connect):
    conn = connect(fleet.hosts[3].as_host())
    data = bytes(range(256)) * 4096 + os.urandom(1000)
    path = '/root/autodl-tmp/dir with spaces/it\'s "quoted" $HOME `x`.bin'

    conn.put(data, path, mode=0o600)

    assert conn.get(path) == data
    # checked outside SSH: the literal name exists, nothing was expanded
    listing = fleet.ns_exec(fleet.hosts[3], ["stat", "-c", "%a %s", path]).stdout.split()
    assert listing == ["600", str(len(data))]
    leftovers = fleet.ns_exec(
        fleet.hosts[3], ["ls", "-A", "/root/autodl-tmp/dir with spaces"]
    ).stdout
    assert leftovers.splitlines() == ['it\'s "quoted" $HOME `x`.bin']  # no temp file left behind


def test_put_to_home_relative_path_and_get_of_missing_file(fleet: Fleet, connect):
    conn = connect(fleet.hosts[3].as_host())
    conn.put(b"hello\n", "~/sub dir/hello.txt")
    assert fleet.ns_exec(fleet.hosts[3], ["cat", "/root/sub dir/hello.txt"]).stdout == "hello\n"
    with pytest.raises(OSError, match="gpu4: reading /root/nope failed"):
        conn.get("/root/nope")


# -- auth and reachability -------------------------------------------------------------------------
def test_wrong_key_fails_only_that_host(fleet: Fleet, ssh_options, tmp_path):
    wrong_key = tmp_path / "wrong_ed25519"
    generate_keypair(wrong_key)
    hosts = fleet.provision_hosts()
    hosts[1].key_file = str(wrong_key)

    outcomes = for_each_host(hosts, _hostname(ssh_options), forks=8)

    assert isinstance(outcomes["gpu2"].error, AuthError)
    assert "permission denied for root@" in outcomes["gpu2"].message
    assert {n: o.value for n, o in outcomes.items() if n != "gpu2"} == {
        h.name: h.name for h in fleet.hosts if h.name != "gpu2"
    }


def test_dead_address_is_unreachable_within_the_connect_timeout_others_succeed(
    fleet: Fleet, ssh_config_file
):
    options = ConnectOptions(
        known_hosts="accept-new", connect_timeout=2.0, ssh_config=str(ssh_config_file)
    )
    dead = Host(name="dead", address=fleet.dead_address(), user="root", key_file=fleet.key_file)
    hosts = [*fleet.provision_hosts()[:3], dead]
    start = time.monotonic()

    outcomes = for_each_host(hosts, _hostname(options), forks=4)

    elapsed = time.monotonic() - start
    assert isinstance(outcomes["dead"].error, UnreachableError), outcomes["dead"].message
    assert outcomes["dead"].unreachable
    assert "no answer within 2s" in outcomes["dead"].message
    assert [o.value for n, o in outcomes.items() if n != "dead"] == ["gpu1", "gpu2", "gpu3"]
    assert elapsed < 2.0 + 20  # sanity bound only: it did not wait for retries/TCP's minutes


def test_refused_port_is_unreachable(fleet: Fleet, ssh_options):
    host = fleet.hosts[0].as_host(name="closed", port=2222)
    with pytest.raises(UnreachableError, match="closed: root@.*:2222"):
        _hostname(ssh_options)(host)


def test_link_down_mid_session_is_unreachable_not_a_hang(make_fleet, ssh_config_file):
    small = make_fleet(1)
    options = ConnectOptions(
        known_hosts="accept-new", connect_timeout=2.0, ssh_config=str(ssh_config_file)
    )
    with SSHConnection(small.hosts[0].as_host(), options) as conn:
        assert conn.run("hostname").stdout == "gpu1\n"
        small.link_down(small.hosts[0])
        with pytest.raises(UnreachableError, match="gpu1: connection lost"):
            conn.run("hostname", timeout=2)
        small.link_up(small.hosts[0])
    with SSHConnection(small.hosts[0].as_host(), options) as conn:
        assert conn.run("hostname").stdout == "gpu1\n"


def test_shaping_puts_qdiscs_on_both_ends_of_the_link(make_fleet, connect):
    small = make_fleet(1)
    host = small.hosts[0]
    small.shape(host, rate="50mbit", delay=None)
    try:
        root_side = subprocess.run(
            ["tc", "qdisc", "show", "dev", host.veth], capture_output=True, text=True
        ).stdout
        host_side = small.ns_exec(host, "tc qdisc show dev eth0").stdout
        assert "tbf" in root_side and "50Mbit" in root_side
        assert "tbf" in host_side and "50Mbit" in host_side
        conn = connect(host.as_host())
        payload = os.urandom(1 << 20)
        conn.put(payload, "/root/autodl-tmp/shaped.bin")
        assert conn.get("/root/autodl-tmp/shaped.bin") == payload
    finally:
        small.unshape(host)
    assert (
        "tbf"
        not in subprocess.run(
            ["tc", "qdisc", "show", "dev", host.veth], capture_output=True, text=True
        ).stdout
    )
    if small.netem_available:
        small.shape(host, rate="100mbit", delay="5ms")
        assert "netem" in small.ns_exec(host, "tc qdisc show dev eth0").stdout
        small.unshape(host)
    else:
        with pytest.raises(ShapingUnavailable, match="netem"):
            small.shape(host, rate="100mbit", delay="5ms")


# -- host keys -------------------------------------------------------------------------------------
def test_accept_new_records_the_key_in_the_project_file_only(fleet: Fleet, connect, provision_env):
    host = fleet.hosts[4]
    assert connect(host.as_host()).run("true").ok
    assert provision_env.known_hosts.read_text() == host.known_hosts_line()
    assert not provision_env.user_known_hosts.exists()  # the user's ssh file is theirs


def test_known_hosts_parsed_once_for_a_whole_fleet(
    fleet: Fleet, connect, provision_env, monkeypatch: pytest.MonkeyPatch
):
    """Every host of the fleet, twice, from one process, over real SSH (connection/hostkeys.py):
    the known_hosts files are parsed at most once while only this process records keys, and
    every key lands in the file. (A changed key is still refused:
    test_changed_host_key_refused_under_strict_and_accept_new_allowed_under_off.)"""
    import paramiko

    from provision.connection import hostkeys

    monkeypatch.setattr(hostkeys, "_PARSED", hostkeys._ParsedFiles())  # this test's process view
    loads: list[str] = []
    real_load = paramiko.HostKeys.load
    monkeypatch.setattr(paramiko.HostKeys, "load", lambda self, f: (loads.append(f), real_load(self, f))[1])
    for _ in range(2):
        with ThreadPoolExecutor(len(fleet.hosts)) as pool:
            names = list(pool.map(lambda h: connect(h.as_host()).run("hostname").stdout.strip(), fleet.hosts))
        assert names == [h.name for h in fleet.hosts]
    assert len(loads) <= 1, loads  # N x N parses before the cache
    recorded = provision_env.known_hosts.read_text()
    assert all(h.known_hosts_line() in recorded for h in fleet.hosts)


def test_unknown_key_under_strict_is_refused_until_known(
    fleet: Fleet, ssh_config_file, provision_env
):
    host = fleet.hosts[5]
    strict = ConnectOptions(
        known_hosts="strict", connect_timeout=5.0, ssh_config=str(ssh_config_file)
    )
    with pytest.raises(HostKeyError, match="host key unknown and --known-hosts strict"):
        SSHConnection(host.as_host(), strict).run("true")
    assert not provision_env.known_hosts.exists()  # strict records nothing

    provision_env.user_known_hosts.write_text(host.known_hosts_line())
    with SSHConnection(host.as_host(), strict) as conn:
        assert conn.run("hostname").stdout == "gpu6\n"


def test_changed_host_key_refused_under_strict_and_accept_new_allowed_under_off(
    make_fleet, ssh_config_file, provision_env
):
    small = make_fleet(1)
    host = small.hosts[0]

    def options(policy: str) -> ConnectOptions:
        return ConnectOptions(
            known_hosts=policy, connect_timeout=5.0, ssh_config=str(ssh_config_file)
        )

    with SSHConnection(host.as_host(), options("accept-new")) as conn:
        assert conn.run("true").ok
    old = host.host_key_fingerprint
    assert small.replace_host_key(host) != old

    for policy in ("accept-new", "strict"):
        with pytest.raises(HostKeyError, match="host key for .* CHANGED"):
            SSHConnection(host.as_host(), options(policy)).run("true")
    assert provision_env.known_hosts.read_text().count("\n") == 1  # the old key was not replaced

    with SSHConnection(host.as_host(), options("off")) as conn:
        assert conn.run("hostname").stdout == "gpu1\n"


# -- agent -----------------------------------------------------------------------------------------
def test_agent_is_uploaded_once_and_reused_by_a_new_connection(fleet: Fleet, connect):
    host = fleet.hosts[6]
    fleet.ns_exec(host, "rm -rf /root/.cache/provision")

    first = Agent(connect(host.as_host()))
    reply = first.call("ping")
    assert first.uploads == 1
    assert reply["executable"] == truth.python3(fleet, host)[0]

    second = Agent(connect(host.as_host()))
    assert second.call("ping") == reply
    assert second.uploads == 0
    cached = fleet.ns_exec(host, "ls /root/.cache/provision").stdout.split()
    # ping needs only the core bundle; no temp files left behind
    assert cached == [first.remote_path_for("core").rsplit("/", 1)[1]]
    # run from a folder, not a zip: bytecode is cached there (shipped, or written by the host's
    # Python on first use), so later calls skip compiling the agent's modules
    pyc = fleet.ns_exec(host, "find /root/.cache/provision -name 'protocol.cpython-*.pyc'")
    assert pyc.stdout.strip(), "no bytecode cached next to the agent"


def test_parallel_uploads_of_the_same_agent_all_succeed(make_fleet, connect):
    """Several controllers (or hosts sharing a home) unpack at once: one rename wins, the others
    find an identical agent in place and go on. Agents of other versions unused for 30 days go."""
    small = make_fleet(1)
    host = small.hosts[0].as_host()
    # other versions: an old zipapp and an old folder untouched for 40 days, a recent one
    small.ns_exec(
        small.hosts[0],
        "mkdir -p /root/.cache/provision/agent-00000000old/provision "
        "/root/.cache/provision/agent-11111111recent && cd /root/.cache/provision && "
        "touch agent-22222222old.pyz && touch -d '40 days ago' agent-22222222old.pyz "
        "agent-00000000old",
    )
    agents = [Agent(connect(host)) for _ in range(4)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda a: a.upload(), agents))
    assert [a.call("ping")["protocol"] for a in agents] == [1] * 4
    assert all(a.bundles_sent == 1 for a in agents)  # each sent it; the first rename won
    assert len({a.remote_path for a in agents}) == 1  # every controller ended up on the one folder
    cached = small.ns_exec(small.hosts[0], "ls -A /root/.cache/provision").stdout.split()
    current = agents[0].remote_path.rsplit("/", 1)[1]
    assert sorted(cached) == sorted([current, "agent-11111111recent"])  # old ones pruned


def test_agent_on_all_hosts_in_parallel(fleet: Fleet, ssh_options):
    def ping(host: Host) -> str:
        with SSHConnection(host, ssh_options) as conn:
            return Agent(conn).call("ping")["python"]

    outcomes = for_each_host(fleet.provision_hosts(), ping, forks=8)
    assert {n: o.message for n, o in outcomes.items() if not o.ok} == {}
    assert len({o.value for o in outcomes.values()}) == 1


def test_host_without_python3_gives_an_agent_error_saying_so(make_fleet, connect):
    small = make_fleet(2)
    small.remove_python(small.hosts[1])

    with pytest.raises(AgentError, match=r"gpu2: no Python interpreter 'python3' on the host"):
        Agent(connect(small.hosts[1].as_host())).call("ping")
    assert Agent(connect(small.hosts[0].as_host())).call("ping")["executable"] == truth.python3(small, small.hosts[0])[0]

    small.restore_python(small.hosts[1])
    assert Agent(connect(small.hosts[1].as_host())).call("ping")["python"]


# -- secrets and quoting ------------------------------------------------------------------------------
def test_password_auth_from_env_var_leaks_nowhere(make_fleet, ssh_config_file, monkeypatch, caplog):
    small = make_fleet(1)
    host = small.hosts[0]
    password = "pw-" + os.urandom(6).hex() + " $'\"`x"
    small.set_password(host, "root", password)
    monkeypatch.setenv("FLEET_TEST_PASSWORD", password)
    options = ConnectOptions(
        known_hosts="accept-new",
        connect_timeout=5.0,
        ssh_config=str(ssh_config_file),
        password_env="FLEET_TEST_PASSWORD",
    )
    target = host.as_host(key_file=None)
    caplog.set_level(logging.DEBUG)  # paramiko's and ours, at their chattiest
    # the CLI sets paramiko's own logger to WARNING (cli/common.py): a CLI test run earlier in
    # this worker process left it there, so it is set here too
    caplog.set_level(logging.DEBUG, logger="paramiko")
    snapshots: list[str] = []
    outcome: dict = {}

    def session() -> None:
        try:
            with SSHConnection(target, options) as conn:
                outcome["result"] = conn.run("hostname; sleep 1")
        except Exception as exc:  # reported below
            outcome["error"] = exc

    worker = threading.Thread(target=session)
    worker.start()
    for _ in range(100):  # bounded: the session takes about a second
        snapshots.append(
            subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        )
        if not worker.is_alive():
            break
        time.sleep(0.05)
    worker.join(timeout=30)

    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"].stdout == "gpu1\n"
    assert len(snapshots) > 1
    assert not [s for s in snapshots if password in s]
    assert password not in caplog.text
    assert "Authentication (password) successful" in caplog.text  # the log did capture the login

    monkeypatch.setenv("FLEET_TEST_PASSWORD", "not-the-password")
    with pytest.raises(AuthError):
        SSHConnection(target, options).run("true")
    assert password not in caplog.text


def test_env_values_are_data_never_code(fleet: Fleet, connect):
    host = fleet.hosts[7]
    conn = connect(host.as_host())
    env = {
        "A": "$(touch /root/PWNED)",
        "B": "'; touch /root/PWNED; echo '",
        "C": '"`touch /root/PWNED`"',
        "D": "x\ny; touch /root/PWNED",
    }
    script = 'printf "%s|" "$A" "$B" "$C" "$D"'

    expected = "|".join(env.values()) + "|"
    assert conn.run(script, env=env).stdout == expected
    assert conn.run(script, env=env, sudo=True).stdout == expected
    assert conn.stream(script, env=env).stdout == expected
    assert fleet.ns_exec(host, "ls -A /root").stdout.split().count("PWNED") == 0
    with pytest.raises(ValueError, match="invalid environment variable name"):
        conn.run("true", env={"X; touch /root/PWNED; Y": "1"})
    assert fleet.ns_exec(host, "test ! -e /root/PWNED", check=False).returncode == 0
