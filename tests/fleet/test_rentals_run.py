"""`provision run` with `register` on every rental-like kind: results hold exactly what the
command printed whatever the login shell prints, and play/task `become` runs as root through
passwordless sudo or sudo with a password (ansible_become_password, sent on stdin)."""

from __future__ import annotations

import pytest
import truth
from kinds import NOISE_ERR, NOISE_OUT, SUDO_PASSWORD_USER
from rentals import Rentals

PLAYBOOK = """\
- name: every kind
  hosts: rentals
  gather_facts: true
  tasks:
    - name: cores
      command: nproc
      register: n
    - name: both streams
      shell: echo out; echo err >&2
      register: both
    - name: cores as a number
      debug:
        msg: "{{ n.stdout | int }}"

- name: become
  hosts: gpu4:ops
  gather_facts: false
  become: true
  tasks:
    - name: who
      command: id -u
      register: who
    - name: a root-owned place (the host's own /root, which only root may write)
      file:
        path: /root/provision-rentals
        state: directory
        mode: "0700"
    - name: write there
      copy:
        content: "{{ inventory_hostname }}\\n"
        dest: /root/provision-rentals/{{ inventory_hostname }}
"""


@pytest.fixture(scope="module", params=["sessions", "executor"])
def played(rentals: Rentals, request: pytest.FixtureRequest):
    """The playbook run as sessions (a command per SSH session) and with --executor (every
    command one request to one agent process per host: provision/remote/executor.py)."""
    path = rentals.work / "rentals-run.yml"
    path.write_text(PLAYBOOK)
    extra = ["--executor"] if request.param == "executor" else []
    rentals.fleet.ns_exec("gpu4", "rm -rf /root/provision-rentals")  # each run a first run
    run = rentals.provision("run", str(path), "--json", "--forks", "10", *extra)
    rentals.timings[f"run (register, become), all kinds, {request.param}"] = run.seconds
    return run


def test_register_holds_the_commands_own_output_on_every_kind(rentals: Rentals, played) -> None:
    assert played.returncode == 0, played.describe()
    for name in rentals.names:
        results = played.results(name)
        cores = results["cores"]["result"]
        assert cores["rc"] == 0
        assert cores["stdout"] == str(truth.nproc(rentals.fleet, name)), (name, cores)
        assert cores["stdout_lines"] == [cores["stdout"]] and cores["stderr"] == ""
        both = results["both streams"]["result"]
        assert (both["stdout"], both["stderr"]) == ("out", "err"), (name, both)
        assert str(results["cores as a number"]["msg"]) == cores["stdout"]  # `| int` of it
        assert results["Gathering Facts"]["status"] == "ok", (name, results["Gathering Facts"])
    assert NOISE_OUT not in played.stdout and NOISE_ERR not in played.stdout


def test_play_become_runs_tasks_as_root_with_or_without_a_sudo_password(rentals: Rentals, played) -> None:
    assert played.returncode == 0, played.describe()
    password = rentals.fleet.host("gpu4").sudo_passwords[SUDO_PASSWORD_USER]
    for name in ("gpu4", "ops"):  # ubuntu (NOPASSWD) and ops (password from the inventory)
        results = played.results(name)
        assert results["who"]["result"]["stdout"] == "0", results["who"]
        # `sudo: unable to resolve host gpu4` on stderr does not change the result
        assert results["who"]["result"]["rc"] == 0
        assert results["write there"]["status"] == "changed", results["write there"]
        assert results["a root-owned place (the host's own /root, which only root may write)"]["status"] in ("ok", "changed")
    listing = rentals.fleet.ns_exec("gpu4", "stat -c '%U %a' /root/provision-rentals; cat /root/provision-rentals/*")
    assert listing.stdout.split() == ["root", "700", "gpu4", "ops"]
    assert password not in played.stdout + played.stderr
