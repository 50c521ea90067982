"""known_hosts files are parsed once per process while unchanged (connection/hostkeys.py)."""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import paramiko
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from provision.connection import hostkeys


def _key() -> paramiko.PKey:
    raw = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    blob = b"".join(struct.pack(">I", len(x)) + x for x in (b"ssh-ed25519", raw))
    return paramiko.PKey.from_type_string("ssh-ed25519", blob)


def _line(host: str, key: paramiko.PKey) -> str:
    return f"{host} {key.get_name()} {base64.b64encode(key.asbytes()).decode()}\n"


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> hostkeys._ParsedFiles:
    table = hostkeys._ParsedFiles()
    monkeypatch.setattr(hostkeys, "_PARSED", table)
    return table


def test_parsed_once_while_unchanged(tmp_path: Path, parsed: hostkeys._ParsedFiles,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    known = tmp_path / "known_hosts"
    a = _key()
    known.write_text(_line("198.18.0.1", a))
    loads: list[str] = []
    real_load = paramiko.HostKeys.load
    monkeypatch.setattr(paramiko.HostKeys, "load", lambda self, f: (loads.append(f), real_load(self, f))[1])
    first = parsed.keys([tmp_path / "absent", known])
    second = parsed.keys([tmp_path / "absent", known])
    assert first is second and loads == [str(known)]
    assert first.lookup("198.18.0.1")["ssh-ed25519"] == a


def test_a_file_changed_elsewhere_is_parsed_again(tmp_path: Path, parsed: hostkeys._ParsedFiles) -> None:
    known = tmp_path / "known_hosts"
    a, b = _key(), _key()
    known.write_text(_line("198.18.0.1", a))
    assert parsed.keys([known]).lookup("198.18.0.2") is None
    known.write_text(_line("198.18.0.1", a) + _line("198.18.0.2", b))  # another process wrote it
    assert parsed.keys([known]).lookup("198.18.0.2")["ssh-ed25519"] == b


def test_accept_new_adds_to_the_table_without_reparsing(tmp_path: Path, parsed: hostkeys._ParsedFiles,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    known = tmp_path / "known_hosts"
    a, b = _key(), _key()
    known.write_text(_line("198.18.0.1", a))
    before = parsed.keys([known])
    policy = hostkeys._AcceptNewPolicy(known)
    client = paramiko.SSHClient()
    policy.missing_host_key(client, "198.18.0.2", b)
    monkeypatch.setattr(paramiko.HostKeys, "load", lambda self, f: pytest.fail("parsed again"))
    after = parsed.keys([known])
    assert after is not before  # connections reading the old table are not disturbed
    assert after.lookup("198.18.0.2")["ssh-ed25519"] == b and after.lookup("198.18.0.1")["ssh-ed25519"] == a
    assert "198.18.0.2 ssh-ed25519" in known.read_text()


def test_a_changed_key_is_still_refused(tmp_path: Path, parsed: hostkeys._ParsedFiles,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(_line("198.18.0.1", _key()))
    monkeypatch.setattr(hostkeys, "user_known_hosts", lambda: tmp_path / "none")
    monkeypatch.setattr(hostkeys, "project_known_hosts", lambda: known)
    client = paramiko.SSHClient()
    hostkeys.apply_policy(client, "accept-new")
    entry = client._system_host_keys.lookup("198.18.0.1")
    assert entry is not None and entry["ssh-ed25519"] != _key()
