#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
#
# build_payload.py: build one Ansible module's self-contained payload (AnsiballZ) for provision.
#
# Copyright (c) the provision authors.
#
# This file is free software: you can redistribute it and/or modify it under the terms of the GNU
# General Public License as published by the Free Software Foundation, either version 3 of the
# License, or (at your option) any later version. It is distributed WITHOUT ANY WARRANTY; see
# <https://www.gnu.org/licenses/gpl-3.0.html>.
#
# Why this file is GPL and apart: it imports ansible-core (GPL-3.0). provision (Apache-2.0) never
# imports it: provision runs this file as a separate program, inside the Python that Ansible is
# installed in, talks to it only through JSON on stdin/stdout, and is not linked with it. See
# provision/ansible_bridge/gpl/README.md and docs/playbooks.md ("Ansible's own modules").
#
# Protocol: stdin is one JSON object {"name": "<module name as written>", "playbook_dir": "<dir>"}.
# stdout is one JSON object: {"ok": true, "fqcn", "ansible_version", "module_path", "payload"} where
# payload is the AnsiballZ wrapper text with its params line replaced by the PARAMS marker below, so
# one payload serves every call of the module (the caller puts the arguments in, in memory); for a
# script module Ansible does not wrap ("style": "old" or "non_native_want_json") payload is the
# script itself, which the caller runs as Ansible does (an arguments file, its shebang); or
# {"ok": false, "kind": "not_found" | "unsupported", "error": "<why>"}.
from __future__ import annotations

import json
import os
import re
import sys

PARAMS_MARKER = "__PROVISION_ANSIBLE_PARAMS__"


def _fail(kind: str, error: str) -> None:
    json.dump({"ok": False, "kind": kind, "error": error}, sys.stdout)
    sys.exit(0)


def main() -> None:
    request = json.load(sys.stdin)
    name = str(request["name"])
    playbook_dir = request.get("playbook_dir") or os.getcwd()

    from ansible import constants as C
    from ansible.executor import module_common
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import action_loader, init_plugin_loader, module_loader
    from ansible.release import __version__
    from ansible.template import Templar

    # the collections Ansible itself would see for a playbook in playbook_dir
    prefix = [os.path.join(playbook_dir, "collections")]
    init_plugin_loader(prefix)
    # the play's roles and the playbook's folder: their library/, module_utils/, ... as Ansible
    # adds them when it loads a role (add_all_plugin_dirs)
    from ansible.plugins.loader import add_all_plugin_dirs

    for folder in request.get("plugin_dirs") or []:
        add_all_plugin_dirs(str(folder))

    found = module_loader.find_plugin_with_context(name)
    if not found.resolved or not found.plugin_resolved_path:
        _fail("not_found", f"Ansible {__version__} has no module {name!r}"
              f" (collections searched: {', '.join(prefix + list(C.COLLECTIONS_PATHS))})")
    fqcn = found.resolved_fqcn or name
    module_path = found.plugin_resolved_path
    if module_path.endswith((".ps1", ".psm1")):
        _fail("unsupported", f"{fqcn} is a Windows (PowerShell) module")

    # a module with its own controller-side action plugin needs ansible-playbook around it
    for candidate in (fqcn, name):
        action = action_loader.find_plugin_with_context(candidate)
        if action.resolved and (action.resolved_fqcn or "") not in ("ansible.builtin.normal", ""):
            _fail("unsupported", f"{fqcn} works through its action plugin {action.resolved_fqcn},"
                  " which runs inside ansible-playbook on the controller")

    with open(module_path, "rb") as fh:
        raw = fh.read()
    # module_common's own order (_find_module_utils): binary, then what it wraps, then WANT_JSON
    style = None
    if module_common._is_binary(raw):
        style = "binary"
    elif not _new_style(raw):
        style = "non_native_want_json" if b"WANT_JSON" in raw else "old"
    if style == "binary":
        _fail("unsupported", f"{fqcn} is a binary module; only script and Python modules run"
              " through provision")
    if style is not None:
        # an old-style (key=value args file) or WANT_JSON (JSON args file) script: Ansible runs it
        # unchanged but for its shebang, which depends on the task's variables: the caller's part
        json.dump({
            "ok": True,
            "fqcn": fqcn,
            "ansible_version": __version__,
            "module_path": module_path,
            "style": style,
            "payload": raw.decode("utf-8", "surrogateescape"),
        }, sys.stdout)
        return

    marker_args = {"_provision": PARAMS_MARKER}
    task_vars = {"ansible_python_interpreter": "/usr/bin/python3"}  # the caller picks the python
    built = module_common.modify_module(
        module_name=fqcn.rsplit(".", 1)[-1],
        module_path=module_path,
        module_args=marker_args,
        templar=Templar(loader=DataLoader()),
        task_vars=task_vars,
        module_compression=C.DEFAULT_MODULE_COMPRESSION,
    )
    if built.module_style != "new" or b"_ansiballz_main(" not in built.b_module_data:
        _fail("unsupported", f"{fqcn} is a {built.module_style}-style module; only Python"
              " (AnsiballZ) modules run through provision")
    text = built.b_module_data.decode("utf-8")
    lines = text.split("\n")
    params = [i for i, line in enumerate(lines) if line.startswith("params=") and PARAMS_MARKER in line]
    if len(params) != 1:
        _fail("unsupported", f"the AnsiballZ wrapper of Ansible {__version__} changed shape;"
              " provision does not know where its arguments go")
    lines[params[0]] = f"params={PARAMS_MARKER},"
    json.dump({
        "ok": True,
        "fqcn": fqcn,
        "ansible_version": __version__,
        "module_path": module_path,
        "payload": "\n".join(lines),
    }, sys.stdout)


def _new_style(raw: bytes) -> bool:
    """module_common's test for a module it wraps itself (AnsiballZ, PowerShell, JSONARGS)."""
    from ansible.executor import module_common as mc

    if mc.REPLACER in raw or mc.NEW_STYLE_PYTHON_MODULE_RE.search(raw):
        return True
    if mc.REPLACER_WINDOWS in raw or mc.REPLACER_JSONARGS in raw:
        return True
    return bool(re.search(b"#Requires -(Module|Version)|#AnsibleRequires -(OSVersion|PowerShell|CSharpUtil|Wrapper)",
                          raw, re.IGNORECASE))


if __name__ == "__main__":
    main()
