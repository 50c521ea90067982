"""A tiny Ansible collection written by the tests (pvtest.tiny), for the fallback that runs
Ansible's own modules: `note` writes a file (check mode and diff supported, returns a fact), and
`nocheck` declares no check-mode support (Ansible's module then answers "skipped" itself)."""

from __future__ import annotations

from pathlib import Path

NOTE = '''#!/usr/bin/python
from __future__ import annotations

import os

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            text=dict(type="str", required=True),
            token=dict(type="str", no_log=True),
        ),
        supports_check_mode=True,
    )
    path, text = module.params["path"], module.params["text"] + "\\n"
    before = open(path).read() if os.path.exists(path) else ""
    changed = before != text
    if changed and not module.check_mode:
        with open(path, "w") as fh:
            fh.write(text)
    diff = {"before": before, "after": text, "before_header": path, "after_header": path}
    module.exit_json(
        changed=changed,
        path=path,
        uid=os.getuid(),
        check=module.check_mode,
        token_given=module.params["token"] is not None,
        diff=diff if module._diff else {},
        ansible_facts={"pv_note_len": len(text)},
    )


if __name__ == "__main__":
    main()
'''

NOCHECK = '''#!/usr/bin/python
from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(fail=dict(type="bool", default=False)))
    if module.params["fail"]:
        module.fail_json(msg="asked to fail", rc=3)
    module.exit_json(changed=True, ran=True)


if __name__ == "__main__":
    main()
'''


def write_tiny_collection(collections_dir: Path) -> Path:
    """`collections_dir/ansible_collections/pvtest/tiny` with modules note and nocheck."""
    root = collections_dir / "ansible_collections" / "pvtest" / "tiny"
    modules = root / "plugins" / "modules"
    modules.mkdir(parents=True, exist_ok=True)
    (root / "galaxy.yml").write_text(
        "namespace: pvtest\nname: tiny\nversion: 1.0.0\nreadme: README.md\nauthors: [tests]\n"
    )
    (root / "README.md").write_text("test collection\n")
    (modules / "note.py").write_text(NOTE)
    (modules / "nocheck.py").write_text(NOCHECK)
    return root
