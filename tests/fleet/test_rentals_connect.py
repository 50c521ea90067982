"""Reaching rental-like hosts: a high port on a shared gateway address, a host only a jump host
reaches (ProxyJump from ssh_config, a pasted `ssh -J`, the inventory), a passphrase-protected
key -- and errors that say what to do when one of them is wrong."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from rentals import PASSPHRASE_VAR, Rentals


def _facts(run, name: str) -> dict:
    return run.doc["hosts"][name]


# -- gateway: one address, a port per instance ----------------------------------------------------
def test_gateway_hosts_share_an_address_and_each_has_its_own_key(rentals: Rentals) -> None:
    gpu2, gpu3 = rentals.fleet.host("gpu2"), rentals.fleet.host("gpu3")
    assert gpu2.address == gpu3.address and gpu2.port != gpu3.port and gpu2.port > 1024
    assert gpu2.host_key_fingerprint != gpu3.host_key_fingerprint
    # pasted as the rental console shows it
    run = rentals.provision("facts", f"ssh -p {gpu3.port} root@{gpu3.address}", "--key", gpu3.key_file, "--json")
    assert run.returncode == 0, run.describe()
    [facts] = run.doc["hosts"].values()
    assert facts["hostname"] == "gpu3"


def test_changed_key_on_a_high_port_names_host_and_port_in_the_remedy(make_fleet, tmp_path) -> None:
    own = make_fleet(1, kinds="gateway")  # its key gets replaced: not the shared fleet
    host = own.hosts[0]
    inventory = own.write_inventory(tmp_path / "gw.ini")
    config = tmp_path / "ssh_config"
    config.write_text("")

    def facts():
        return subprocess.run(
            [sys.executable, "-m", "provision", "facts", "gpu1", "-i", str(inventory), "--ssh-config", str(config), "--json"],
            capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip

    first = facts()
    assert first.returncode == 0, first.stderr
    own.replace_host_key(host)
    second = facts()
    assert second.returncode in (1, 4), second.stderr  # refused, not run
    error = _json_error(second.stdout, "gpu1")
    assert "CHANGED" in error
    assert f"ssh-keygen -R '[{host.address}]:{host.port}'" in error, error


def _json_error(stdout: str, name: str) -> str:
    return json.loads(stdout)["hosts"][name]["error"]


# -- jump hosts -------------------------------------------------------------------------------------
def test_host_behind_a_jump_host_from_inventory_ssh_config_and_a_pasted_ssh_j(rentals: Rentals, tmp_path) -> None:
    fleet = rentals.fleet
    target = fleet.host("gpu5")
    assert fleet.jump is not None
    # nothing here routes to it: only the jump host does
    direct = rentals.provision("facts", f"root@{target.address}", "--key", target.key_file, "--json",
                               "--connect-timeout", "3")  # fmt: skip
    assert direct.returncode == 4 and "No route to host" in _json_error(direct.stdout, f"root@{target.address}")
    # 1. the inventory: ansible_ssh_common_args='-J jump' (gpu5 in rentals.ini), -o ProxyJump= in extra args
    inventory = tmp_path / "jump.ini"
    inventory.write_text(
        f"viaextra ansible_host={target.address} ansible_user=root ansible_ssh_private_key_file={target.key_file} "
        "ansible_ssh_extra_args='-o ProxyJump=jump'\n"
    )
    run = rentals.provision("facts", "gpu5", "viaextra", "-i", str(inventory), "--json")
    assert run.returncode == 0, run.describe()
    assert {_facts(run, n)["hostname"] for n in ("gpu5", "viaextra")} == {"gpu5"}
    # 2. ssh_config: Host gpu5 ... ProxyJump jump (and the jump host's own IdentityFile)
    config = fleet.write_ssh_config(tmp_path / "ssh_config", proxy_jump=True)
    run = rentals.provision("facts", "gpu5", "--ssh-config", str(config), "--json", "-i", str(inventory))
    assert run.returncode == 0, run.describe()
    # 3. a pasted `ssh -J jump root@ADDR`
    pasted = f"ssh -J jump -i {target.key_file} root@{target.address}"
    run = rentals.provision("facts", pasted, "--json")
    assert run.returncode == 0, run.describe()
    [facts] = run.doc["hosts"].values()
    assert facts["hostname"] == "gpu5"


def test_a_jump_host_refusing_the_login_is_named(rentals: Rentals, tmp_path) -> None:
    fleet = rentals.fleet
    target = fleet.host("gpu5")
    assert fleet.jump is not None
    # the jump host by address, so the ssh_config alias with its key does not apply
    inventory = tmp_path / "badjump.ini"
    inventory.write_text(
        f"behind ansible_host={target.address} ansible_user=root ansible_ssh_private_key_file={target.key_file} "
        f"ansible_ssh_common_args='-J root@{fleet.jump.address}'\n"
    )
    run = rentals.provision("facts", "behind", "-i", str(inventory), "--json", "--key", fleet.key_file)
    assert run.returncode == 1, run.describe()  # refused (auth), not unreachable
    error = _json_error(run.stdout, "behind")
    assert f"jump host root@{fleet.jump.address}:22" in error and "refused" in error, error
    assert "IdentityFile" in error  # what to do: give the jump host its own key


# -- passphrase-protected key ------------------------------------------------------------------------
def test_passphrase_key_right_missing_and_wrong(rentals: Rentals) -> None:
    key = rentals.fleet.passphrase_key_file
    right = rentals.provision("facts", "gpu1", "--key", key, "--passphrase-env", PASSPHRASE_VAR, "--json")
    assert right.returncode == 0, right.describe()
    assert _facts(right, "gpu1")["hostname"] == "gpu1"
    assert rentals.fleet.key_passphrase not in right.stdout + right.stderr

    missing = rentals.provision("facts", "gpu1", "--key", key, "--json")
    assert missing.returncode == 1, missing.describe()
    error = _json_error(missing.stdout, "gpu1")
    assert "is encrypted" in error and "--passphrase-env" in error, error

    wrong = rentals.provision("facts", "gpu1", "--key", key, "--passphrase-env", "BAD_PASSPHRASE", "--json",
                              env=rentals.env(BAD_PASSPHRASE="not-it"))  # fmt: skip
    assert wrong.returncode == 1, wrong.describe()
    error = _json_error(wrong.stdout, "gpu1")
    assert re.search(r"passphrase from env var BAD_PASSPHRASE does not decrypt", error), error
    assert "Invalid key" not in error and "not-it" not in wrong.stdout + wrong.stderr
