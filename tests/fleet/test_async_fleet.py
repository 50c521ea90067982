"""`async:`/`poll:` and async_status on real SSH hosts (issue 28): a `poll: 0` job per host runs
its command on that host while the play goes on, async_status reads it there (and only there:
another host's job id is not found) and cleans it up; a job its `async` limit ends is stopped
on the host, its task failing with async_wrapper's words; a job still running when the run ends
is stopped on its host."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from polling import wait_until

from provision.connection.base import ConnectOptions
from provision.engine.runner import run_playbook

PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - shell: sleep 1; hostname > /tmp/pv-async-{{ inventory_hostname }}; cat /tmp/pv-async-{{ inventory_hostname }}
      async: 60
      poll: 0
      register: job
    - name: while the job runs
      command: "true"
    - async_status: jid={{ job.ansible_job_id }}
      register: st
      until: st is finished
      retries: 120
      delay: 0.5
    - name: another host's job
      async_status:
        jid: "{{ hostvars[ansible_play_hosts | difference([inventory_hostname]) | first].job.ansible_job_id }}"
      register: foreign
      ignore_errors: true
    - async_status: jid={{ job.ansible_job_id }} mode=cleanup
      register: cleaned
    - shell: sleep 37.25
      async: 2
      poll: 1
      register: capped
      ignore_errors: true
    - name: left running
      shell: sleep 41.75
      async: 120
      poll: 0
"""


def registered(result: Any, host: str, task: str) -> dict[str, Any]:
    return next(r.result for r in result.results if r.host == host and r.task == task)


def test_async_jobs_run_on_each_host_and_async_status_reads_them(
    tmp_path: Path, fleet: Any, ssh_options: ConnectOptions
) -> None:
    pb = tmp_path / "site.yml"
    pb.write_text(textwrap.dedent(PLAY).lstrip())
    hosts = fleet.provision_hosts()[:2]
    result = run_playbook(pb, hosts=hosts, options=ssh_options)
    assert result.failed_hosts == []
    for host in fleet.hosts[:2]:
        job = registered(result, host.name, "shell")
        assert job["started"] is True and job["finished"] is False
        on_host = fleet.ns_exec(host, f"cat /tmp/pv-async-{host.name}").stdout.strip()
        st = registered(result, host.name, "async_status")
        assert st["finished"] is True and st["rc"] == 0
        assert st["stdout"] == on_host and on_host  # the job ran on this host
        assert st["ansible_job_id"] == job["ansible_job_id"]
        foreign = registered(result, host.name, "another host's job")
        assert foreign["failed"] is True and foreign["msg"] == "could not find job"
        capped = [r for r in result.results if r.host == host.name and r.task == "shell"][1]
        assert capped.ignored and capped.result["msg"] == "Timeout exceeded"
        assert capped.result["finished"] is True
        wait_until(
            f"{host.name}: the capped job's command stopped",
            lambda host=host: (
                fleet.ns_exec(host, "pgrep -f 'sleep 37[.]25'", check=False).returncode == 1
            ),
        )
        wait_until(  # the run's end stopped the job it left running
            f"{host.name}: the job left running stopped with the run",
            lambda host=host: (
                fleet.ns_exec(host, "pgrep -f 'sleep 41[.]75'", check=False).returncode == 1
            ),
        )
    jids = {registered(result, h.name, "shell")["ansible_job_id"] for h in fleet.hosts[:2]}
    assert len(jids) == 2
