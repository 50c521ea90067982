"""Arguments Ansible's modules take that public roles use, on a fleet host with a private /etc
(user generate_ssh_key / password_expire_*, lineinfile validate, package forwarding its
backend's arguments): the change, the second run's `ok`, and what the host ends up with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provision.connection.base import ConnectOptions
from tests.fleet.test_modules_builtin import idempotent, ok, on_host, private_host, run

__all__ = ["private_host"]  # the fixture, shared with test_modules_builtin


def test_user_ssh_key_and_password_ageing(
    tmp_path: Path, private_host: tuple[Any, Any], ssh_options: ConnectOptions
) -> None:
    own, host = private_host
    hosts = own.provision_hosts()
    tasks = """
    - user: {name: keyed, generate_ssh_key: true, ssh_key_type: ed25519, ssh_key_file: .ssh/id_ed25519, password_expire_min: 3, password_expire_max: 90}
      register: u
    - lineinfile: {path: /etc/pv-validated.conf, line: "good=1", create: true, validate: "grep -q good %s"}
    """
    first = idempotent(tmp_path, hosts, ssh_options, tasks)
    reg = {r.task: r.result for r in first.results}["user"]
    assert reg["ssh_key_file"] == "/home/keyed/.ssh/id_ed25519"
    pub = on_host(own, host, "cat /home/keyed/.ssh/id_ed25519.pub")
    assert pub.startswith("ssh-ed25519 ") and "ansible-generated on" in pub
    assert "ssh_public_key" in reg  # (masked in results: the secret rule names *_key)
    assert on_host(
        own, host, "stat -c '%U %a' /home/keyed/.ssh /home/keyed/.ssh/id_ed25519"
    ).split() == ["keyed", "700", "keyed", "600"]
    assert on_host(own, host, "getent shadow keyed | cut -d: -f4,5").strip() == "3:90"
    bad = run(
        tmp_path,
        hosts,
        ssh_options,
        '- lineinfile: {path: /etc/pv-validated.conf, line: "bad=1", validate: "grep -q nope %s"}',
    )
    assert bad.results[0].status == "failed" and "validation failed" in bad.results[0].msg
    assert on_host(own, host, "cat /etc/pv-validated.conf") == "good=1\n"
    ok(run(tmp_path, hosts, ssh_options, "- user: {name: keyed, state: absent, remove: yes}"))
