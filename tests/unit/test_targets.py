"""Target strings (every form a user pastes), ~/.ssh/config aliases, and resolve_targets."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from provision.connection.base import ConnectOptions
from provision.errors import ConfigError
from provision.inventory.loader import resolve_targets
from provision.inventory.ssh_config import apply_ssh_config, is_alias, lookup
from provision.inventory.targets import parse_target

FIXTURES = Path(__file__).parent / "fixtures" / "inventory"


def fields(text: str) -> tuple:
    h = parse_target(text)
    return (h.name, h.address, h.port, h.user, h.key_file, h.proxy_jump, h.local)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu1", ("gpu1", "gpu1", None, None, None, None, False)),
        ("198.18.0.7", ("198.18.0.7", "198.18.0.7", None, None, None, None, False)),
        ("root@198.18.0.7", ("root@198.18.0.7", "198.18.0.7", None, "root", None, None, False)),
        (
            "root@198.18.0.7:2222",
            ("root@198.18.0.7:2222", "198.18.0.7", 2222, "root", None, None, False),
        ),
        ("box.lab:2200", ("box.lab:2200", "box.lab", 2200, None, None, None, False)),
        (
            "ssh://root@box.lab:2222",
            ("root@box.lab:2222", "box.lab", 2222, "root", None, None, False),
        ),
        ("ssh://box.lab/", ("box.lab", "box.lab", None, None, None, None, False)),
        (
            "ssh://root@[2001:db8::1]:2222",
            ("root@[2001:db8::1]:2222", "2001:db8::1", 2222, "root", None, None, False),
        ),
        (
            "[2001:db8::1]:2222",
            ("[2001:db8::1]:2222", "2001:db8::1", 2222, None, None, None, False),
        ),
        ("2001:db8::1", ("2001:db8::1", "2001:db8::1", None, None, None, None, False)),
        ("[2001:db8::1]", ("2001:db8::1", "2001:db8::1", None, None, None, None, False)),
        ("fe80::1%eth0", ("fe80::1%eth0", "fe80::1%eth0", None, None, None, None, False)),
        ("me@corp@box.lab", ("me@corp@box.lab", "box.lab", None, "me@corp", None, None, False)),
        ("  root@box.lab  ", ("root@box.lab", "box.lab", None, "root", None, None, False)),
        # localhost runs without SSH unless a user or a port is written out
        ("localhost", ("localhost", "localhost", None, None, None, None, True)),
        ("127.0.0.1", ("127.0.0.1", "127.0.0.1", None, None, None, None, True)),
        ("::1", ("::1", "::1", None, None, None, None, True)),
        ("root@localhost", ("root@localhost", "localhost", None, "root", None, None, False)),
        ("127.0.0.1:2222", ("127.0.0.1:2222", "127.0.0.1", 2222, None, None, None, False)),
        ("[::1]:2222", ("[::1]:2222", "::1", 2222, None, None, None, False)),
    ],
)
def test_target_forms(text, expected):
    assert fields(text) == expected


def test_display_brackets_ipv6_with_a_port():
    assert parse_target("root@[2001:db8::1]:2222").display == "root@[2001:db8::1]:2222"
    assert parse_target("2001:db8::1").display == "2001:db8::1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # as rental consoles print them
        (
            "ssh -p 41234 root@region-3.autodl.com",
            (
                "root@region-3.autodl.com:41234",
                "region-3.autodl.com",
                41234,
                "root",
                None,
                None,
                False,
            ),
        ),
        (
            "ssh root@ssh5.vast.ai -p 12345 -L 8080:localhost:8080",
            ("root@ssh5.vast.ai:12345", "ssh5.vast.ai", 12345, "root", None, None, False),
        ),
        (
            "ssh root@203.0.113.5 -p 22022 -i ~/.ssh/id_ed25519",
            (
                "root@203.0.113.5:22022",
                "203.0.113.5",
                22022,
                "root",
                "~/.ssh/id_ed25519",
                None,
                False,
            ),
        ),
        ("$ ssh -p 2222 root@box", ("root@box:2222", "box", 2222, "root", None, None, False)),
        ("/usr/bin/ssh box", ("box", "box", None, None, None, None, False)),
        # every flag that sets something
        ("ssh -l ubuntu box", ("ubuntu@box", "box", None, "ubuntu", None, None, False)),
        ("ssh -i /k/id box", ("box", "box", None, None, "/k/id", None, False)),
        (
            "ssh -J ops@bastion:2200 root@10.1.2.3",
            ("root@10.1.2.3", "10.1.2.3", None, "root", None, "ops@bastion:2200", False),
        ),
        ("ssh -o Port=2201 box", ("box:2201", "box", 2201, None, None, None, False)),
        ("ssh -o User=admin box", ("admin@box", "box", None, "admin", None, None, False)),
        ("ssh -o IdentityFile=/k/x box", ("box", "box", None, None, "/k/x", None, False)),
        ("ssh -o ProxyJump=j1 box", ("box", "box", None, None, None, "j1", False)),
        ("ssh -o 'Port 2202' box", ("box:2202", "box", 2202, None, None, None, False)),
        ("ssh -oport=2203 box", ("box:2203", "box", 2203, None, None, None, False)),
        ("ssh -p2204 box", ("box:2204", "box", 2204, None, None, None, False)),
        ("ssh -o HostName=10.9.9.9 box", ("box", "10.9.9.9", None, None, None, None, False)),
        ("ssh -J none box", ("box", "box", None, None, None, None, False)),
        # ignored: forwards with their argument, plain flags, keepalives
        (
            "ssh -N -T -C -v -vvv -tt -A -4 -L 8888:localhost:8888 -R 9000:localhost:9000 "
            "-D 1080 -o ServerAliveInterval=30 -o ServerAliveCountMax=3 -p 2200 root@box",
            ("root@box:2200", "box", 2200, "root", None, None, False),
        ),
        ("ssh -NTC root@box", ("root@box", "box", None, "root", None, None, False)),
        # the first value wins, as in ssh; -p beats a port in the destination
        (
            "ssh -p 1111 -p 2222 -o Port=3333 box",
            ("box:1111", "box", 1111, None, None, None, False),
        ),
        (
            "ssh -l first -o User=second root@box",
            ("first@box", "box", None, "first", None, None, False),
        ),
        (
            "ssh -p 2205 ssh://root@box:9999",
            ("root@box:2205", "box", 2205, "root", None, None, False),
        ),
        # localhost: local unless user or port are given
        ("ssh localhost", ("localhost", "localhost", None, None, None, None, True)),
        ("ssh -p 2222 localhost", ("localhost:2222", "localhost", 2222, None, None, None, False)),
    ],
)
def test_pasted_ssh_commands(text, expected):
    assert fields(text) == expected


def test_ssh_command_notes_what_it_ignores(caplog):
    with caplog.at_level(logging.WARNING, logger="provision.inventory.targets"):
        host = parse_target(
            "ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -p 2200 root@box uptime"
        )
    assert host.port == 2200
    notes = caplog.text
    assert "StrictHostKeyChecking=no" in notes and "--known-hosts" in notes
    assert "UserKnownHostsFile" in notes
    assert "remote command 'uptime'" in notes


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("ssh -p 0 root@box", "bad port '0'"),
        ("ssh -p 70000 root@box", "bad port '70000'"),
        ("ssh -p abc root@box", "bad port 'abc'"),
        ("ssh -o Port=99999 box", "bad port '99999'"),
        ("root@box:0", "bad port '0'"),
        ("root@box:70000", "bad port '70000'"),
        ("root@box:abc", "bad port 'abc'"),
        ("box:", "no port after it"),
        ("[2001:db8::1]:x", "bad port 'x'"),
        ("ssh -p 22", "no destination"),
        ("ssh -p", "needs a value"),
        ("ssh -Z box", "unknown ssh option -Z"),
        ("ssh -o Port box", "not Key=Value"),
        ("@box", "no user before it"),
        ("root@", "no host name"),
        ("", "empty target"),
        ("gpu box", "contains spaces"),
        ("ssh://root@box/path", "no path"),
        ("a:b:c", "several ':'"),
        ("ssh 'root@box", "quotes"),
        ("root@bad/host", "contains '/'"),
    ],
)
def test_bad_targets_name_the_value(text, fragment):
    with pytest.raises(ConfigError, match=None) as err:
        parse_target(text)
    assert fragment in str(err.value)


def test_sshpass_is_refused_without_echoing_the_password():
    with pytest.raises(ConfigError) as err:
        parse_target("sshpass -p Sup3rS3cret ssh -p 2200 root@box")
    assert "Sup3rS3cret" not in str(err.value)
    assert "--password-env" in str(err.value)


# -- ssh_config ------------------------------------------------------------------------------
@pytest.fixture
def ssh_config(tmp_path: Path) -> str:
    key = tmp_path / "rent_key"
    key.write_text("not a real key; only its existence matters here\n")
    path = tmp_path / "ssh_config"
    path.write_text(
        f"""
