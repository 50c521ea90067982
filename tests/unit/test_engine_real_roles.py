"""The engine semantics public roles lean on, each compared with ansible-playbook on the same
project (connection local; every `show*` debug message and the recap must match): `with_*`
lookup loops, `ansible_facts`, include_tasks `apply:`, role variable scope, `ansible_failed_task`,
FQCN roles/modules from the collections paths, and Ansible's argument rules."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from provision.engine.lookups import run_lookup
from provision.engine.runner import run_playbook
from provision.inventory.model import Host
from tests.unit.test_engine_vs_ansible import ANSIBLE
from tests.unit.test_engine_vs_ansible import ansible as run_ansible

# messages of `show*` tasks, loop items one by one, and the failed tasks' names
_CALLBACK = """
import json
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "pvitems"

    def __init__(self):
        super().__init__()
        self.msgs = []

    def v2_runner_on_ok(self, result):
        if result.task_name.startswith("show") and "results" not in result._result:
            self.msgs.append(result._result.get("msg"))

    def v2_runner_item_on_ok(self, result):
        if result.task_name.startswith("show"):
            self.msgs.append(result._result.get("msg"))

    def v2_playbook_on_stats(self, stats):
        print("PVITEMS" + json.dumps({"stats": stats.summarize("localhost"), "msgs": self.msgs}))
"""


def ansible(playbook: Path, workdir: Path, *args: str) -> tuple[dict[str, int], list[Any]]:
    return run_ansible(playbook, workdir, *args, callback=_CALLBACK, name="pvitems")


def ours(playbook: Path) -> tuple[dict[str, int], list[Any]]:
    result = run_playbook(playbook, hosts=[Host("localhost", local=True)])
    s = result.recap["localhost"]
    stats = {**s.to_json(), "rescued": s.rescued, "ignored": s.ignored}
    msgs: list[Any] = []
    for r in result.results:
        if not r.task.split(" : ")[-1].startswith("show") or r.status == "skipped":
            continue
        items = r.result.get("results")
        if isinstance(items, list):  # the ok items of a loop, also when another item failed
            msgs += [i.get("msg") for i in items if not i.get("skipped") and not i.get("failed")]
        elif r.status != "failed":
            msgs.append(r.result.get("msg"))
    return stats, msgs


needs_ansible = pytest.mark.skipif(
    not os.access(ANSIBLE, os.X_OK), reason="ansible-core not installed (pip install ansible-core)"
)


def project(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).replace("WORK", str(root)).lstrip("\n"))


def same(
    tmp_path: Path, files: dict[str, str], *args: str, env: dict[str, str] | None = None
) -> Any:
    """Run site.yml of the same project with both tools; their recaps and messages must match."""
    results = []
    old = dict(os.environ)
    try:
        for tool in ("ansible", "provision"):
            work = tmp_path / tool
            project(work, files)
            for key, value in (env or {}).items():
                os.environ[key] = value.replace("WORK", str(work))
            pb = work / "site.yml"
            results.append(ansible(pb, work, *args) if tool == "ansible" else ours(pb))
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert results[1] == results[0], f"provision {results[1]} != ansible {results[0]}"
    return results[0]


LOOPS = """
- hosts: localhost
  gather_facts: false
  vars:
    users:
      - name: alice
        keys: [k1, k2]
        groups: {list: [g1]}
      - name: bob
        keys: [k3]
      - name: carol
    d: {b: 2, a: 1}
  tasks:
    - name: show subelements
      debug: {msg: "{{ item.0.name }}={{ item.1 }}"}
      with_subelements: ["{{ users }}", keys, {skip_missing: true}]
    - name: show subelements nested key
      debug: {msg: "{{ item.0.name }}={{ item.1 }}"}
      with_subelements: ["{{ users }}", groups.list, {skip_missing: true}]
    - name: subelements missing key fails
      debug: {msg: "{{ item }}"}
      with_subelements: ["{{ users }}", keys]
      ignore_errors: true
    - name: show together
      debug: {msg: "{{ item }}"}
      with_together: [[1, 2, 3], [a, b]]
    - name: show nested
      debug: {msg: "{{ item }}"}
      with_nested: [[1, 2], [x, y]]
    - name: show dict
      debug: {msg: "{{ item.key }}={{ item.value }}"}
      with_dict: "{{ d }}"
    - name: show sequence
      debug: {msg: "{{ item }}"}
      with_sequence: start=1 end=7 stride=3 format=h%02d
    - name: show sequence count
      debug: {msg: "{{ item }}"}
      with_sequence: count=3
    - name: show indexed
      debug: {msg: "{{ item.0 }}:{{ item.1 }}"}
      with_indexed_items: [a, [b, c]]
    - name: show fileglob
      debug: {msg: "{{ item | basename }}"}
      with_fileglob: ["conf/*.conf"]
    - name: show items
      debug: {msg: "{{ item }}"}
      with_items: [[1, [2]], 3]
    - name: show random
      debug: {msg: "{{ item in ['p', 'q'] }}"}
      with_random_choice: [p, q]
    - name: show first_found
      debug: {msg: "{{ item | basename }}"}
      with_ansible.builtin.first_found: [nope.txt, there.txt]
    - include_vars: "{{ item }}"
      with_first_found: [nope.yml, "{{ family }}.yml", default.yml]
      vars: {family: Debian}
    - name: show x
      debug: {msg: "{{ x }}"}
    - name: show first_found skip
      debug: {msg: "{{ item }}"}
      with_first_found:
        - files: [nope.yml]
          skip: true
    - include_tasks: inc.yml
      with_nested: [[1], [2]]
