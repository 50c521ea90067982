"""Regenerate provision/modules/ansible_specs.json: Ansible's argument specs, as data.

For every module of the installed ansible-core (and of the collections named with
`--collection NS.NAME`, found on ANSIBLE_COLLECTIONS_PATH), ask `ansible-doc -j` (Ansible's own
tool, in its own process: provision reads the published interface, not Ansible's code) and keep
each option's name, type, aliases, choices, required, default and element type. The engine checks
a task's arguments against these at run time (provision/modules/argspec.py).

    python3 scripts/ansible_specs.py                     # ansible.builtin only
    ANSIBLE_COLLECTIONS_PATH=/path python3 scripts/ansible_specs.py \
        --collection ansible.posix --collection community.general

The output records the ansible-core version and the collections' versions it was made from.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "provision" / "modules" / "ansible_specs.json"
# community.general and friends are large: only the modules roles use on servers
DEFAULT_PICK = {
    "ansible.posix": None,  # all of it (small)
    "community.general": {
        "pam_limits",
        "pamd",
        "seport",
        "ufw",
        "timezone",
        "locale_gen",
        "alternatives",
        "modprobe",
        "sefcontext",
        "ini_file",
        "make",
        "npm",
        "snap",
        "capabilities",
        "filesystem",
        "lvg",
        "lvol",
        "parted",
        "archive",
        "git_config",
        "sudoers",
        "htpasswd",
        "xml",
        "nmcli",
        "kernel_blacklist",
        "launchd",
        "osx_defaults",
        "hostname",
        "systemd_creds_encrypt",
        "pipx",
    },
    "community.crypto": {"openssh_keypair", "openssl_privatekey", "x509_certificate"},
}


def _doc(names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for start in range(0, len(names), 40):  # ansible-doc takes many names per call
        chunk = names[start : start + 40]
        proc = subprocess.run(
            ["ansible-doc", "-j", "-t", "module", *chunk],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        out.update(json.loads(proc.stdout))
    return out


def _list(prefix: str) -> list[str]:
    proc = subprocess.run(
        ["ansible-doc", "-l", "-t", "module", prefix],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return [line.split()[0] for line in proc.stdout.splitlines() if line.startswith(prefix + ".")]


def _option(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": spec.get("type", "str")}
    for key in ("aliases", "choices", "elements"):
        if spec.get(key):
            out[key] = spec[key]
    if spec.get("required"):
        out["required"] = True
    if spec.get("default") is not None:
        out["default"] = spec["default"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", action="append", default=[])
    args = parser.parse_args()
    names = _list("ansible.builtin")
    for collection in args.collection:
        pick = DEFAULT_PICK.get(collection)
        found = _list(collection)
        names += [n for n in found if pick is None or n.rsplit(".", 1)[1] in pick]
    docs = _doc(names)
    version = subprocess.run(
        ["ansible", "--version"], capture_output=True, text=True, timeout=120, check=True
    ).stdout.splitlines()[0]
    modules: dict[str, Any] = {}
    for name in sorted(docs):
        doc = docs[name].get("doc") or {}
        options = doc.get("options") or {}
        modules[name] = {
            "options": {k: _option(v) for k, v in sorted(options.items())},
            "version": doc.get("version_added_collection") or "",
        }
    OUT.write_text(
        json.dumps(
            {"generated_from": version, "collections": args.collection, "modules": modules},
            indent=0,
            sort_keys=True,
        )
        + "\n"
    )
    print(f"{len(modules)} modules -> {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
