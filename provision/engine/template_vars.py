"""The variables Ansible adds to a template file's own, for the template module and the
template lookup alike (ansible.template.generate_ansible_template_vars)."""

from __future__ import annotations

import datetime
import functools
import os
import pwd
from typing import Any

from provision.config import load_config


@functools.lru_cache(maxsize=8)
def managed_text(config_env: str | None, cwd: str) -> str:
    """`ansible_managed` in templates: ansible.cfg's [defaults] ansible_managed, else Ansible's
    default text (roles compare rendered files with Ansible's; keyed by what picks the file)."""
    return load_config().ansible_managed or "Ansible managed"


def template_vars(
    given: str, fullpath: str, dest: str | None, variables: Any
) -> dict[str, Any]:
    """The variables Ansible adds to a template file's own (generate_ansible_template_vars):
    template_host (the controller's name), template_path (as given), template_fullpath,
    template_mtime, template_uid (the file's owner), template_run_date, template_destpath, and
    `ansible_managed` unless a variable of that name is set (Ansible 2.19)."""
    stat = os.stat(fullpath)
    try:
        uid: Any = pwd.getpwuid(stat.st_uid).pw_name
    except KeyError:
        uid = stat.st_uid
    out: dict[str, Any] = {
        "template_host": os.uname().nodename,
        "template_path": given,
        "template_mtime": datetime.datetime.fromtimestamp(stat.st_mtime),
        "template_uid": uid,
        "template_run_date": datetime.datetime.now(),
        "template_destpath": dest,
        "template_fullpath": fullpath,
    }
    if "ansible_managed" not in variables:
        out["ansible_managed"] = managed_text(os.environ.get("ANSIBLE_CONFIG"), os.getcwd())
    return out
