"""Engine gaps the public roles corpus (tests/roles_corpus/STATUS.md) hit, each compared with
ansible-playbook on the same project (connection local; recaps and `show*` messages match)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.test_engine_real_roles import needs_ansible, same

pytestmark = [pytest.mark.slow, needs_ansible]


def test_relative_role_path_from_a_molecule_converge(tmp_path: Path) -> None:
    """`role: ../../../` is joined to `<playbook_dir>/roles/` and normalised lexically (that
    folder need not exist); the role keeps the name it was given."""
    stats, msgs = same(
        tmp_path,
        {
            "site.yml": """
            - import_playbook: role/molecule/default/converge.yml
            """,
            "role/molecule/default/converge.yml": """
            - hosts: localhost
              gather_facts: false
              roles:
                - role: ../../../
            """,
            "role/tasks/main.yml": """
            - name: show name
              debug: {msg: "{{ role_name }} {{ role_path | basename }}"}
            """,
        },
    )
    assert msgs == ["../../../ role"] and stats["ok"] == 1


needs_apt = pytest.mark.skipif(
    not Path("/usr/bin/apt-get").exists() or os.geteuid() != 0, reason="needs an apt host, as root"
)


@needs_apt
def test_empty_package_lists_and_package_update_cache_like_ansible(tmp_path: Path) -> None:
    """`apt`/`package` with `name: []` is nothing to do; `package: update_cache` alone goes to
    apt (no name, no state), changed when the lists are (would be) refreshed."""
    stats, _ = same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              vars: {ansible_pkg_mgr: apt}
              tasks:
                - name: package only refreshes the lists
                  package: {update_cache: true, cache_valid_time: 1}
                  check_mode: true
                - apt: {name: [], state: latest}
                - package: {name: [], state: latest}
            """,
        },
    )
    assert stats["ok"] == 3 and stats["failed"] == 0


def test_block_notify_and_import_tasks_keywords_like_ansible(tmp_path: Path) -> None:
    """A block's `notify` goes to its tasks (a task's own wins); `import_tasks` takes
    `delegate_to`, `run_once` and `notify` and applies them to each imported task."""
    stats, msgs = same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              tasks:
                - block:
                    - name: changes
                      command: "true"
                    - name: changes too
                      command: "true"
                      notify: own
                  notify: from block
                - import_tasks: assert.yml
                  run_once: true
                  delegate_to: localhost
                  notify: from import
              handlers:
                - name: from block
                  debug: {msg: block}
                - name: own
                  debug: {msg: own}
                - name: from import
                  debug: {msg: import}
            """,
            "assert.yml": """
            - name: show imported
              debug: {msg: "{{ inventory_hostname }}"}
              changed_when: true
            """,
        },
    )
    assert msgs == ["localhost"] and stats["ok"] == 6


def test_memory_mb_fact_like_ansible(tmp_path: Path) -> None:
    """`ansible_memory_mb` (real / nocache / swap, in MiB) as Ansible's Linux facts build it:
    its shape, and the totals, which do not move between the two runs."""
    stats, msgs = same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: true
              tasks:
                - name: show keys
                  debug:
                    msg: >-
                      {{ ansible_memory_mb.keys() | sort }}
                      {{ ansible_memory_mb.real.keys() | sort }}
                      {{ ansible_memory_mb.nocache.keys() | sort }}
                      {{ ansible_facts.memory_mb.swap.keys() | sort }}
                - name: show totals
                  debug:
                    msg: >-
                      {{ ansible_memory_mb.real.total == ansible_memtotal_mb }}
                      {{ ansible_memory_mb.swap.total == ansible_swaptotal_mb }}
                      {{ ansible_memory_mb.real.used + ansible_memory_mb.real.free
                         == ansible_memory_mb.real.total }}
                      {{ ansible_memory_mb.swap.used + ansible_memory_mb.swap.free
                         == ansible_memory_mb.swap.total }}
                      {{ ansible_memory_mb.nocache.free >= ansible_memory_mb.real.free }}
                      {{ ansible_swapfree_mb == ansible_memory_mb.swap.free }}
            """,
        },
    )
    assert msgs[1].split() == ["True"] * 6 and stats["failed"] == 0