"""


@pytest.mark.slow
@needs_ansible
def test_with_lookup_loops_like_ansible(tmp_path: Path) -> None:
    stats, msgs = same(
        tmp_path,
        {
            "site.yml": LOOPS,
            "files/conf/a.conf": "",
            "files/there.txt": "",
            "vars/Debian.yml": "x: debian\n",
            "vars/default.yml": "x: default\n",
            "inc.yml": "- name: show included\n  debug: {msg: '{{ item }}'}\n",
        },
    )
    assert "alice=k2" in msgs and "h07" in msgs and "debian" in msgs and stats["ignored"] == 1


VARNAMES = """
- hosts: localhost
  gather_facts: false
  vars:
    pv_alpha: 1
    pv_beta: 2
    os_vars: {pv_alpha: 10, pv_gamma: 30}
  tasks:
    - name: show names
      debug: {msg: "{{ lookup('varnames', '^pv_.+$') }}"}
    - name: show query of two terms
      debug: {msg: "{{ query('varnames', '^pv_a', 'beta$') }}"}
    - name: show none
      debug: {msg: "{{ lookup('varnames', '^nothing_here$') | length }}"}
    # devsec.hardening's roles: set a default only where the user has not
    - name: set OS dependent variables
      set_fact: {"{{ item.key }}": "{{ item.value }}"}
      when: not lookup('varnames', '^' + item.key + '$')
      with_dict: "{{ os_vars }}"
    - name: show after
      debug: {msg: "{{ pv_alpha }} {{ pv_gamma }}"}
"""


@pytest.mark.slow
@needs_ansible
def test_varnames_lookup_like_ansible(tmp_path: Path) -> None:
    stats, msgs = same(tmp_path, {"site.yml": VARNAMES})
    assert msgs == ["pv_alpha,pv_beta", ["pv_alpha", "pv_beta"], 0, "1 30"], msgs
    assert stats["skipped"] == 0 and stats["ok"] == 5


MKDIRS = """
- hosts: localhost
  gather_facts: false
  tasks:
    - file: {path: WORK/out/a/b/c, state: directory, mode: "0700"}
    - file: {path: WORK/out/x/y/z, state: directory, owner: pv-no-such-user, mode: "0700"}
      ignore_errors: true
