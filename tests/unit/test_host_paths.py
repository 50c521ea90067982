"""Host-derived path segments are never paths (issue 29, defect 2): a host's fact or output joined
into a controller path (include_vars, vars_files, template src, include_tasks, with_first_found,
fetch dest) may be one plain segment only — `../..`, `/`, NUL or an absolute path is refused with
the variable's name and value, and the file it points at is never read. Real playbooks on
LocalConnection; the host's word is a gathered fact (ansible_env) or a command's output."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from provision.engine.host_paths import segment_problem
from provision.engine.playbook_model import PlaybookError
from provision.engine.results import PlaybookResult
from provision.engine.runner import run_playbook
from provision.inventory.model import Host


def play(tmp_path: Path, text: str) -> PlaybookResult:
    pb = tmp_path / "project" / "site.yml"
    pb.parent.mkdir(exist_ok=True)
    pb.write_text(textwrap.dedent(text).replace("TMP", str(tmp_path)).lstrip("\n"))
    return run_playbook(pb, hosts=[Host("localhost", local=True)])


def failures(result: PlaybookResult) -> list[str]:
    return [r.msg for r in result.results if r.status == "failed"]


@pytest.fixture
def controller(tmp_path: Path) -> Path:
    """A file outside the project a hostile host would like loaded as variables: rendering it
    creates PWNED (a fetched file is never a template; threat model)."""
    (tmp_path / "project" / "vars").mkdir(parents=True)
    (tmp_path / "project" / "vars" / "Debian.yml").write_text("family_file: debian\n")
    (tmp_path / "project" / "templates").mkdir()
    (tmp_path / "project" / "templates" / "Debian.j2").write_text("ok\n")
    (tmp_path / "project" / "Debian-tasks.yml").write_text("- debug: msg=included\n")
    evil = tmp_path / "fetched" / "evil.yml"
    evil.parent.mkdir()
    evil.write_text(f"stolen: \"{{{{ lookup('pipe', 'touch {tmp_path}/PWNED') }}}}\"\n")
    (tmp_path / "fetched" / "evil.j2").write_text("stolen\n")
    (tmp_path / "fetched" / "evil-tasks.yml").write_text("- debug: msg=stolen\n")
    return tmp_path


# what a host may say its os family is, and the relative climb to the planted file from vars/
HOSTILE = ["../../fetched/evil", "{abs}/fetched/evil"]


@pytest.mark.parametrize("word", HOSTILE)
def test_a_host_fact_never_picks_the_vars_file(controller: Path, word: str, monkeypatch: pytest.MonkeyPatch) -> None:
    word = word.format(abs=controller)
    monkeypatch.setenv("PV_OS_FAMILY", word)  # ansible_env: a fact the host reports
    result = play(controller, """
        - hosts: localhost
          gather_facts: true
          tasks:
            - include_vars: "{{ ansible_env.PV_OS_FAMILY }}.yml"
            - name: show stolen
              debug: var=stolen
        """)
    assert not (controller / "PWNED").exists()
    msgs = failures(result)
    assert msgs and "host data PV_OS_FAMILY = " + repr(word) in msgs[0] and "include_vars file" in msgs[0], msgs
    assert "never a path" in msgs[0]


@pytest.mark.parametrize(
    ("task", "where"),
    [
        ('include_vars: "vars/{{ fam.stdout }}.yml"', "include_vars file"),
        ('template: src="{{ fam.stdout }}.j2" dest=TMP/out.txt', "template src"),
        ('include_tasks: "{{ fam.stdout }}-tasks.yml"', "include_tasks"),
        ('debug: msg={{ item }}\n              with_first_found: ["vars/{{ fam.stdout }}.yml"]', "with_first_found"),
        ('fetch: src=/etc/hostname dest="TMP/out/{{ fam.stdout }}" flat=true', "fetch dest"),
    ],
)
def test_registered_output_is_one_segment_everywhere(controller: Path, task: str, where: str) -> None:
    (controller / "word.txt").write_text("../../fetched/evil\n")
    result = play(controller, f"""
        - hosts: localhost
          gather_facts: false
          tasks:
            - command: cat TMP/word.txt
              register: fam
            - {task}
        """)
    msgs = failures(result)
    assert msgs and where in msgs[0] and "host data stdout = '../../fetched/evil'" in msgs[0], msgs
    assert not (controller / "out.txt").exists() and not (controller / "out").exists()
    assert not any("stolen" in str(r.result) for r in result.results)


def test_set_fact_keeps_the_hosts_word_and_vars_files_refuse_it(controller: Path) -> None:
    (controller / "word.txt").write_text("../fetched/evil\n")
    with pytest.raises(PlaybookError) as err:
        play(controller, """
            - hosts: localhost
              gather_facts: false
              tasks:
                - command: cat TMP/word.txt
                  register: fam
                - set_fact:
                    family: "{{ fam.stdout }}"
            - hosts: localhost
              gather_facts: false
              vars_files:
                - "{{ family }}.yml"
              tasks:
                - debug: var=stolen
            """)
    assert not (controller / "PWNED").exists()
    assert "vars_files: host data family = '../fetched/evil' holds '/'" in str(err.value)


def test_plain_segments_and_the_projects_own_paths_still_work(controller: Path) -> None:
    (controller / "word.txt").write_text("Debian\n")
    result = play(controller, """
        - hosts: localhost
          gather_facts: false
          tasks:
            - command: cat TMP/word.txt
              register: fam
            - include_vars: "{{ playbook_dir }}/vars/{{ fam.stdout }}.yml"
            - include_vars: "{{ item }}"
              loop: ["vars/Debian.yml", "TMP/project/vars/Debian.yml"]
            - template: src="{{ fam.stdout }}.j2" dest=TMP/out.txt
            - include_tasks: "{{ fam.stdout }}-tasks.yml"
            - debug: msg="{{ item }}"
              with_first_found: ["vars/{{ fam.stdout | lower }}.yml", "vars/{{ fam.stdout }}.yml"]
            - name: show family
              debug: var=family_file
        """)
    assert result.ok, failures(result)
    assert (controller / "out.txt").read_text() == "ok\n"
    shown = [r.result for r in result.results if r.task == "show family"]
    assert shown and shown[0]["family_file"] == "debian"


def test_the_segment_rule() -> None:
    for bad in ("../x", "a/b", "/etc/passwd", "~root", "a..b", "..", ".", "x\x00y"):
        assert segment_problem(bad), bad
    for good in ("Debian", "Ubuntu-22.04", "rhel_9", ".yml", "x.y.z", "v1"):
        assert segment_problem(good) is None, good
