"""A real SSH host whose hostname, files and command output carry templates (issue 20, defects 1
and 2): a play gathers its facts, registers its output, slurps and fetches its file, combines and
stores them — nothing of it is rendered on the controller (a canary the controller's
`lookup('pipe', 'touch …')` would make never appears) and every value arrives byte for byte.
The host's own /tmp is its own (mount namespace), so the canary path is the controller's alone."""

from __future__ import annotations

import secrets
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provision.connection.base import ConnectOptions
from provision.engine.runner import run_playbook


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from fleet import Fleet, FleetError, preflight

    reason = preflight()
    if reason:
        pytest.skip(f"SSH test fleet unavailable: {reason}")
    try:
        fleet = Fleet(1).start()
    except FleetError as exc:
        pytest.fail(f"could not start the test host: {exc}", pytrace=False)
    tag = secrets.token_hex(4)
    try:
        canary = Path(f"/tmp/pvt{tag}")  # a controller path: a hostname has at most 64 bytes
        hostname = f"{{{{lookup('pipe','touch {canary}')}}}}"
        assert len(hostname) <= 64
        payload = (
            f"{{{{ lookup('pipe', 'touch {canary}') }}}} {{% set _ = lookup('pipe', 'touch {canary}') %}}"
            "{{ 7 * 6 }} {# hidden #} {% raw %}x{% endraw %} }} {{ {% if %}"
        )
        host = fleet.hosts[0]
        work = f"/tmp/taint-{tag}"
        fleet.ns_exec(host, ["sh", "-c", 'printf %s "$1" > /proc/sys/kernel/hostname', "sh", hostname])
        fleet.ns_exec(host, ["sh", "-c", 'mkdir -p "$1" && cat > "$1/payload"', "sh", work], input=payload)
        assert fleet.ns_exec(host, "hostname").stdout.strip() == hostname
        config = tmp_path_factory.mktemp("ssh") / "config"
        config.write_text("")
        options = ConnectOptions(known_hosts="accept-new", connect_timeout=10.0, ssh_config=str(config))
        yield {"fleet": fleet, "host": host.as_host(), "options": options, "canary": canary,
               "hostname": hostname, "payload": payload, "work": work}
    finally:
        fleet.stop()
        Path(f"/tmp/pvt{tag}").unlink(missing_ok=True)  # only a failing run makes it


def _shown(result: Any) -> dict[str, Any]:
    return {r.task: r.result.get("msg") for r in result.results if r.task.startswith("show")}


def test_hostile_host_output_and_facts_are_data(hostile: dict[str, Any], tmp_path: Path) -> None:
    work, local = hostile["work"], tmp_path / "fetched"
    pb = tmp_path / "site.yml"
    pb.write_text(textwrap.dedent(f"""
        - hosts: all
          gather_facts: true
          tasks:
            - name: show hostname
              debug: msg="{{{{ ansible_hostname }}}}"
              when: ansible_hostname is defined and ansible_hostname | length > 0
            - name: show nodename
              debug: msg="{{{{ ansible_nodename ~ '' }}}}"
            - command: cat {work}/payload
              register: out
            - name: show out
              debug: msg="{{{{ out.stdout }}}}"
              when: out.rc == 0
            - slurp: src={work}/payload
              register: slurped
            - fetch: src={work}/payload dest={local}/ flat=yes
            - set_fact:
                from_slurp: "{{{{ slurped.content | b64decode }}}}"
                from_facts: "{{{{ [ansible_hostname] | first | default('') }}}}"
                from_out: "{{{{ {{'v': out.stdout_lines}} }}}}"
            - name: show slurp
              debug: msg="{{{{ from_slurp }}}}"
            - name: show facts copy
              debug: msg="{{{{ from_facts }}}}"
            - name: show nested
              debug: msg="{{{{ from_out.v[0] }}}}"
            - name: show fetched
              debug: msg="{{{{ lookup('file', '{local}/payload') }}}}"
            - name: show hostvars
              debug: msg="{{{{ hostvars[inventory_hostname].from_slurp }}}}"
    """).lstrip())
    result = run_playbook(pb, hosts=[hostile["host"]], options=hostile["options"])
    assert not hostile["canary"].exists(), "the host's text ran as a template on the controller"
    assert result.ok, [(r.task, r.msg) for r in result.results if r.status == "failed"]
    got = _shown(result)
    assert got["show hostname"] == hostile["hostname"]
    assert got["show nodename"] == hostile["hostname"]
    assert got["show facts copy"] == hostile["hostname"]
    for name in ("show out", "show slurp", "show nested", "show fetched", "show hostvars"):
        assert got[name] == hostile["payload"], name
    assert (local / "payload").read_text() == hostile["payload"]


def test_the_cli_prints_the_hostile_hostname_as_text(hostile: dict[str, Any], tmp_path: Path) -> None:
    """`provision run` end to end: the display and the recap show the host's text, run nothing."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    inventory = hostile["fleet"].write_inventory(tmp_path / "hosts.ini")
    (tmp_path / "ssh_config").write_text("")
    pb = tmp_path / "site.yml"
    pb.write_text(textwrap.dedent("""
        - hosts: all
          gather_facts: true
          tasks:
            - name: show
              debug: msg="{{ ansible_hostname }} {{ lookup('pipe', 'true') }}"
    """).lstrip())
    env = dict(os.environ, PYTHONPATH=str(root), COLUMNS="300")
    proc = subprocess.run(
        [sys.executable, "-m", "provision", "run", str(pb), "-i", str(inventory), "--json",
         "--known-hosts", "accept-new", "--ssh-config", str(tmp_path / "ssh_config")],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert not hostile["canary"].exists()
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    (shown,) = [r["msg"] for r in json.loads(proc.stdout)["results"] if r["task"] == "show"]
    assert shown == hostile["hostname"] + " "  # the host's text as it is; our lookup ran
