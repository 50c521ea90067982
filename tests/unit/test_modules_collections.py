"""The collection modules provision implements natively (authorized_key, pam_limits) and getent:
their edits as pure functions, and their names. Against the real modules with ansible-playbook on
fleet hosts: tests/parity/corpus/collections_modules.yml."""

from __future__ import annotations

import pytest

from provision.modules.authorized_key import edit, parse_key, parse_options
from provision.modules.base import ModuleFailure, get_module
from provision.modules.getent import parse_getent
from provision.modules.pam_limits import check_value, edit_limits

K1 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop"
K2 = "ssh-rsa AAAAB3NzaC1yc2E bob@desk"


def ak(**kw: object) -> dict[str, object]:
    return {"state": "present", "exclusive": False, "key_options": None, "comment": None, **kw}


def test_collection_names_resolve_to_the_native_modules() -> None:
    for fqcn, short in [
        ("ansible.posix.authorized_key", "authorized_key"),
        ("community.general.pam_limits", "pam_limits"),
        ("ansible.posix.mount", "mount"),
        ("ansible.posix.sysctl", "sysctl"),
        ("ansible.builtin.getent", "getent"),
    ]:
        cls = get_module(fqcn)
        assert cls is not None and cls is get_module(short) and cls.name == short


def test_authorized_key_options_keep_quoted_commas_and_compare_by_name() -> None:
    assert parse_options('no-pty,from="10.0.0.1,10.0.0.2",command="a b"') == [
        ("no-pty", None), ("from", '"10.0.0.1,10.0.0.2"'), ("command", '"a b"')
    ]
    entry = parse_key('no-pty,from="x" ' + K2, 0)
    assert entry is not None and entry.kind == "ssh-rsa" and entry.comment == "bob@desk"
    assert parse_key("not a key line", 0) is None


def test_authorized_key_adds_after_existing_lines_keeps_what_it_cannot_parse() -> None:
    existing = "# by hand\nssh-ed25519 AAAAOLD old@box\n\ngarbage\n"
    after = edit(existing, f"{K1}\n{K2}", ak())
    assert after == existing + K1 + "\n" + K2 + "\n"
    assert edit(after, K1, ak()) is None  # already there: unchanged
    # options and comment from the task replace the key's own; the same blob is updated in place
    changed = edit(after, K2, ak(key_options="no-pty", comment="ci"))
    assert changed is not None and "no-pty ssh-rsa AAAAB3NzaC1yc2E ci\n" in changed
    assert changed.count("AAAAB3NzaC1yc2E") == 1


def test_authorized_key_exclusive_keeps_only_the_given_keys_and_absent_removes() -> None:
    existing = "# by hand\nssh-ed25519 AAAAOLD old@box\n" + K2 + "\n"
    assert edit(existing, K2, ak(exclusive=True)) == K2 + "\n"  # comments go too, as in Ansible
    assert edit(existing, K2, ak(state="absent")) == "# by hand\nssh-ed25519 AAAAOLD old@box\n"
    assert edit(existing, K1, ak(state="absent")) is None
    with pytest.raises(ModuleFailure, match="invalid key specified"):
        edit(existing, "ssh-foo AAAA", ak())


def limits(**kw: object) -> dict[str, object]:
    return {"use_max": False, "use_min": False, "comment": "", **kw}


def test_pam_limits_changes_in_place_with_the_lines_comment_or_appends() -> None:
    lines = ["# limits\n", "*  soft  nofile  1024  # base\n", "@gpu hard memlock unlimited\n"]
    got = edit_limits(lines, limits(domain="*", limit_type="soft", limit_item="nofile", value="4096"), "f")
    # the module keeps what follows '#', newline included (so the line gains an empty one)
    assert got.changed and got.message == "*\tsoft\tnofile\t4096\t# base\n\n"
    assert got.text == "# limits\n*\tsoft\tnofile\t4096\t# base\n\n@gpu hard memlock unlimited\n"
    got = edit_limits(lines, limits(domain="@gpu", limit_type="hard", limit_item="memlock", value="64", use_max=True), "f")
    assert not got.changed and got.message == "@gpu hard memlock unlimited\n"  # unlimited is the max
    got = edit_limits(lines, limits(domain="@gpu", limit_type="hard", limit_item="memlock", value="64", use_min=True), "f")
    assert got.changed and "@gpu\thard\tmemlock\t64\t# base\n" in got.text
    got = edit_limits([], limits(domain="u", limit_type="-", limit_item="nproc", value="9", comment="jobs"), "f")
    assert got.text == "u\t-\tnproc\t9\t#jobs\n"


def test_pam_limits_values_as_limits_conf_wants_them() -> None:
    check_value("nice", "-20")
    check_value("nofile", "unlimited")
    with pytest.raises(ModuleFailure, match="range -20 to 19"):
        check_value("priority", "40")
    with pytest.raises(ModuleFailure, match="limit of 0 or larger"):
        check_value("nofile", "lots")
    with pytest.raises(ModuleFailure, match="Invalid configuration found in 'f'"):
        edit_limits(["* soft nofile many\n"], limits(domain="x", limit_type="soft", limit_item="nproc", value="1"), "f")


def test_getent_layout_is_ansibles() -> None:
    out = "root:x:0:0:root:/root:/bin/bash\nhttp 80/tcp www\nhttp 80/udp\n"
    assert parse_getent(out.splitlines()[0], ":") == {"root": ["x", "0", "0", "root", "/root", "/bin/bash"]}
    assert parse_getent("\n".join(out.splitlines()[1:]), None) == {"http": [["80/tcp", "www"], ["80/udp"]]}
