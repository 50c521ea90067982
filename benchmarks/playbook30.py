"""The 30-task workload of benchmarks/run_bench.py: one playbook of 30 everyday tasks (files,
copies, templates, lineinfile, commands, loops, set_fact, a handler) run on 8 fleet hosts by
`provision run` and by ansible-playbook (pipelining, ControlPersist, no fact gathering)."""

from __future__ import annotations

import textwrap
from pathlib import Path

GOAL = 0.2  # provision's time / ansible-playbook's (issue 11)


def write_playbook30(work: Path) -> Path:
    (work / "tpl30.j2").write_text("host={{ inventory_hostname }} n={{ n }}\n")
    tasks = [
        "- file: path=/tmp/b30 state=directory mode=0755",
        "- set_fact: n=30",
    ]
    for i in range(8):
        tasks.append(f"- copy: dest=/tmp/b30/c{i}.txt content='copy {i}\\n' mode=0644")
    for i in range(4):
        tasks.append(f"- template: src={work}/tpl30.j2 dest=/tmp/b30/t{i}.conf mode=0640")
    for i in range(4):
        tasks.append(f"- lineinfile: path=/tmp/b30/c{i}.txt line='extra {i}' create=true mode=0644")
    for i in range(4):
        tasks.append(f"- command: echo step {i}\n  changed_when: false")
    tasks.append("- command: nproc\n  register: cpus\n  changed_when: false")
    tasks.append("- stat: path=/tmp/b30/c0.txt\n  register: st")
    tasks.append("- file: path=/tmp/b30/sub/{{ item }} state=directory mode=0755\n  loop: [a, b]")
    tasks.append(
        "- copy: dest=/tmp/b30/cpus.txt content='{{ cpus.stdout }}\\n' mode=0644\n  notify: done"
    )
    tasks.append("- shell: test -f /tmp/b30/c0.txt\n  changed_when: false")
    tasks.append("- debug: msg='{{ st.stat.exists }}'")
    tasks.append("- file: path=/tmp/b30/link src=/tmp/b30/c0.txt state=link")
    tasks.append("- assert:\n    that: [st.stat.exists]")
    assert len(tasks) == 30, len(tasks)
    body = "\n".join(textwrap.indent(t, "    ") for t in tasks)
    path = work / "bench30.yml"
    path.write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n" + body + "\n"
        "  handlers:\n    - name: done\n      command: 'true'\n"
    )
    return path
