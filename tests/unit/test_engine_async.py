"""`async:`/`poll:` and async_status (issue 28; ansible-core's async_fail and script targets),
compared with ansible-playbook on the same project (connection local; every `show*` debug
message and the recap must match): a poll: 0 job read until it finishes and cleaned up, a job
its time limit ends (read by async_status, or by the task's own polling), poll > 0 with its job
keys,
and an action that refuses async."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_engine_real_roles import needs_ansible, same

pytestmark = [pytest.mark.slow, needs_ansible]

SITE = r"""
- hosts: localhost
  gather_facts: false
  tasks:
    - shell: sleep 1; echo done > WORK/marker; echo done
      async: 30
      poll: 0
      register: job
    - name: show started
      debug: {msg: "{{ [job.started, job.finished, job is changed, job.ansible_job_id is match('j\\d+\\.\\d+')] }}"}
    - async_status: {jid: "{{ job.ansible_job_id }}"}
      register: st
      # Ansible's async_wrapper may not have written the job's file yet: not found, retried
      until: st is finished and st.msg | default('') != 'could not find job'
      retries: 60
      delay: 0.5
    - name: show finished
      debug: {msg: "{{ [st.stdout, st.finished, st is changed, st.rc, lookup('file', 'WORK/marker')] }}"}
    - async_status: {jid: "{{ job.ansible_job_id }}", mode: cleanup}
      register: cleaned
    - async_status: {jid: "{{ job.ansible_job_id }}"}
      register: gone
      ignore_errors: true
    - name: show cleaned
      debug: {msg: "{{ [cleaned.erased is defined, gone is failed, gone.msg] }}"}
    - shell: sleep 20
      async: 1
      poll: 0
      register: slow
    - async_status: {jid: "{{ slow.ansible_job_id }}"}
      register: ended
      until: ended is finished and ended.msg | default('') != 'could not find job'
      retries: 60
      delay: 0.5
      ignore_errors: true
    - name: show ended
      debug: {msg: "{{ [ended is failed, ended.msg] }}"}
    - command: echo polled
      async: 10
      poll: 1
      register: polled
    - name: show polled
      debug: {msg: "{{ [polled.stdout, polled is finished, polled.ansible_job_id is match('j\\d+\\.\\d+')] }}"}
    - shell: sleep 20
      async: 1
      poll: 3
      register: too_long
      ignore_errors: true
    - name: show too long
      debug: {msg: "{{ [too_long is failed, too_long.msg] }}"}
    - script: WORK/x.sh
      async: 2
      register: refused
      ignore_errors: true
    - name: show refused
      debug: {msg: "{{ refused.msg }}"}
"""


def test_async_jobs_poll_and_async_status_as_ansible(tmp_path: Path) -> None:
    # an absolute job folder: Ansible's wrapper expands `~` by $HOME (the tests' own), its
    # async_status by the account's home
    env = {"ANSIBLE_ASYNC_DIR": "WORK/.ansible_async"}
    stats, msgs = same(tmp_path, {"site.yml": SITE, "x.sh": "#!/bin/sh\necho x\n"}, env=env)
    assert msgs.count([True, "Timeout exceeded"]) == 2  # the job its limit ended, both ways