def test_remote_src_copy_modes_like_ansible(tmp_path: Path) -> None:
    """`copy: remote_src: true` without `mode`: a new file gets the default mode (0666 & ~umask),
    an existing one the source's (Ansible copies the source's stat, then moves it over)."""
    stats, msgs = same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              tasks:
                - copy: {dest: WORK/src.sh, content: "#!/bin/sh\\n", mode: "0755"}
                - copy: {dest: WORK/old.sh, content: "old\\n", mode: "0600"}
                - copy: {src: WORK/src.sh, dest: WORK/new.sh, remote_src: true}
                - copy: {src: WORK/src.sh, dest: WORK/old.sh, remote_src: true}
                - stat: {path: WORK/new.sh}
                  register: new
                - stat: {path: WORK/old.sh}
                  register: old
                - name: show modes
                  debug: {msg: "{{ new.stat.mode }} {{ old.stat.mode }} {{ old.stat.checksum }}"}
            """,
        },
    )
    assert msgs[0].split()[1] == "0755" and stats["changed"] == 4


def test_action_plugin_modules_and_dynamic_includes_fail_only_when_run(tmp_path: Path) -> None:
    """A `reboot` handler (empty args, `when:`) is registered though provision can't run it,
    and a skipped `reboot` task is no error; a module nobody has, in a file reached only by a
    skipped `include_tasks`/`include_role`, fails nothing: Ansible resolves both when they run."""
    stats, msgs = same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              vars: {do_reboot: false, selinux: false}
              tasks:
                - name: reboot if asked
                  ansible.builtin.reboot:
                  when: do_reboot
                - name: changes
                  command: "true"
                  notify: Reboot
                - include_tasks: selinux.yml
                  when: selinux
                - include_role: {name: sel}
                  when: selinux
                - name: show done
                  debug: {msg: done}
              handlers:
                - name: Reboot
                  ansible.builtin.reboot:
                  when: do_reboot
            """,
            "selinux.yml": """
            - name: a module no one installed
              nobody.nowhere.seport: {ports: 22, proto: tcp, setype: ssh_port_t}
            """,
            "roles/sel/tasks/main.yml": """
            - nobody.nowhere.sefcontext: {target: /x, setype: y}
            """,
        },
    )
    assert msgs == ["done"] and stats["skipped"] == 4 and stats["failed"] == 0


def test_unavailable_modules_fail_when_they_run(tmp_path: Path) -> None:
    """The stand-ins fail the task that runs, saying why (no host is rebooted behind a recap)."""
    from provision.engine.runner import run_playbook
    from provision.inventory.model import Host

    (tmp_path / "inc.yml").write_text("- nobody.nowhere.seport: {ports: 22}\n")
    (tmp_path / "site.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.reboot:\n      ignore_errors: true\n"
        "    - include_tasks: inc.yml\n"
    )
    result = run_playbook(tmp_path / "site.yml", hosts=[Host("localhost", local=True)])
    failed = [r.result.get("msg", "") for r in result.results if r.status == "failed"]
    assert len(failed) == 2
    assert "action plugin" in failed[0] and "nobody.nowhere" in failed[1]


COMMENTS = [
    "'one' | comment",
    "'one\\ntwo' | comment",
    "'a\\n\\nb\\n' | comment",
    "'x' | comment('erlang')",
    "'x\\ny' | comment('c')",
    "'x\\ny' | comment('cblock')",
    "'x\\ny' | comment('xml')",
    "'x' | comment(decoration='; ')",
    "'x' | comment('cblock', decoration='** ')",
    "'x' | comment(prefix='#!', prefix_count=2, postfix='##', postfix_count=3)",
    "'x' | comment(prefix='\\n', postfix='')",
    "'x' | comment(beginning='BEGIN', end='END')",
    "'x\\r\\ny' | comment(newline='\\r\\n')",
    "'Managed' | comment('plain', prefix='#' * 4, postfix='#' * 4)",
]


def test_comment_filter_like_ansible(tmp_path: Path) -> None:
    """Each style and option of the `comment` filter renders as Ansible renders it."""
    tasks = "".join(
        f"    - name: show {i}\n      debug: {{msg: \"{{{{ {expr} }}}}\"}}\n"
        for i, expr in enumerate(COMMENTS)
    )
    stats, msgs = same(
        tmp_path,
        {"site.yml": "- hosts: localhost\n  gather_facts: false\n  tasks:\n" + tasks},
    )
    assert len(msgs) == len(COMMENTS) and msgs[0] == "#\n# one\n#"


def test_ansible_connection_is_defined_like_ansible(tmp_path: Path) -> None:
    """Roles test `ansible_connection not in [container, docker]`: it is defined for every task."""
    stats, msgs = same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              tasks:
                - name: show connection
                  debug: {msg: "{{ ansible_connection not in ['container', 'docker'] }}"}
            """,
        },
    )
    assert msgs == [True] and stats["failed"] == 0
