"""YAML inventories: the all/hosts/children/vars structure, ranges, native types, errors with
line:col, and reading back what `ansible-inventory --list` (and our --json) prints."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from provision.cli.main import main
from provision.errors import ConfigError
from provision.inventory.loader import load_inventory

FIXTURES = Path(__file__).parent / "fixtures" / "inventory"


def write(tmp_path: Path, text: str, name: str = "hosts.yml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def load(tmp_path: Path, text: str, name: str = "hosts.yml"):
    return load_inventory([write(tmp_path, text, name)])


def test_structure_ranges_and_types(tmp_path):
    inv = load(
        tmp_path,
        """
all:
  vars:
    data_dir: /data
  hosts:
    solo:
      ansible_host: 198.18.0.9
  children:
    gpu:
      hosts:
        gpu[01:03]:
          ansible_user: root
        "[2001:db8::7]:2222":
        box.lab:2200:
      vars:
        price_per_hour: 1.5
        spot: true
        tags: [a100, nvme]
      children:
        a100:
          hosts:
            gpu01:
              gpus: 8
""",
    )
    assert list(inv.hosts) == ["solo", "gpu01", "gpu02", "gpu03", "2001:db8::7", "box.lab"]
    assert inv.groups["all"] == ["solo"] and inv.groups["ungrouped"] == ["solo"]
    gpu01 = inv.hosts["gpu01"]
    assert gpu01.user == "root" and gpu01.groups == ["a100", "gpu"]
    assert gpu01.vars == {
        "data_dir": "/data",
        "price_per_hour": 1.5,
        "spot": True,
        "tags": ["a100", "nvme"],
        "ansible_user": "root",
        "gpus": 8,
    }
    assert inv.hosts["2001:db8::7"].port == 2222
    assert inv.hosts["box.lab"].port == 2200 and inv.hosts["box.lab"].address == "box.lab"
    assert inv.hosts["solo"].address == "198.18.0.9"
    assert inv.children["all"] == ["ungrouped", "gpu"]


def test_group_vars_and_children_can_be_spread_over_places(tmp_path):
    inv = load(
        tmp_path,
        """
gpu:
  hosts: {g1: null}
  vars: {x: 1}
fleet:
  children:
    gpu:
      vars: {y: 2}
    cpu:
      hosts: c1
""",
    )
    assert inv.hosts["g1"].vars == {"x": 1, "y": 2}
    assert inv.children["all"] == ["ungrouped", "fleet"]
    assert inv.children["fleet"] == ["gpu", "cpu"]
    assert inv.hosts["c1"].groups == ["cpu", "fleet"]


def test_yaml_anchors_merge_keys_and_unsafe(tmp_path):
    inv = load(
        tmp_path,
        """
all:
  hosts:
    a: &base {ansible_user: root, data_dir: /data}
    b:
      <<: *base
      data_dir: /mnt
    c:
      cmd: !unsafe "{{ not templated }}"
