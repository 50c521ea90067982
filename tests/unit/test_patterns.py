"""Host patterns: all, groups, hosts, globs, regex, union, intersection, exclusion, subscripts,
--limit; unknown names are errors; selection and order match Ansible's."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.errors import ConfigError
from provision.inventory.loader import load_inventory
from provision.inventory.patterns import UnknownPatternError, select_hosts, split_pattern

FIXTURES = Path(__file__).parent / "fixtures" / "inventory"
FLEET = str(FIXTURES / "fleet.ini")
LAB = [f"gpu0{n}.lab.internal" for n in range(1, 5)] + [f"198.18.0.{n}" for n in (14, 15, 16)]
SPOT = ["nodea", "nodec", "nodee", "gpu03.lab.internal"]

# (pattern, hosts in order) -- every row is also checked against Ansible below.
CASES = [
    # `all` is breadth first through the groups: ungrouped, fleet, (rented, lab), (autodl, spot)
    ("all", ["bastion", *LAB, "adl-a", "adl-b", "nodea", "nodec", "nodee"]),
    ("*", None),  # same as all
    ("spot", SPOT),
    ("lab", LAB),
    ("rented", ["adl-a", "adl-b", *SPOT]),
    ("adl-b", ["adl-b"]),
    (
        "gpu0*",
        ["gpu01.lab.internal", "gpu02.lab.internal", "gpu03.lab.internal", "gpu04.lab.internal"],
    ),
    ("198.18.0.1[!6]", ["198.18.0.14", "198.18.0.15"]),
    ("198.18.0.1?:!198.18.0.15", ["198.18.0.14", "198.18.0.16"]),
    ("~node[ae]", ["nodea", "nodee"]),
    ("autodl:spot", ["adl-a", "adl-b", *SPOT]),
    ("spot,autodl", [*SPOT, "adl-a", "adl-b"]),
    ("lab:&spot", ["gpu03.lab.internal"]),
    ("&spot:lab", ["gpu03.lab.internal"]),  # intersections apply after unions, wherever written
    ("lab:!spot", [h for h in LAB if h != "gpu03.lab.internal"]),
    ("!lab:spot", ["nodea", "nodec", "nodee"]),
    ("!lab", ["bastion", "adl-a", "adl-b", "nodea", "nodec", "nodee"]),  # only ! means all:!
    (
        "fleet:!rented:!198.18.0.*",
        ["gpu01.lab.internal", "gpu02.lab.internal", "gpu04.lab.internal"],
    ),
    ("lab[0]", ["gpu01.lab.internal"]),
    ("lab[-1]", ["198.18.0.16"]),
    ("lab[1:2]", ["gpu02.lab.internal", "gpu03.lab.internal"]),
    ("lab[5:]", ["198.18.0.15", "198.18.0.16"]),
    ("lab[0]:spot[0]", ["gpu01.lab.internal", "nodea"]),
    ("nodea:nodea,adl-a", None),  # commas win over colons: 'nodea:nodea' is one (unknown) term
    ("ungrouped", ["bastion"]),
]


@pytest.fixture(scope="module")
def fleet():
    return load_inventory([FLEET])


@pytest.mark.parametrize(("pattern", "expected"), [c for c in CASES if c[1] is not None])
def test_patterns_select_in_order(fleet, pattern, expected):
    assert [h.name for h in select_hosts(fleet, pattern)] == expected


def test_star_is_all(fleet):
    assert select_hosts(fleet, "*") == select_hosts(fleet, "all")


def test_split_keeps_addresses_whole():
    assert split_pattern("a:b:&c:!d") == ["a", "b", "&c", "!d"]
    assert split_pattern("a, b ,c") == ["a", "b", "c"]
    assert split_pattern("gpu[0:2]:cpu") == ["gpu[0:2]", "cpu"]
    assert split_pattern("box.lab:2222") == ["box.lab:2222"]
    assert split_pattern("2001:db8::1") == ["2001:db8::1"]


@pytest.mark.parametrize(
    "pattern",
    ["gpus", "lab:gpus", "lab:!gpu3", "lab:&nope", "nope*", "~^zz", "nodea:nodea,adl-a"],
)
def test_unknown_names_are_errors_naming_them(fleet, pattern):
    with pytest.raises(UnknownPatternError) as err:
        select_hosts(fleet, pattern)
    message = str(err.value)
    assert "unknown host or group" in message
    assert FLEET in message and "known groups: autodl, lab, spot, rented, fleet" in message


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("lab[9]", "has 7 host(s)"),
        ("lab[7:]", "has 7 host(s)"),
        ("~gpu[", "bad host pattern"),
        ("lab:!", "needs a name"),
        ("", "empty host pattern"),
    ],
)
def test_bad_patterns(fleet, pattern, fragment):
    with pytest.raises(ConfigError) as err:
        select_hosts(fleet, pattern)
    assert fragment in str(err.value)


def test_limit_narrows_and_reads_files(fleet, tmp_path):
    assert [h.name for h in select_hosts(fleet, "rented", limit="autodl:nodee")] == [
        "adl-a",
        "adl-b",
        "nodee",
    ]
    retry = tmp_path / "retry"
    retry.write_text("# failed last time\nnodec\nadl-b\n")
    assert [h.name for h in select_hosts(fleet, "all", limit=f"@{retry}")] == ["adl-b", "nodec"]
    with pytest.raises(ConfigError, match="unknown host or group 'nodez'"):
        select_hosts(fleet, "all", limit="nodez")
    with pytest.raises(ConfigError, match="limit file"):
        select_hosts(fleet, "all", limit=f"@{tmp_path / 'none'}")


def test_implicit_localhost(fleet):
    [host] = select_hosts(fleet, "localhost")
    assert host.local and host.vars["data_dir"] == "/data"  # sees all's vars, as in Ansible
    assert [h.name for h in select_hosts(fleet, "localhost:adl-a")] == ["localhost", "adl-a"]


def test_selected_hosts_are_copies(fleet):
    [host] = select_hosts(fleet, "adl-a")
    host.vars["price_per_hour"] = 99
    host.groups.append("x")
    assert fleet.hosts["adl-a"].vars["price_per_hour"] == 1.85
    assert "x" not in fleet.hosts["adl-a"].groups


@pytest.mark.parametrize("inventory", ["fleet.ini", "fleet.yml"])
def test_same_selection_as_ansible(inventory):
    pytest.importorskip("ansible", reason="ansible-core is not installed")
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    path = str(FIXTURES / inventory)
    theirs = InventoryManager(loader=DataLoader(), sources=[path])
    ours = load_inventory([path])
    compared = 0
    for pattern, _ in CASES:
        if pattern == "nodea:nodea,adl-a":
            continue  # Ansible warns and ignores the unknown term; we refuse
        theirs.clear_pattern_cache()
        expected = [h.name for h in theirs.get_hosts(pattern)]
        assert [h.name for h in select_hosts(ours, pattern)] == expected, pattern
        compared += 1
    assert compared == len(CASES) - 1


def test_implicit_localhost_as_ansibles(tmp_path):
    """Ansible's implicit localhost: the controller's Python as its interpreter, and the
    host_vars/localhost.yml beside the playbook (ansible-core's filter_mathstuff reads both)."""
    import sys

    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "localhost.yml").write_text("foo: test\n")
    inventory = load_inventory([FLEET], playbook_dir=str(tmp_path))
    [host] = select_hosts(inventory, "localhost")
    assert host.vars["foo"] == "test"
    assert host.vars["ansible_python_interpreter"] == sys.executable
    assert host.vars["data_dir"] == "/data"
