"""Inventories as Ansible reads them: group_vars/ and host_vars/ beside the inventory and the
playbook, inventory directories (with Ansible's ignore rules), executable inventory scripts and
ansible.cfg / ANSIBLE_INVENTORY. `provision inventory --json` must equal the real
`ansible-inventory --list` (ansible-core is a test dependency) on every one of them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from provision.config import find_config_file, load_config
from provision.errors import ConfigError
from provision.inventory.loader import ignored_in_directory, load_inventory

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_INVENTORY = shutil.which("ansible-inventory") or str(
    Path(sys.executable).parent / "ansible-inventory"
)

SCRIPT = """#!/bin/sh
if [ "$1" = "--list" ]; then
  cat <<'EOF'
{"dyn": {"hosts": ["d1", "g1"], "vars": {"dv": 1, "region": "dyn"}, "children": ["dynkid"]},
 "dynkid": {"hosts": ["d2"]},
 "_meta": {"hostvars": {"d1": {"ansible_user": "ops", "gpu": "A100"}}}}
EOF
else
  echo '{}'
fi
"""


def build_project(root: Path) -> Path:
    """A team project: an inventory directory with INI, YAML, a script, files Ansible skips,
    group_vars/ (files, a directory of files, JSON) and host_vars/ (a file without extension)."""
    inv = root / "inventory"
    (inv / "group_vars" / "gpus").mkdir(parents=True)
    (inv / "host_vars").mkdir()
    (inv / "sub").mkdir()
    (inv / "hosts.ini").write_text(
        "[gpus]\ng1 ansible_host=198.18.0.1 x=inline\ng2\n[cpus]\nc1\n"
        "[rented:children]\ngpus\ncpus\n[rented:vars]\nregion=eu\nx=rented\n"
    )
    (inv / "sub" / "more.yml").write_text(
        "all:\n  children:\n    extra:\n      hosts:\n        e1:\n          k: v\n"
    )
    script = inv / "cloud.sh"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    # Ansible skips these in an inventory directory: they would not parse as inventories.
    for skipped in ("notes.md", "hosts.ini.bak", "hosts.ini~", "old.orig", "setup.cfg", ".hidden"):
        (inv / skipped).write_text("this is not an inventory [\n")
    gv = inv / "group_vars"
    (gv / "all.yml").write_text("team_members: [ana, bo]\nregion: default\nx: all_file\n")
    (gv / "gpus" / "10-base.yml").write_text("y: from_a\ncuda: '12.4'\n")
    (gv / "gpus" / "20-more.yaml").write_text("y: from_b\nz: 1\n")
    (gv / "gpus" / "notes.txt").write_text("ignored: true\n")
    (gv / "gpus" / "backup.yml~").write_text("y: backup\n")
    (gv / "rented.json").write_text('{"billing": "hourly", "x": "rented_file"}')
    (gv / "dyn.yml").write_text("dyn_file: yes\n")
    (inv / "host_vars" / "g1.json").write_text('{"x": "host_file", "ansible_port": 2222}')
    (inv / "host_vars" / "c1").write_text("w: 5\n")
    # beside the playbook: beats the inventory's files of the same kind
    play = root / "play"
    (play / "group_vars").mkdir(parents=True)
    (play / "host_vars").mkdir()
    (play / "group_vars" / "all.yml").write_text("region: playbook_all\n")
    (play / "group_vars" / "gpus.yml").write_text("y: playbook_gpus\n")
    (play / "host_vars" / "c1.yaml").write_text("w: playbook_host\n")
    return root


def ansible_env(root: Path, **extra: str) -> dict[str, str]:
    return dict(
        os.environ,
        HOME=str(root / "home"),
        ANSIBLE_LOCAL_TEMP=str(root / "ansible-tmp"),
        ANSIBLE_DEPRECATION_WARNINGS="false",
        **extra,
    )


def ansible_list(root: Path, args: list[str], env: dict[str, str]) -> dict:
    proc = subprocess.run(
        [ANSIBLE_INVENTORY, *args, "--list"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    doc["_meta"].pop("profile", None)  # ansible-core 2.19 names the vars profile it used
    return doc


def ours_list(root: Path, args: list[str], env: dict[str, str]) -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "provision",
            "inventory",
            *args,
            "--json",
            "--ssh-config",
            os.devnull,
        ],
        capture_output=True,
        text=True,
        env=dict(env, PYTHONPATH=str(REPO)),
        cwd=root,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = build_project(tmp_path)
    (root / "home").mkdir()
    return root


@pytest.mark.parametrize(
    "args",
    [
        ["-i", "inventory"],
        ["-i", "inventory", "--export"],
        ["-i", "inventory", "--playbook-dir", "play"],
        ["-i", "inventory", "--playbook-dir", "play", "--export"],
        ["-i", "inventory", "--limit", "gpus:dyn"],
        ["-i", "inventory/hosts.ini", "-i", "inventory/cloud.sh"],
        ["-i", "inventory/cloud.sh"],
    ],
    ids=["dir", "export", "playbook-dir", "playbook-dir-export", "limit", "files", "script"],
)
def test_same_list_as_ansible_inventory(project: Path, args: list[str]) -> None:
    env = ansible_env(project, ANSIBLE_CONFIG=str(project / "none.cfg"))
    assert ours_list(project, args, env) == ansible_list(project, args, env)


def test_inventory_from_ansible_cfg_and_environment(project: Path) -> None:
    cfg = project / "conf" / "ansible.cfg"
    cfg.parent.mkdir()
    cfg.write_text("[defaults]\ninventory = ../inventory/hosts.ini ; relative to this file\n")
    env = ansible_env(project, ANSIBLE_CONFIG=str(cfg))
    ours = ours_list(project, [], env)
    assert ours == ansible_list(project, [], env)
    assert "gpus" in ours and "dyn" not in ours
    # ANSIBLE_INVENTORY beats the file (comma-separated, relative to the working directory)
    env = dict(env, ANSIBLE_INVENTORY="inventory/cloud.sh,inventory/sub/more.yml")
    ours = ours_list(project, [], env)
    assert ours == ansible_list(project, [], env)
    assert "dyn" in ours and "extra" in ours and "gpus" not in ours


def test_precedence_of_vars_files(project: Path) -> None:
    inv = load_inventory([str(project / "inventory")], str(project / "play"))
    g1, c1 = inv.hosts["g1"].vars, inv.hosts["c1"].vars
    assert g1["x"] == "host_file"  # host_vars/ file > inline host var > any group
    assert inv.hosts["g1"].port == 2222  # connection vars from host_vars/ are used
    assert g1["y"] == "playbook_gpus"  # playbook group_vars/ > inventory group_vars/
    assert g1["region"] == "playbook_all"  # group_vars/all beside the playbook > [rented:vars]
    assert inv.hosts["g2"].vars["x"] == "rented_file"  # group file > all file > inline group
    assert c1["w"] == "playbook_host" and c1["team_members"] == ["ana", "bo"]
    assert "ignored" not in g1 and g1["z"] == 1  # .txt and ~ files in group_vars/gpus/ skipped


def test_ignore_rules_of_inventory_directories() -> None:
    for name in ("a.bak", "a~", "a.orig", "a.cfg", "a.retry", "a.md", "a.txt", ".git", "host_vars"):
        assert ignored_in_directory(name), name
    for name in ("hosts", "hosts.ini", "cloud.py", "fleet.yml"):
        assert not ignored_in_directory(name), name


def test_bad_vars_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "hosts.ini").write_text("[gpus]\ng1\n")
    (tmp_path / "group_vars" / "gpus.yml").write_text("- a list, not a mapping\n")
    with pytest.raises(ConfigError, match=r"gpus\.yml: a vars file must hold a mapping"):
        load_inventory([str(tmp_path / "hosts.ini")])
    (tmp_path / "group_vars" / "gpus.yml").write_text("key: [unclosed\n")
    with pytest.raises(ConfigError, match=r"gpus\.yml:\d+:\d+: YAML syntax error"):
        load_inventory([str(tmp_path / "hosts.ini")])


def test_failing_inventory_script_is_a_clear_error(tmp_path: Path) -> None:
    script = tmp_path / "broken.sh"
    script.write_text("#!/bin/sh\necho 'no cloud credentials' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(ConfigError, match="exited with 3: no cloud credentials"):
        load_inventory([str(script)])
    script.write_text("#!/bin/sh\necho not json\n")
    with pytest.raises(ConfigError, match="not JSON"):
        load_inventory([str(script)])


def test_config_file_search_and_settings(tmp_path: Path) -> None:
    home_cfg = tmp_path / "home" / ".ansible.cfg"
    home_cfg.parent.mkdir()
    home_cfg.write_text(
        "[defaults]\nremote_user = ubuntu\nprivate_key_file = keys/rental\nforks = 7\n"
        "host_key_checking = False\nroles_path = roles:/opt/roles\n"
        "[privilege_escalation]\nbecome = yes\nbecome_user = admin\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o755)
    env = {"HOME": str(tmp_path / "home")}
    old_home = os.environ.get("HOME")
    os.environ["HOME"] = env["HOME"]  # ~ expands from HOME
    try:
        assert find_config_file(env, str(work)) in (str(home_cfg), "/etc/ansible/ansible.cfg")
        (work / "ansible.cfg").write_text("[defaults]\nforks = 3\n")
        assert find_config_file(env, str(work)) == str(work / "ansible.cfg")  # ./ beats ~/
        assert load_config(env, str(work)).forks == 3
        config = load_config({**env, "ANSIBLE_CONFIG": str(home_cfg)}, str(work))
        assert (config.remote_user, config.forks, config.host_key_checking) == ("ubuntu", 7, False)
        assert config.private_key_file == str(home_cfg.parent / "keys" / "rental")
        assert config.roles_path == [str(home_cfg.parent / "roles"), "/opt/roles"]
        assert (config.become, config.become_user) == (True, "admin")
        env_wins = load_config(
            {**env, "ANSIBLE_CONFIG": str(home_cfg), "ANSIBLE_FORKS": "2", "ANSIBLE_BECOME": "no"},
            str(work),
        )
        assert (env_wins.forks, env_wins.become) == (2, False)
        work.chmod(0o777)  # a world-writable working directory's ansible.cfg is not trusted
        assert find_config_file(env, str(work)) != str(work / "ansible.cfg")
    finally:
        work.chmod(0o755)
        if old_home is not None:
            os.environ["HOME"] = old_home


def test_bad_config_value_names_file_and_key(tmp_path: Path) -> None:
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[defaults]\nforks = many\n")
    with pytest.raises(ConfigError, match=r"ansible\.cfg: \[defaults\]: forks must be a whole"):
        load_config({"ANSIBLE_CONFIG": str(cfg)}, str(tmp_path))
    with pytest.raises(ConfigError, match="ANSIBLE_HOST_KEY_CHECKING: host_key_checking must"):
        load_config({"ANSIBLE_CONFIG": str(cfg), "ANSIBLE_HOST_KEY_CHECKING": "maybe",
                     "ANSIBLE_FORKS": "4"}, str(tmp_path))  # fmt: skip