""",
    )
    assert inv.hosts["b"].vars == {"ansible_user": "root", "data_dir": "/mnt"}
    assert inv.hosts["c"].vars["cmd"] == "{{ not templated }}"
    assert type(inv.hosts["b"].vars) is dict


def test_empty_file_is_an_empty_inventory(tmp_path):
    assert load(tmp_path, "# nothing yet\n").hosts == {}


def test_format_is_detected_without_an_extension(tmp_path):
    yaml_inv = load(tmp_path, "all:\n  hosts:\n    y1:\n", name="hosts")
    assert list(yaml_inv.hosts) == ["y1"]
    ini_inv = load(tmp_path, "i1\n[g]\ni2 x=1\n", name="inventory")
    assert list(ini_inv.hosts) == ["i1", "i2"]


@pytest.mark.parametrize(
    ("text", "where", "fragment"),
    [
        ("all:\n  hosts:\n    - h1\n    - h2\n", ":2:", "hosts: of group 'all' must be a mapping"),
        ("all:\n  children:\n    gpu:\n      host:\n        g1:\n", ":4:", "unexpected key 'host'"),
        ("all:\n  hosts:\n    h1: 5\n", ":3:", "host 'h1' in group 'all' must map to its vars"),
        ("all:\n  vars: [1, 2]\n", ":2:", "vars: of group 'all' must be a mapping"),
        ("gpu: [1, 2]\n", ":1:", "group 'gpu' must be a mapping"),
        ("- h1\n- h2\n", ":1:", "expected a mapping of groups"),
        ("all:\n  hosts:\n    gpu[01:9]:\n", ":3:", "same width"),
        ("all:\n  hosts:\n    h1:\n      ansible_port: abc\n", ":3:", "ansible_port 'abc'"),
        ("plugin: amazon.aws.aws_ec2\n", ":1:", "inventory plugin config"),
        (
            "all:\n  children:\n    a:\n      children:\n        b:\n          children:\n"
            "            a:\n",
            "",
            "contain each other",
        ),
    ],
)
def test_malformed_structure_names_file_and_line(tmp_path, text, where, fragment):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_inventory([path])
    message = str(err.value)
    assert message.startswith(f"{path}{where}"), message
    assert fragment in message


@pytest.mark.parametrize(
    ("text", "line_col"),
    [
        ("all:\n  hosts:\n    h1:\n   bad: indent\n", ":4:4:"),
        ("all:\n\thosts:\n", ":2:1:"),
        ("all:\n  hosts: {h1: 1\n", ":3:1:"),
        ("all:\n  vars:\n    secret: !vault |\n      $ANSIBLE_VAULT;1.1;AES256\n", ":3:13:"),
    ],
)
def test_yaml_syntax_errors_carry_line_and_column(tmp_path, text, line_col):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_inventory([path])
    assert str(err.value).startswith(f"{path}{line_col}"), str(err.value)


def test_vault_values_are_refused_with_a_way_forward(tmp_path):
    path = write(tmp_path, "all:\n  vars:\n    pw: !vault |\n      $ANSIBLE_VAULT;1.1;AES256\n")
    with pytest.raises(ConfigError, match="--password-env"):
        load_inventory([path])


def test_ini_and_yaml_fixtures_resolve_to_the_same_hosts():
    ini = load_inventory([str(FIXTURES / "fleet.ini")])
    yml = load_inventory([str(FIXTURES / "fleet.yml")])
    assert list(ini.hosts) == list(yml.hosts)
    for name, host in ini.hosts.items():
        assert yml.hosts[name] == host, name


def test_our_json_and_ansible_list_json_read_back_the_same(tmp_path, capsys):
    assert (
        main(["inventory", "-i", str(FIXTURES / "fleet.yml"), "--json", "--ssh-config", os.devnull])
        == 0
    )
    listed = write(tmp_path, capsys.readouterr().out, name="listed.json")
    original = load_inventory([str(FIXTURES / "fleet.yml")])
    again = load_inventory([listed])
    assert list(again.hosts) == list(original.hosts)
    for name, host in original.hosts.items():
        assert again.hosts[name].vars == host.vars, name
        assert (again.hosts[name].address, again.hosts[name].port, again.hosts[name].user) == (
            host.address,
            host.port,
            host.user,
        )
    assert again.children["fleet"] == ["rented", "lab"]


def test_old_script_json_with_host_lists(tmp_path):
    inv = load(
        tmp_path,
        json.dumps(
            {
                "gpu": ["g1", "g2"],
                "fleet": {"children": ["gpu"], "vars": {"x": 1}},
                "_meta": {"hostvars": {"g1": {"ansible_port": 2201}}},
            }
        ),
        name="script.json",
    )
    assert list(inv.hosts) == ["g1", "g2"]
    assert inv.hosts["g1"].port == 2201 and inv.hosts["g2"].vars == {"x": 1}
