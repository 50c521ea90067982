"""Issue 20, defects 5–7 and the suspected ones, on real SSH hosts through the real CLI:

- `environment:` values (play and task level) never in any process's command line while the
  task runs (they used to be `export K=V;` in the text the host's `sh -c` got as its argument);
- a git token in `repo: https://oauth2:TOKEN@…` never in `sh -c`, `git clone`,
  `git-remote-http`'s argv, nor in the URL git stores in .git/config, first clone and update;
- another (non-root) user plants symlinks at every name the modules used to write as root
  (`/tmp/.pv-git.$$`, `/tmp/.pv-user.$$`, `$dest.pvtmp.$$`…, for every possible pid): root's
  tasks neither follow them nor fail;
- cron values with a line break are refused before anything is written;
(A training run's folder and state.json being private: tests/unit/test_secret_files.py.)
"""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path
from typing import Any

from test_attacks_ssh import playbook, run_cli_with_scan

from tests.support.git_http import GitHTTP, git, make_repo

_PRIVATE_ETC = (
    "set -e; mkdir -p /run/pv-etc/upper /run/pv-etc/work; "
    "mount -t overlay pv-etc -o lowerdir=/etc,upperdir=/run/pv-etc/upper,workdir=/run/pv-etc/work /etc"
)


def test_environment_values_never_in_any_process_list(make_fleet: Any, tmp_path: Path) -> None:
    fleet = make_fleet(1)
    key = "wandbSECRET" + secrets.token_hex(8)
    password = "pipSECRET" + secrets.token_hex(8)
    index = f"http://pvuser:{password}@{fleet.controller_address}:9/simple"
    pb = playbook(
        tmp_path,
        """
        - name: task level, with a long-running command so the scanner sees it live
          shell: sleep 2; printf %s "$WANDB_API_KEY" | sha256sum | cut -d' ' -f1; printf %s "$PIP_INDEX_URL" | wc -c
          environment:
            WANDB_API_KEY: "{{ lookup('env', 'PV_TEST_KEY') }}"
            PIP_INDEX_URL: "{{ lookup('env', 'PV_TEST_INDEX') }}"
          register: seen
        - name: command module, same values
          command: sleep 1
          environment:
            WANDB_API_KEY: "{{ lookup('env', 'PV_TEST_KEY') }}"
        - name: a module that writes a file (its content on stdin too)
          copy:
            content: "plain\\n"
            dest: /tmp/pv-env-copy
          environment:
            WANDB_API_KEY: "{{ lookup('env', 'PV_TEST_KEY') }}"
        - debug:
            var: seen.stdout_lines
        """,
    )
    out, doc = run_cli_with_scan(
        tmp_path, fleet, pb, [key, password], env={"PV_TEST_KEY": key, "PV_TEST_INDEX": index}
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    # the values did reach the task's environment, exactly
    assert hashlib.sha256(key.encode()).hexdigest() in out.stdout
    assert f'"{len(index)}"' in out.stdout or f"{len(index)}" in out.stdout


def test_git_credentials_never_in_argv_or_git_config(make_fleet: Any, tmp_path: Path) -> None:
    fleet = make_fleet(1)
    host = fleet.hosts[0]
    token = "gitSECRET" + secrets.token_hex(8)
    work, _bare = make_repo(tmp_path / "up")
    with GitHTTP(tmp_path / "up", fleet.controller_address, "oauth2", token) as server:
        url = server.url("repo.git").replace("http://", "http://oauth2:{{ lookup('env', 'PV_TEST_TOKEN') }}@")
        pb = playbook(
            tmp_path,
            f"""
            - git:
                repo: "{url}"
                dest: /tmp/pv-git-co
              register: cloned
            """,
        )
        first, _ = run_cli_with_scan(tmp_path, fleet, pb, [token], env={"PV_TEST_TOKEN": token})
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        # upstream moves: the update path (remote URL check, fetch) with the same credentials
        (work / "f.txt").write_text("v9\n")
        git(work, "commit", "-qam", "c9")
        git(work, "push", "-q", str(tmp_path / "up" / "repo.git"), "main")
        git(tmp_path / "up" / "repo.git", "update-server-info")
        second, _ = run_cli_with_scan(tmp_path, fleet, pb, [token], env={"PV_TEST_TOKEN": token})
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
        assert server.handler.secret_seen_in == []
        assert any(r.endswith(" ok") for r in server.handler.requests), server.handler.requests
    head = git(work, "rev-parse", "HEAD")
    assert fleet.ns_exec(host, "git -C /tmp/pv-git-co rev-parse HEAD").stdout.strip() == head
    config = fleet.ns_exec(host, "cat /tmp/pv-git-co/.git/config").stdout
    assert token not in config and "oauth2" not in config, config
    assert server.url("repo.git") in config  # the URL git keeps is the bare one


def test_planted_symlinks_at_the_old_temp_names_are_not_followed(make_fleet: Any, tmp_path: Path) -> None:
    """Every name a module used to write as root in /tmp, for every pid the kernel can hand out,
    is a symlink another user planted to a root-only file: root's tasks must not write through
    any of them, and must not fail because of them."""
    fleet = make_fleet(1)
    host = fleet.hosts[0]
    fleet.ns_exec(host, _PRIVATE_ETC)  # user/group change the host's own /etc only
    fleet.ns_exec(host, "printf untouched > /root/victim && chmod 600 /root/victim")
    names = [".pv-user.%d", ".pv-group.%d", ".pv-git.%d", ".pv-svc.%d", ".pv_apt_update.%d",
             ".pv_venv.%d", ".pv-copied.pvtmp.%d", ".pv-dl.pvdl.%d", "pv-copied.pvtmp.%d",
             "pv-put.tmp-%d"]  # fmt: skip
    plant = (
        "import sys\n"
        "import os\n"
        "top = int(open('/proc/sys/kernel/pid_max').read())\n"
        f"for pattern in {names!r}:\n"
        "    for pid in range(1, top + 1):\n"
        "        os.symlink('/root/victim', '/tmp/' + pattern % pid)\n"
        "print(os.getuid())\n"
    )
    planted = fleet.ns_exec(host, ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                   "python3", "-c", plant])
    assert planted.stdout.strip() == "65534", planted.stderr
    work, _bare = make_repo(tmp_path / "up")
    with GitHTTP(tmp_path / "up", fleet.controller_address, "oauth2", "tok" + secrets.token_hex(4)) as server:
        url = server.url("repo.git").replace("http://", f"http://oauth2:{server.handler.password}@")
        pb = playbook(
            tmp_path,
            f"""
            - group: {{name: pvplant}}
            - user: {{name: pvplant, group: pvplant}}
            - git: {{repo: "{url}", dest: /tmp/pv-plant-co}}
            - copy: {{content: "new\\n", dest: /tmp/pv-copied}}
            - copy: {{content: "newer\\n", dest: /tmp/pv-copied, backup: true}}
            """,
        )
        out, _ = run_cli_with_scan(tmp_path, fleet, pb, [])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert fleet.ns_exec(host, "cat /root/victim").stdout == "untouched"
    assert fleet.ns_exec(host, "cat /tmp/pv-copied").stdout == "newer\n"
    assert fleet.ns_exec(host, "getent passwd pvplant | cut -d: -f1").stdout.strip() == "pvplant"
    left = fleet.ns_exec(host, "find /tmp -maxdepth 1 -type l | wc -l").stdout.strip()
    assert int(left) >= 32768, left  # the planted links are all still there, none replaced


def test_cron_values_with_a_line_break_are_refused(make_fleet: Any, tmp_path: Path) -> None:
    """Refused before anything runs (the play's arguments are checked first), naming the field."""
    fleet = make_fleet(1)
    host = fleet.hosts[0]
    fleet.ns_exec(host, _PRIVATE_ETC)
    evil = "* * * * * root touch /tmp/PWNED"
    for task in (f'- cron: {{name: "ok\\n{evil}", job: /bin/true, user: root, cron_file: pv-nl}}',
                 f'- cron: {{name: m, minute: "5\\n{evil}", job: /bin/true, user: root, cron_file: pv-nl}}'):
        out, _ = run_cli_with_scan(tmp_path, fleet, playbook(tmp_path, task), [])
        assert out.returncode != 0 and "holds a line break" in out.stdout + out.stderr, out.stderr[-2000:]
    crontab = fleet.ns_exec(host, "cat /etc/cron.d/pv-nl 2>/dev/null || true").stdout
    assert crontab == "", crontab