Host rent3
    HostName region-3.autodl.com
    Port 41234
    User root
    IdentityFile {key}
    ProxyJump ops@bastion.lab:2200

Host lab-*
    HostName %h.lab.internal
    User ubuntu

Host missingkey
    IdentityFile {tmp_path}/does-not-exist

Host *
    ServerAliveInterval 30
"""
    )
    return str(path)


def test_alias_resolves_every_field(ssh_config, tmp_path):
    entry = lookup("rent3", ssh_config)
    assert entry is not None and entry.explicit
    host = apply_ssh_config(parse_target("rent3"), ssh_config)
    assert (host.name, host.address, host.port, host.user, host.proxy_jump) == (
        "rent3",
        "region-3.autodl.com",
        41234,
        "root",
        "ops@bastion.lab:2200",
    )
    assert host.key_file == str(tmp_path / "rent_key")


def test_wildcard_alias_and_plain_names(ssh_config):
    host = apply_ssh_config(parse_target("lab-7"), ssh_config)
    assert (host.address, host.user) == ("lab-7.lab.internal", "ubuntu")
    assert is_alias("lab-7", ssh_config) and is_alias("rent3", ssh_config)
    assert not is_alias("plain.example.com", ssh_config)
    plain = apply_ssh_config(parse_target("plain.example.com"), ssh_config)
    assert (plain.address, plain.port, plain.user) == ("plain.example.com", None, None)
    missing = apply_ssh_config(parse_target("missingkey"), ssh_config)
    assert missing.key_file is None  # ssh skips a missing IdentityFile; so do we


def test_values_written_by_the_user_beat_ssh_config(ssh_config):
    host = apply_ssh_config(parse_target("ubuntu@rent3:2200"), ssh_config)
    assert (host.address, host.port, host.user) == ("region-3.autodl.com", 2200, "ubuntu")


def test_missing_explicit_ssh_config_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        lookup("x", str(tmp_path / "nope"))


# -- resolve_targets -------------------------------------------------------------------------
def opts(**kw) -> ConnectOptions:
    kw.setdefault("ssh_config", os.devnull)
    return ConnectOptions(**kw)


def test_resolve_alias_without_inventory(ssh_config):
    [host] = resolve_targets(["rent3"], [], opts(ssh_config=ssh_config))
    assert (host.name, host.address, host.port, host.user) == (
        "rent3",
        "region-3.autodl.com",
        41234,
        "root",
    )
    # an unknown bare name is just a host name
    [plain] = resolve_targets(["gpu-box-9"], [], opts(ssh_config=ssh_config))
    assert (plain.name, plain.address, plain.local) == ("gpu-box-9", "gpu-box-9", False)


def test_cli_options_override_target_inventory_and_ssh_config(ssh_config):
    inv = str(FIXTURES / "fleet.ini")
    options = opts(ssh_config=ssh_config, user="admin", port=2022, key_file="/k")
    hosts = resolve_targets(["adl-a"], [inv], options) + resolve_targets(["rent3"], [], options)
    assert [(h.name, h.address, h.user, h.port, h.key_file) for h in hosts] == [
        ("adl-a", "region-3.autodl.com", "admin", 2022, "/k"),
        ("rent3", "region-3.autodl.com", "admin", 2022, "/k"),
    ]
    # together they are one machine (same user, address and port): it is worked on once
    assert [h.name for h in resolve_targets(["adl-a", "rent3"], [inv], options)] == ["adl-a"]


def test_inventory_patterns_and_target_strings_mix_and_dedupe():
    inv = str(FIXTURES / "fleet.ini")
    hosts = resolve_targets(
        [
            "autodl",
            "adl-a",
            "spot:&rented",
            "root@198.18.0.50:2222",
            "root@198.18.0.50:2222",
            "ssh -p 2222 root@198.18.0.50",
            "198.18.0.51",
            "new.example.com",
            "localhost",
        ],
        [inv],
        opts(),
    )
    assert [h.name for h in hosts] == [
        "adl-a",
        "adl-b",
        "nodea",
        "nodec",
        "nodee",
        "gpu03.lab.internal",
        "root@198.18.0.50:2222",
        "198.18.0.51",
        "new.example.com",
        "localhost",
    ]
    assert hosts[-1].local
    assert hosts[0].vars["price_per_hour"] == 1.85


def test_inventory_host_objects_are_not_shared():
    inv = str(FIXTURES / "fleet.ini")
    first = resolve_targets(["adl-a"], [inv], opts(user="admin"))
    second = resolve_targets(["adl-a"], [inv], opts())
    assert first[0].user == "admin" and second[0].user == "root"


def test_no_targets_means_all_and_limit_narrows():
    inv = str(FIXTURES / "fleet.ini")
    assert len(resolve_targets([], [inv], opts())) == 13
    limited = resolve_targets([], [inv], opts(), limit="lab:!198.18.0.*")
    assert [h.name for h in limited] == [f"gpu0{n}.lab.internal" for n in range(1, 5)]


def test_ssh_config_alias_next_to_an_inventory(ssh_config):
    inv = str(FIXTURES / "fleet.ini")
    hosts = resolve_targets(["spot[0]", "rent3"], [inv], opts(ssh_config=ssh_config))
    assert [(h.name, h.address, h.port) for h in hosts] == [
        ("nodea", "nodea", None),
        ("rent3", "region-3.autodl.com", 41234),
    ]
    with pytest.raises(ConfigError, match="unknown host or group 'rent4'"):
        resolve_targets(["rent4"], [inv], opts(ssh_config=ssh_config))


def test_unknown_name_with_an_inventory_is_an_error_listing_groups():
    inv = str(FIXTURES / "fleet.ini")
    with pytest.raises(ConfigError) as err:
        resolve_targets(["gpus"], [inv], opts())
    message = str(err.value)
    assert "unknown host or group 'gpus'" in message
    assert inv in message and "autodl" in message and "spot" in message


def test_localhost_with_explicit_port_option_goes_over_ssh():
    [local] = resolve_targets(["localhost"], [], opts())
    assert local.local
    [ssh] = resolve_targets(["localhost"], [], opts(port=2222))
    assert not ssh.local and ssh.port == 2222


def test_nothing_to_do_is_an_error():
    with pytest.raises(ConfigError, match="no hosts given"):
        resolve_targets([], [], opts())
    with pytest.raises(ConfigError, match="selects no hosts"):
        resolve_targets(["autodl:&lab"], [str(FIXTURES / "fleet.ini")], opts())
