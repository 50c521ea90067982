"""provision's ansible-playbook-compatible entry point (`python -m provision.cli.ansible_playbook`)
against the real ansible-playbook: the same command line gives the same default-callback lines
(PLAY/TASK banners, `ok: [host]`, `changed:`, `skipping:`, `...ignoring`, PLAY RECAP) and the same
exit code, so scripts that grep Ansible's output (ansible-core's own runme.sh tests, CI jobs) read
provision's unchanged. Also the search path Ansible gives lookups in a role's tasks/ directory
(setup_remote_tmp_dir's `include_tasks: "{{ lookup('first_found', files) }}"`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSIBLE = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.access(ANSIBLE, os.X_OK), reason="ansible-core not installed"),
]

PLAYBOOK = """
- hosts: testhost
  gather_facts: false
  tasks:
    - debug: msg=hello
    - name: a change
      command: echo hi
    - debug: var=x
      vars: {x: [1, 2]}
    - command: "true"
      when: false
    - debug: msg="{{ item }}"
      loop: [a, b]
    - command: echo {{ item }}
      loop: [a]
    - name: ignored failure
      fail: msg=boom
      ignore_errors: true
    - set_fact: y=1
    - import_role: {name: r}
- hosts: testhost
  gather_facts: false
  name: second
  tasks:
    - fail: msg=real