"""


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): oct(p.stat().st_mode & 0o7777) for p in sorted(root.rglob("*"))}


@pytest.mark.slow
@needs_ansible
def test_file_directory_creates_each_parent_like_ansible(tmp_path: Path) -> None:
    """state=directory gives every directory it creates the task's mode, and stops at the first
    one whose owner can't be set (oefenweb.htop/ssh-client: only the top new one is left, with
    the default mode: Ansible sets owner, group, then mode)."""
    stats, _ = same(tmp_path, {"site.yml": MKDIRS})
    assert stats["ignored"] == 1
    ours, theirs = _tree(tmp_path / "provision" / "out"), _tree(tmp_path / "ansible" / "out")
    assert ours == theirs
    assert theirs["a"] == theirs["a/b"] == "0o700" and "x/y" not in theirs and theirs["x"] != "0o700"


def test_lookups_of_with_loops() -> None:
    ctx = None
    assert run_lookup(ctx, "community.general.flattened", ([1, [2, [3]]], 4), {}) == [1, 2, 3, 4]
    assert run_lookup(ctx, "flattened", ([[]], None), {}) == []
    assert run_lookup(ctx, "sequence", ("4-8/2:x%02d",), {}) == ["x04", "x06", "x08"]
    assert run_lookup(ctx, "sequence", ("start=5 count=0",), {}) == []
    assert run_lookup(ctx, "sequence", ("start=3 end=1 stride=-1",), {}) == ["3", "2", "1"]
    assert run_lookup(ctx, "community.general.cartesian", ([1, 2], ["a"]), {}) == [
        [1, "a"],
        [2, "a"],
    ]
    assert run_lookup(ctx, "together", ([1], [2, 3]), {}) == [[1, 2], [None, 3]]
    # Ansible takes the sub-list out of the element it pairs with the sub-elements
    assert run_lookup(ctx, "subelements", ({"a": {"k": [1]}, "b": {"k": [2], "n": 1}}, "k"), {}) == [
        [{}, 1],
        [{"n": 1}, 2],
    ]
    with pytest.raises(Exception, match="could not find 'k' key"):
        run_lookup(ctx, "subelements", ([{"x": 1}], "k"), {})
    with pytest.raises(Exception, match="should point to a list"):
        run_lookup(ctx, "subelements", ([{"k": 1}], "k"), {})


TEAM = {
    "site.yml": """
        - hosts: localhost
          gather_facts: false
          collections: [acme.tools]
          pre_tasks:
            - name: show default seen before the role runs
              debug: {msg: "{{ web_port }}"}
          roles:
            - web
            - acme.tools.greet
            - greeter
          tasks:
            - include_role: {name: priv}
            - include_role: {name: pub, public: true}
          post_tasks:
            - name: show role defaults and vars in post_tasks
              debug: {msg: "{{ web_port }} {{ web_dir }} {{ greeting }} {{ hidden_x | default('private') }} {{ shown_x }}"}
            - block:
                - name: fails
                  command: /bin/false
              rescue:
                - name: show failed task
                  debug: {msg: "{{ ansible_failed_task.name }}|{{ ansible_failed_task.action }}"}
            - block:
                - ansible.builtin.command: /bin/false
              rescue:
                - name: show unnamed failed task
                  debug: {msg: "[{{ ansible_failed_task.name }}]|{{ ansible_failed_task.action }}"}
            - include_tasks: more.yml
              args:
                apply: {tags: [extra]}
            - import_tasks: more.yml
    """,
    "more.yml": """
        - name: show included
          debug: {msg: "{{ ansible_run_tags | default(['x']) | length }}"}
    """,
    "roles/web/defaults/main.yml": "web_port: 8080\n",
    "roles/web/vars/main.yml": "web_dir: /srv/web\n",
    "roles/web/tasks/main.yml": """
        - block:
            - name: fails in role
              command: /bin/false
          rescue:
            - name: show failed task in role
              debug: {msg: "{{ ansible_failed_task.name }}"}
    """,
    "roles/priv/defaults/main.yml": "hidden_x: leaked\n",
    "roles/priv/tasks/main.yml": "- debug: {msg: hidden}\n",
    "roles/pub/defaults/main.yml": "shown_x: public\n",
    "roles/pub/tasks/main.yml": "- debug: {msg: shown}\n",
    "collections/ansible_collections/acme/tools/galaxy.yml": "namespace: acme\nname: tools\nversion: 1.0.0\n",
    "collections/ansible_collections/acme/tools/roles/greet/defaults/main.yml": "greeting: hello\n",
    "collections/ansible_collections/acme/tools/roles/greet/tasks/main.yml": """
        - name: show greeting from a collection role
          debug: {msg: "{{ greeting }} from {{ role_name }} ({{ ansible_role_name }})"}
    """,
    "collections/ansible_collections/acme/tools/roles/greeter/tasks/main.yml": """
        - name: show short name found through collections
          debug: {msg: "greeter {{ ansible_role_name }} {{ role_name }}"}
    """,
}


@pytest.mark.slow
@needs_ansible
def test_team_project_scope_failed_task_collections_like_ansible(tmp_path: Path) -> None:
    stats, msgs = same(tmp_path, TEAM)
    assert "fails|command" in msgs and "8080 /srv/web hello private public" in msgs
    assert "greeter acme.tools.greeter greeter" in msgs
    assert stats["rescued"] == 3


@pytest.mark.slow
@needs_ansible
def test_collections_path_from_the_environment_and_private_role_vars(tmp_path: Path) -> None:
    files = {
        "site.yml": """
            - hosts: localhost
              gather_facts: false
              roles: [acme.tools.greet]
              post_tasks:
                - name: show private
                  debug: {msg: "{{ greeting | default('private') }}"}
        """,
        "ansible.cfg": "[defaults]\nprivate_role_vars = True\ncollections_path = WORK/elsewhere\n",
        "elsewhere/ansible_collections/acme/tools/roles/greet/defaults/main.yml": "greeting: hi\n",
        "elsewhere/ansible_collections/acme/tools/roles/greet/tasks/main.yml": """
            - name: show greet
              debug: {msg: "{{ greeting }}"}
        """,
    }
    _, msgs = same(tmp_path, files, env={"ANSIBLE_CONFIG": "WORK/ansible.cfg"})
    assert msgs == ["hi", "private"]
    files["ansible.cfg"] = "[defaults]\n"
    _, msgs = same(
        tmp_path / "env",
        files,
        env={"ANSIBLE_CONFIG": "WORK/ansible.cfg", "ANSIBLE_COLLECTIONS_PATH": "WORK/elsewhere"},
    )
    assert msgs == ["hi", "hi"]


ARGS = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: skipped task with an unknown argument never fails the load
      file: {path: /nonexistent, bogus: 1}
      when: false
    - name: unknown argument fails when it runs
      file: {path: WORK/x, state: touch, bogus: 1}
      register: bad
      ignore_errors: true
    - name: show message
      debug: {msg: "{{ bad.msg.split('Unsupported ')[1].split('. Supported')[0] }}"}
    - name: an argument at Ansible's default is fine
      file: {path: WORK/y, state: touch, follow: true}
"""


