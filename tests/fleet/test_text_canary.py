"""The hostile host's words through every command that prints them (issue 29), over real SSH.

Generated from the CLI's registry via tests/support/text_plan.py (a command added to the registry
without a plan entry fails tests/unit/test_cli_text.py): each FLEET command runs through the real
CLI against the `hostile` kind, whose words are TEXT_CANARY — rich markup that would crash (`[/x]`) or link, HTML, a
fence (kinds.py: a run's command and log lines, the watcher's status, and here the hostname and
the OS name). It must come out as typed, and no command may crash on it.

And defect 2 over SSH: the host's /etc/os-release says `ID=../../…`; a role's
`include_vars: "{{ ansible_distribution }}.yml"` is refused, naming the fact and its value, and
the controller file it points at is never loaded.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import kinds
import pytest
from test_hostile_host import Hostile, hostile  # noqa: F401 - the module's fleet fixture

from tests.support import text_plan
from tests.support.text_plan import TEXT_CANARY

_BOX = re.compile(r"[\s│┃║|╭╮╰╯─━┏┓┗┛┡┩╇┳┻╋┣┫┠┨┼┬┴├┤┌┐└┘]")
OS_RELEASE = f'NAME="Debian"\nID="../../../fetched/evil"\nPRETTY_NAME="{TEXT_CANARY}"\nVERSION_ID="12"\n'


@pytest.fixture(scope="module")
def canary_host(hostile: Hostile) -> Iterator[Hostile]:  # noqa: F811
    """The hostile host with its hostname and OS name set to the canary (its UTS namespace, the
    os-release bound over /etc/os-release), put back afterwards."""
    fleet, host = hostile.fleet, hostile.host
    fleet.ns_exec(host, f"printf '%s' '{TEXT_CANARY}' > /proc/sys/kernel/hostname")
    fleet.hostile_os_release(host, OS_RELEASE)
    try:
        yield hostile
    finally:
        fleet.ns_exec(host, f"printf '%s' \"$(printf '%s' {kinds.HOSTILE_HOSTNAME!r})\" > /proc/sys/kernel/hostname",
                      check=False)
        fleet.hostile_os_release(host, None)


def _argv(hostile: Hostile, command: str) -> list[str]:  # noqa: F811
    argv = text_plan.FLEET[command](hostile.host.name)
    if command == "run":
        pb = hostile.work / "text.yml"
        pb.write_text(
            "- hosts: all\n  gather_facts: true\n  tasks:\n"
            f"    - command: cat {kinds.HOSTILE_DATA_DIR}/runs/{kinds.HOSTILE_TEXT_RUN}/output.log\n"
            "      register: out\n"
            "    - debug: msg=\"{{ ansible_hostname }} {{ out.stdout_lines[0] }}\"\n"
            "    - fail: msg=\"{{ ansible_facts['lsb']['description'] | default(ansible_hostname) }}\"\n")
        argv = ["run", str(pb), "-l", hostile.host.name]
    return argv


@pytest.mark.parametrize("command", sorted(text_plan.FLEET))
def test_the_hosts_words_come_out_as_typed(canary_host: Hostile, command: str) -> None:
    argv = _argv(canary_host, command)
    if "--" in argv:  # the connection options go before the command line `train` runs
        cut = argv.index("--")
        argv = [*argv[:cut], "-i", str(canary_host.inventory), "--ssh-config", str(canary_host.ssh_config),
                "--known-hosts", "accept-new", *argv[cut:]]
    proc = canary_host.provision(*argv, timeout=240)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "MarkupError" not in out, out[-3000:]
    assert "\x1b]8;" not in out, "a host's [link=…] became a hyperlink"
    flat, want = _BOX.sub("", out), _BOX.sub("", TEXT_CANARY)
    assert want in flat, f"{command}: the host's text did not come out as typed:\n{out[-3000:]}"


def test_an_os_release_id_never_picks_a_controller_file(canary_host: Hostile) -> None:
    work = canary_host.work
    (work / "fetched").mkdir(exist_ok=True)
    (work / "fetched" / "evil.yml").write_text("stolen: \"{{ lookup('pipe', 'touch PWNED-VARS') }}\"\n")
    (work / "roles" / "r" / "vars").mkdir(parents=True, exist_ok=True)
    (work / "roles" / "r" / "tasks").mkdir(parents=True, exist_ok=True)
    (work / "roles" / "r" / "tasks" / "main.yml").write_text(
        '- include_vars: "{{ ansible_distribution }}.yml"\n- debug: var=stolen\n')
    pb = work / "os.yml"
    pb.write_text("- hosts: all\n  gather_facts: true\n  roles: [r]\n")
    proc = canary_host.provision("run", str(pb), "--json")
    assert not (work / "PWNED-VARS").exists(), "the host's os-release picked a controller vars file"
    assert "host data ansible_distribution = '../../../fetched/evil'" in proc.stdout, proc.stdout[-3000:]