"""

KEPT = ("PLAY [", "PLAY RECAP", "TASK [", "ok: [", "changed: [", "skipping: [", "fatal: [",
        "...ignoring", "testhost ", "included: ")


def _project(tmp_path: Path, playbook: str) -> Path:
    (tmp_path / "p.yml").write_text(playbook)
    (tmp_path / "inv").write_text(
        f"[g]\ntesthost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    )
    role = tmp_path / "roles" / "r" / "tasks"
    role.mkdir(parents=True)
    (role / "main.yml").write_text(textwrap.dedent("""\
        - include_tasks: "{{ lookup('first_found', files) }}"
          vars:
            files: ["{{ 'nonesuch' }}.yml", default.yml]
        """))
    (role / "default.yml").write_text("- name: from default\n  debug: msg=found\n")
    return tmp_path


def _run(tool: list[str], cwd: Path, *args: str) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=str(cwd / "ansible.cfg"),
               ANSIBLE_LOCAL_TEMP=str(cwd / ".atmp"), PYTHONPATH=str(REPO))
    (cwd / "ansible.cfg").write_text("")
    proc = subprocess.run([*tool, "-i", "inv", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    lines = [ln.rstrip() for ln in proc.stdout.splitlines()]
    return proc.returncode, [ln for ln in lines if ln.startswith(KEPT)]


PROVISION = [sys.executable, "-m", "provision.cli.ansible_playbook"]


def _fatal_msg(line: str) -> str:
    return line.split("=>", 1)[0] if line.startswith("fatal: [") else line


def test_output_and_exit_code_match_ansible_playbook(tmp_path: Path) -> None:
    project = _project(tmp_path, PLAYBOOK)
    a_rc, a_lines = _run([ANSIBLE], project, "p.yml")
    p_rc, p_lines = _run(PROVISION, project, "p.yml")
    # the modules' result keys differ in detail (timestamps); the line before `=>` must not
    a_lines = [_fatal_msg(ln) for ln in a_lines if not ln.startswith("included: ")]
    p_lines = [_fatal_msg(ln) for ln in p_lines if not ln.startswith("included: ")]
    assert (p_rc, p_lines) == (a_rc, a_lines)
    assert a_rc == 2 and "ok: [testhost] => {" in a_lines  # the playbook exercised what it should


def test_first_found_finds_a_file_beside_the_roles_tasks(tmp_path: Path) -> None:
    project = _project(tmp_path, "- hosts: testhost\n  gather_facts: false\n  roles: [r]\n")
    a_rc, a_lines = _run([ANSIBLE], project, "p.yml")
    p_rc, p_lines = _run(PROVISION, project, "p.yml")
    assert a_rc == 0 and "TASK [r : from default] " in " ".join(a_lines)
    assert p_rc == 0, p_lines
    assert [ln for ln in p_lines if ln.startswith("TASK [r : from")] == [
        ln for ln in a_lines if ln.startswith("TASK [r : from")
    ]
    assert p_lines[-1] == a_lines[-1]  # the recap line


def test_an_unsupported_flag_is_refused_by_name(tmp_path: Path) -> None:
    project = _project(tmp_path, PLAYBOOK)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([*PROVISION, "p.yml", "--vault-password-file", "x"], cwd=project,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 5
    assert "--vault-password-file is not supported" in proc.stderr


def test_first_found_in_a_role_searches_its_tasks_dir_as_ansible(tmp_path: Path) -> None:
    """Ansible's `ansible_search_path` (the role, then the task file's own directory): a
    first_found in roles/r/tasks/main.yml finds roles/r/tasks/default.yml (failed on 903c471:
    only roles/r/files, roles/r and the playbook's dir were searched)."""
    from provision.engine.runner import run_playbook

    project = _project(tmp_path, "- hosts: localhost\n  gather_facts: false\n  roles: [r]\n")
    result = run_playbook(project / "p.yml")
    assert [r.task for r in result.results if r.status == "failed"] == []
    assert [r.result.get("msg") for r in result.results if r.task == "r : from default"] == [
        "found"
    ]


# Each: a form Ansible runs that provision refused or got wrong on 903c471 (found by the
# conformance harness, tests/conformance/). Both tools run it; banners, statuses, debug output,
# recap and exit code must be the same.
GAPS = {
    "delay_in_fractions_of_a_second": """
    - command: "true"
      register: r
      retries: 2
      delay: 0.01
      until: r is success
    """,
    "now_global": """
    - debug:
        msg: "{{ now().year > 2000 and now(utc=true, fmt='%Y') | int > 2000 }}"
    """,
    "unsafe_yaml_tag_is_never_rendered": """
    - debug:
        msg: !unsafe "{{ not_a_variable }}"
    """,
    "template_as_a_key_in_key_value_text": """
    - set_fact: "{{ item }}=moo {{ 'x' + item }}={{ item }}"
      with_items: [a]
    - debug: msg="{{ a }} {{ xa }}"
    """,
    "lookup_of_several_non_strings_is_the_list": """
    - debug:
        msg: "{{ lookup('dict', {'b': 2, 'a': 1}) | sort(attribute='key') }}"
    """,
    "undef_global": """
    - debug:
        msg: "{{ undef() is undefined and undef('h') | default('d') == 'd' }}"
    """,
    "mathstuff_and_url_filters": """
    - debug:
        msg: "{{ [100 | log(10), 2 | pow(3), 9 | root, 27 | root(3) | round(6), 'a%20b+c' | urldecode,
                 'http://h.x:90/d?q=1#f' | urlsplit, 'http://h.x/d' | urlsplit('path')] }}"
    """,
    "arguments_as_one_template": """
    - assert: "{{ item }}"
      args:
        quiet: true
      loop:
        - that: 1 == 1
        - that: ['2 == 2', 'x == "one"']
      vars: {x: one}
    - debug: "{{ {'msg': 'from a mapping'} }}"
    """,
}


@pytest.mark.parametrize("case", sorted(GAPS))
def test_a_form_provision_refused_now_runs_as_ansible(tmp_path: Path, case: str) -> None:
    tasks = textwrap.indent(textwrap.dedent(GAPS[case]).strip(), "    ")
    project = _project(tmp_path, f"- hosts: testhost\n  gather_facts: false\n  tasks:\n{tasks}\n")
    a_rc, a_out = _run_all([ANSIBLE], project)
    p_rc, p_out = _run_all(PROVISION, project)
    assert a_rc == 0, a_out
    assert (p_rc, p_out) == (a_rc, a_out)


def _run_all(tool: list[str], cwd: Path) -> tuple[int, list[str]]:
    """Like _run, keeping debug's JSON body lines too."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=str(cwd / "ansible.cfg"),
               ANSIBLE_LOCAL_TEMP=str(cwd / ".atmp"), PYTHONPATH=str(REPO))
    (cwd / "ansible.cfg").write_text("")
    proc = subprocess.run([*tool, "-i", "inv", "p.yml"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    lines = [ln.rstrip() for ln in proc.stdout.splitlines()]
    return proc.returncode, [ln for ln in lines if ln.startswith((*KEPT, "    ", "}"))]


@pytest.mark.parametrize("case", sorted(GAPS))
def test_a_form_provision_refused_now_runs_in_the_engine(tmp_path: Path, case: str) -> None:
    from provision.engine.runner import run_playbook

    tasks = textwrap.indent(textwrap.dedent(GAPS[case]).strip(), "    ")
    book = tmp_path / "p.yml"
    book.write_text(f"- hosts: localhost\n  gather_facts: false\n  tasks:\n{tasks}\n")
    result = run_playbook(book)
    assert [(r.task, r.msg) for r in result.results if r.status == "failed"] == []
    assert result.recap["localhost"].ok == len(result.results)
    if case == "unsafe_yaml_tag_is_never_rendered":
        assert result.results[0].result["msg"] == "{{ not_a_variable }}"


def test_import_tasks_in_handlers_gives_handlers(tmp_path: Path) -> None:
    """ansible-core's `includes` target: a role's handlers/main.yml that is `- import_tasks:
    more.yml`, and a play's handlers that import a file (903c471: 'no handler named ...')."""
    from provision.engine.runner import run_playbook

    role = tmp_path / "roles" / "h"
    (role / "tasks").mkdir(parents=True)
    (role / "handlers").mkdir()
    (role / "tasks" / "main.yml").write_text(
        "- command: echo 1\n  notify: [from role import]\n"
    )
    (role / "handlers" / "main.yml").write_text("- import_tasks: more.yml\n")
    (role / "handlers" / "more.yml").write_text("- name: from role import\n  debug: msg=r\n")
    (tmp_path / "play_handlers.yml").write_text("- name: from play import\n  debug: msg=p\n")
    book = tmp_path / "p.yml"
    book.write_text(textwrap.dedent("""\
        - hosts: localhost
          gather_facts: false
          roles: [h]
          tasks:
            - command: echo 2
              notify: from play import
          handlers:
            - import_tasks: play_handlers.yml
        """))
    result = run_playbook(book)
    ran = [r.task for r in result.results if r.action == "debug"]
    assert sorted(ran) == ["from play import", "h : from role import"]