@pytest.mark.slow
@needs_ansible
def test_argument_rules_like_ansible(tmp_path: Path) -> None:
    stats, msgs = same(tmp_path, {"site.yml": ARGS})
    assert msgs == ["parameters for (file) module: bogus"]  # provision adds the task's place
    assert stats["ignored"] == 1 and stats["skipped"] == 1


def test_collection_modules_map_to_native_ones_and_fqcn_roles_say_what_to_install(
    tmp_path: Path,
) -> None:
    from provision.engine.playbook import PlaybookError, iter_tasks, load_playbook

    project(
        tmp_path,
        {
            "site.yml": """
                - hosts: all
                  tasks:
                    - ansible.posix.sysctl: {name: vm.swappiness, value: "10"}
                    - ansible.posix.mount: {path: /mnt/x, state: unmounted}
                    - name: with_subelements is a loop, not a module
                      debug: {msg: "{{ item.1 }}"}
                      with_subelements: [[{k: [1]}], k]
            """,
            "bad.yml": """
                - hosts: all
                  roles: [devsec.hardening.os_hardening]
                  tasks:
                    - debug: {msg: x}
                      with_nosuchlookup: [1]
            """,
        },
    )
    tasks = iter_tasks(load_playbook(tmp_path / "site.yml").plays[0])
    assert [t.action for t in tasks] == ["sysctl", "mount", "debug"]
    assert (
        tasks[0].written_action == "ansible.posix.sysctl"
        and tasks[2].loop_kind == "with_subelements"
    )
    with pytest.raises(PlaybookError) as err:
        load_playbook(tmp_path / "bad.yml")
    text = str(err.value)
    assert "role 'devsec.hardening.os_hardening' not found in the collections paths" in text
    assert "ansible-galaxy collection install devsec.hardening" in text
    assert "with_nosuchlookup: lookup plugin 'nosuchlookup' is not supported" in text


UNDERSCORE_FACT = """
- hosts: localhost
  gather_facts: false
  vars: {opts: rw}
  tasks:
    # devsec.os_hardening's minimize_access.yml: a fact whose name starts with "_"
    - set_fact: {_proc_mnt_options: "{{ opts }},hidepid=2"}
    - name: show fact
      debug: {msg: "{{ _proc_mnt_options }}"}
"""


