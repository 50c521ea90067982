"""INI inventories: sections, ranges, typed values, vars precedence, errors with file:line,
and the same `--list` document as `ansible-inventory` for a non-trivial fleet."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from provision.cli.main import main
from provision.errors import ConfigError
from provision.inventory.loader import load_inventory
from provision.inventory.ranges import RangeError, expand_host_range

FIXTURES = Path(__file__).parent / "fixtures" / "inventory"
REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "hosts.ini") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def load(tmp_path: Path, text: str, name: str = "hosts.ini"):
    return load_inventory([write(tmp_path, text, name)])


# -- ranges ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("198.18.0.[14:18]", [f"198.18.0.{n}" for n in range(14, 19)]),
        ("gpu[01:04]", ["gpu01", "gpu02", "gpu03", "gpu04"]),
        ("gpu[08:11]", ["gpu08", "gpu09", "gpu10", "gpu11"]),
        ("gpu[001:003].lab", ["gpu001.lab", "gpu002.lab", "gpu003.lab"]),
        ("gpu[1:3]", ["gpu1", "gpu2", "gpu3"]),
        ("node[a:f]", ["nodea", "nodeb", "nodec", "noded", "nodee", "nodef"]),
        ("node[a:f:2]", ["nodea", "nodec", "nodee"]),
        ("w[1:10:3]", ["w1", "w4", "w7", "w10"]),
        ("w[:2]", ["w0", "w1", "w2"]),
        ("r[1:2]n[a:b]", ["r1na", "r1nb", "r2na", "r2nb"]),
        ("plain.example.com", ["plain.example.com"]),
    ],
)
def test_host_ranges_expand_like_ansible(pattern, expected):
    assert expand_host_range(pattern) == expected


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("gpu[01:9]", "same width"),
        ("gpu[1:x]", "numbers"),
        ("gpu[5:1]", "after end"),
        ("gpu[1:]", "end value is missing"),
        ("gpu[1:4:0]", "step"),
        ("gpu[1:4:-1]", "step"),
        ("gpu[1]", "begin:end"),
        ("gpu[1:2:3:4]", "begin:end"),
        ("gpu[1:3", "unbalanced"),
    ],
)
def test_bad_ranges_say_what_is_wrong(pattern, fragment):
    with pytest.raises(RangeError, match=fragment):
        expand_host_range(pattern)


def test_bad_range_in_a_file_names_file_and_line(tmp_path):
    path = write(tmp_path, "[gpu]\ngpu01\ngpu[01:9]\n")
    with pytest.raises(ConfigError) as err:
        load_inventory([path])
    assert str(err.value).startswith(f"{path}:3: ")
    assert "gpu[01:9]" in str(err.value) and "same width" in str(err.value)


# -- structure -------------------------------------------------------------------------------
def test_groups_children_and_ungrouped(tmp_path):
    inv = load(
        tmp_path,
        "solo\n"
        "[gpu]\n"
        "gpu[01:02]\n"
        "[cpu]\n"
        "c1\n"
        "solo\n"  # now in a group: no longer ungrouped
        "[fleet:children]\n"
        "gpu\n"
        "cpu\n",
    )
    assert list(inv.hosts) == ["gpu01", "gpu02", "c1", "solo"]
    assert inv.groups["ungrouped"] == []
    assert inv.children["all"] == ["ungrouped", "fleet"]
    assert inv.children["fleet"] == ["gpu", "cpu"]
    assert inv.group_hosts("fleet") == ["gpu01", "gpu02", "c1", "solo"]
    assert inv.hosts["gpu01"].groups == ["fleet", "gpu"]


def test_children_may_be_declared_before_their_group(tmp_path):
    inv = load(tmp_path, "[fleet:children]\nlater\n[later]\nh1\n[later:vars]\nx=1\n")
    assert inv.children["fleet"] == ["later"]
    assert inv.hosts["h1"].vars["x"] == 1
    assert inv.hosts["h1"].groups == ["fleet", "later"]


def test_connection_vars_become_host_fields(tmp_path):
    inv = load(
        tmp_path,
        "[gpu]\n"
        "g1 ansible_host=198.18.0.7 ansible_port=2222 ansible_user=root "
        "ansible_ssh_private_key_file=~/.ssh/rent ansible_python_interpreter=/opt/py/bin/python3 "
        "price_per_hour=1.25 data_dir=/mnt/nvme\n"
        "g2:2200 ansible_ssh_common_args='-o ProxyJump=ops@198.18.0.2'\n"
        "[::1]:2201\n"
        "localhost\n"
        "127.0.0.1 ansible_connection=ssh\n"
        "box.lab ansible_connection=local\n",
    )
    g1 = inv.hosts["g1"]
    assert (g1.address, g1.port, g1.user, g1.key_file, g1.python, g1.local) == (
        "198.18.0.7",
        2222,
        "root",
        "~/.ssh/rent",
        "/opt/py/bin/python3",
        False,
    )
    assert g1.vars["price_per_hour"] == 1.25 and g1.vars["data_dir"] == "/mnt/nvme"
    assert inv.hosts["g2"].port == 2200 and inv.hosts["g2"].address == "g2"
    assert inv.hosts["g2"].proxy_jump == "ops@198.18.0.2"
    assert inv.hosts["::1"].port == 2201 and not inv.hosts["::1"].local  # a port: SSH to loopback
    assert inv.hosts["localhost"].local
    assert not inv.hosts["127.0.0.1"].local
    assert inv.hosts["box.lab"].local


# Ansible types INI values with ast.literal_eval; quotes in host lines are shell quotes.
@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("1", 1),
        ("-3", -3),
        ("1.5", 1.5),
        ("True", True),
        ("False", False),
        ("true", "true"),
        ("yes", "yes"),
        ("None", None),
        ('"1"', 1),  # shlex removes the quotes first, as in Ansible
        ("'[1, 2]'", [1, 2]),
        ("\"{'a': 1}\"", {"a": 1}),
        ('"a b"', "a b"),
        ("/data/x", "/data/x"),
        ("", ""),
        ("a=b", "a=b"),
        ("0x10", 16),
    ],
)
def test_inline_values_are_typed_as_ansible_types_them(tmp_path, written, value):
    inv = load(tmp_path, f"[g]\nh1 v={written}  # trailing comment\n")
    assert inv.hosts["h1"].vars["v"] == value
    assert type(inv.hosts["h1"].vars["v"]) is type(value)


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("1", 1),
        ("True", True),
        ("true", "true"),
        ('"quoted"', "quoted"),
        ("a b c", "a b c"),
        ("[1,2]", [1, 2]),
    ],
)
def test_group_vars_are_typed_the_same_way(tmp_path, written, value):
    inv = load(tmp_path, f"[g]\nh1\n[g:vars]\nv = {written}\n")
    assert inv.hosts["h1"].vars["v"] == value


# -- vars precedence -------------------------------------------------------------------------
PRECEDENCE = """
[parent:children]
child
[parent:vars]
x=parent
[child]
h1
h2 x=host
[child:vars]
x=child
[other]
h3
h4
[other:vars]
x=other
[aaa]
h3
h4
[aaa:vars]
x=aaa
[zzz]
h4
h5
[zzz:vars]
x=zzz
ansible_group_priority=0
[prio]
h5
[prio:vars]
x=prio
[only_parent:children]
empty_child
[only_parent]
h6
[only_parent:vars]
x=only_parent
[empty_child]
[all:vars]
x=all
y=all
"""


@pytest.mark.parametrize(
    ("host", "expected", "why"),
    [
        ("h1", "child", "child group beats its parent"),
        ("h2", "host", "host vars beat every group"),
        ("h3", "other", "same depth: the alphabetically later group wins (other > aaa)"),
        ("h4", "other", "zzz would win by name but its priority 0 puts it first"),
        ("h5", "prio", "priority 0 on zzz loses to prio's default 1"),
        ("h6", "only_parent", "a parent group beats all"),
        ("h7", "all", "a host in no group gets all's vars"),
    ],
)
def test_vars_precedence(tmp_path, host, expected, why):
    inv = load(tmp_path, "h7\n" + PRECEDENCE)
    assert inv.hosts[host].vars["x"] == expected, why
    assert inv.hosts[host].vars["y"] == "all"
    assert "ansible_group_priority" not in inv.hosts[host].vars


def test_group_priority_beats_name_at_the_same_depth(tmp_path):
    text = "[a]\nh\n[a:vars]\nx=a\n[b]\nh\n[b:vars]\nx=b\n"
    assert load(tmp_path, text).hosts["h"].vars["x"] == "b"
    text += "[a:vars]\nansible_group_priority=10\n"
    assert load(tmp_path, text).hosts["h"].vars["x"] == "a"


def test_later_files_add_hosts_and_override_vars(tmp_path):
    first = write(tmp_path, "[gpu]\ng1 x=1 keep=yes\n[gpu:vars]\ny=1\n", "a.ini")
    second = write(tmp_path, "[gpu]\ng1 x=2\ng2\n[gpu:vars]\ny=2\n", "b.ini")
    inv = load_inventory([first, second])
    assert list(inv.hosts) == ["g1", "g2"]
    assert inv.hosts["g1"].vars == {"x": 2, "keep": "yes", "y": 2}
    assert inv.sources == [first, second]


# -- malformed files -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("[gpu]\nh1 novalue\n", 2, "expected key=value"),
        ("[gpu]\nh1 x=1\n[gpu:vars]\njustakey\n", 4, "expected key=value in [gpu:vars]"),
        ("[gpu:foo]\nh1\n", 1, "unknown type 'foo'"),
        ("[gpu]\n[bad group]\n", 2, "bad section header"),
        ("[fleet:children]\nnosuch\n", 2, "never declared"),
        ("[ghost:vars]\nx=1\n", 1, "never declared"),
        ("[gpu]\nh1 x='unclosed\n", 2, "quotes"),
        ("[gpu]\nh1:99999\n", 2, "bad port"),
        ("[gpu]\nh1:abc\n", 2, "bad port 'abc'"),
        ("[gpu]\nh1 ansible_port=70000\n", 2, "ansible_port 70000"),
        ("[gpu]\nh1 ansible_connection=docker\n", 2, "ansible_connection=docker"),
        ("[gpu]\nx=1\n", 2, "host line starts with the host name"),
        ("[gpu:children]\ngpu two\n", 2, "one group name per line"),
        ("[a:children]\nb\n[b:children]\na\n", 1, "contain each other"),
        ("[g]\nh1\n[g:vars]\nansible_group_priority=high\n", 4, "whole number"),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path, text, line, fragment):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_inventory([path])
    message = str(err.value)
    assert message.startswith(f"{path}:{line}:"), message
    assert fragment in message


def test_missing_file_and_directory_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_inventory([str(tmp_path / "nope.ini")])
    # A directory is an inventory of the files in it (tests/unit/test_inventory_sources.py).
    assert load_inventory([str(tmp_path)]).hosts == {}


# -- the fixture fleet, ours vs Ansible ------------------------------------------------------
def test_fleet_fixture_resolves(tmp_path):
    inv = load_inventory([str(FIXTURES / "fleet.ini")])
    assert len(inv.hosts) == 13
    g3 = inv.hosts["gpu03.lab.internal"]
    # spot (all > fleet > rented > spot) is deeper than lab (all > fleet > lab): spot wins
    assert g3.vars["price_per_hour"] == 0.6 and g3.vars["preemptible"] is True
    assert g3.vars["data_dir"] == "/mnt/nvme" and g3.python == "/usr/bin/python3"
    assert g3.proxy_jump == "ops@198.18.0.2" and g3.user == "root"
    assert inv.hosts["nodee"].user == "ubuntu"
    assert inv.hosts["198.18.0.15"].port == 2222
    assert inv.hosts["198.18.0.15"].vars["note"] == "old boxes"
    assert inv.hosts["adl-b"].vars["data_dir"] == "/root/autodl-tmp"
    assert inv.hosts["bastion"].groups == ["ungrouped"]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_json_is_the_ansible_list_shape(capsys):
    code, out, _ = run_cli(
        capsys, "inventory", "-i", str(FIXTURES / "fleet.ini"), "--json", "--ssh-config", os.devnull
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["all"] == {"children": ["ungrouped", "fleet"]}
    assert doc["fleet"] == {"children": ["rented", "lab"]}
    assert doc["spot"]["hosts"] == ["nodea", "nodec", "nodee", "gpu03.lab.internal"]
    assert doc["_meta"]["hostvars"]["adl-a"]["ansible_port"] == 41234


def test_cli_masks_secret_vars(tmp_path, capsys):
    path = write(
        tmp_path,
        "[g]\nh1 ansible_password=hunter2 api_token=tok-123 password_env=GPU_PASS "
        "db=\"{'secret_key': 'sk-9', 'name': 'x'}\"\n",
    )
    code, out, err = run_cli(capsys, "inventory", "-i", path, "--json", "--ssh-config", os.devnull)
    assert code == 0
    hostvars = json.loads(out)["_meta"]["hostvars"]["h1"]
    assert hostvars["ansible_password"] == "********" and hostvars["api_token"] == "********"
    assert hostvars["db"] == {"secret_key": "********", "name": "x"}
    assert hostvars["password_env"] == "GPU_PASS"  # a variable's name, not a secret
    code, out, err = run_cli(capsys, "inventory", "-i", path, "--ssh-config", os.devnull)
    assert code == 0 and out == ""
    assert "hunter2" not in err and "tok-123" not in err and "sk-9" not in err
    assert "h1" in err


def test_cli_graph_and_errors(tmp_path, capsys):
    code, out, err = run_cli(
        capsys,
        "inventory",
        "-i",
        str(FIXTURES / "fleet.ini"),
        "--graph",
        "--ssh-config",
        os.devnull,
    )
    assert code == 0 and out == ""
    lines = err.splitlines()
    assert lines[:4] == ["@all:", "  |--@ungrouped:", "  |  |--bastion", "  |--@fleet:"]
    assert "  |  |  |  |--nodea" in lines
    code, out, err = run_cli(capsys, "inventory", "-i", write(tmp_path, "[g]\nh1 bad\n"))
    assert code == 2 and "hosts.ini:2" in err


def _ansible_inventory() -> str | None:
    return shutil.which("ansible-inventory")


def ansible_list(path: str, tmp_path: Path, *extra: str) -> dict:
    env = dict(
        os.environ,
        HOME=str(tmp_path),
        ANSIBLE_INVENTORY_UNPARSED_FAILED="1",
        ANSIBLE_INVENTORY_ENABLED="ini,yaml",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
    )
    proc = subprocess.run(
        [_ansible_inventory(), "-i", path, "--list", *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    doc["_meta"].pop("profile", None)  # ansible-core 2.19 adds the vars profile it used
    return doc


def ours_list(path: str, *extra: str) -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "provision",
            "inventory",
            "-i",
            path,
            "--json",
            "--ssh-config",
            os.devnull,
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.skipif(_ansible_inventory() is None, reason="ansible-core is not installed")
@pytest.mark.parametrize("name", ["fleet.ini", "fleet.yml"])
@pytest.mark.parametrize(
    "extra", [(), ("--export",), ("--limit", "spot:&lab"), ("--limit", "rented:!nodec")]
)
def test_same_list_as_ansible_inventory(tmp_path, name, extra):
    path = str(FIXTURES / name)
    assert ours_list(path, *extra) == ansible_list(path, tmp_path, *extra)


@pytest.mark.skipif(_ansible_inventory() is None, reason="ansible-core is not installed")
def test_same_list_as_ansible_for_precedence_table(tmp_path):
    path = write(tmp_path, "h7\n" + PRECEDENCE)
    assert ours_list(path) == ansible_list(path, tmp_path)