@pytest.mark.slow
@needs_ansible
def test_set_fact_name_starting_with_underscore_like_ansible(tmp_path: Path) -> None:
    stats, msgs = same(tmp_path, {"site.yml": UNDERSCORE_FACT})
    assert msgs == ["rw,hidepid=2"] and stats["ok"] == 2, (stats, msgs)


MOUNTS = """
- hosts: localhost
  gather_facts: true
  tasks:
    # mullholland.motd's /etc/motd lists these: setup's rules decide which mounts and fields
    - name: show mounts
      debug:
        msg: >-
          {{ item.device }} {{ item.mount }} {{ item.fstype }} {{ item.options }} {{ item.dump }}
          {{ item.passno }} {{ item.uuid }} {{ item.block_size }} {{ item.size_total }}
          {{ item.inode_total }} {{ item.keys() | sort | join(',') }}
      loop: "{{ ansible_mounts | sort(attribute='mount') }}"
"""


@pytest.mark.slow
@needs_ansible
def test_ansible_mounts_by_setups_rules(tmp_path: Path) -> None:
    stats, msgs = same(tmp_path, {"site.yml": MOUNTS})
    assert msgs and all(" / " in m or m.split()[1] != "/" for m in msgs), msgs


INCLUDE_LOOP_FAILS = """
- hosts: localhost
  gather_facts: false
  tasks:
    # robertdebock.users: `include_tasks: user.yml` over 12 users, the 9th's tasks fail
    - include_tasks: {file: inc.yml}
      loop: ["true", "false", "true"]
      loop_control: {loop_var: x}
"""


@pytest.mark.slow
@needs_ansible
def test_an_include_loop_counts_every_item_before_its_tasks_like_ansible(tmp_path: Path) -> None:
    files = {"site.yml": INCLUDE_LOOP_FAILS, "inc.yml": "- command: /bin/{{ x }}\n"}
    stats, _ = same(tmp_path, files)
    assert stats["ok"] == 4 and stats["failed"] == 1, stats  # 3 includes + the first command


LOCAL_CWD = """
- hosts: localhost
  gather_facts: false
  tasks:
    # robertdebock.users: `users_ssh_key_directory: ssh_keys`, made with delegate_to: localhost
    - file: {path: keys, state: directory, mode: "0750"}
      delegate_to: localhost
    - name: show where
      command: {cmd: "true", creates: keys/k}
      register: made
    - name: show made
      debug: {msg: "{{ made.changed }}"}
"""


@pytest.mark.slow
@needs_ansible
def test_local_steps_run_in_the_playbook_directory_like_ansible(tmp_path: Path) -> None:
    files = {"site.yml": LOCAL_CWD, "keys/k": "a key the project ships\n"}
    stats, msgs = same(tmp_path, files)
    # `creates: keys/k` found the project's file: the command did not run
    assert msgs == ["Did not run command since 'keys/k' exists", False], (stats, msgs)


def test_mount_uuids_come_from_udevs_links_without_starting_a_process(tmp_path: Path) -> None:
    """setup's `uuid` (lsblk's UUID column) read from /dev/disk/by-uuid, device-mapper names too:
    a facts call starts no process for it (the agent's facts import no subprocess)."""
    from provision.agent.facts import setup_mounts

    by_uuid = tmp_path / "dev" / "disk" / "by-uuid"
    by_uuid.mkdir(parents=True)
    (tmp_path / "dev" / "sda1").touch()
    (tmp_path / "dev" / "dm-0").touch()
    (by_uuid / "1b2c-33").symlink_to("../../sda1")
    (by_uuid / "9f0e8d7c-aaaa").symlink_to("../../dm-0")
    (tmp_path / "dev" / "mapper").mkdir()
    (tmp_path / "dev" / "mapper" / "vg-root").symlink_to("../dm-0")
    uuids = setup_mounts._uuids(str(tmp_path))
    assert uuids[str(tmp_path / "dev" / "sda1")] == "1b2c-33"
    assert uuids["/dev/mapper/vg-root"] == "9f0e8d7c-aaaa"
    assert setup_mounts._uuids(str(tmp_path / "nothing")) == {}  # a container: "N/A" for every mount
