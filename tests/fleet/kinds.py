"""Fleet host kinds that look like rented servers (issue 9), set up on a host before its sshd starts.

A host's kind is a set of traits; `Fleet(3, kinds=["noisy", {"conda", "noisy"}, "bullseye"])`:

- ``noisy``     ~/.bashrc and ~/.profile print a banner to stdout and a warning to stderr on every
                command (bash, the login shell, sources ~/.bashrc for ssh commands), as rental
                images with conda-init notes and MOTDs do.
- ``gateway``   sshd on a high port of an address shared with the fleet's other gateway hosts
                (AutoDL's model: one region address, a port per instance), each its own host key.
- ``sudo``      login user ``ubuntu`` with passwordless sudo; user ``ops`` (same key) whose sudo
                needs a password (FleetHost.sudo_passwords).
- ``behind-jump`` no route from the controller: its own link to the fleet's jump host
                (Fleet.jump, which authorizes only its own key, Fleet.jump_key_file).
- ``conda``     /root/miniconda3 (conda-meta/, envs/bare) whose python imports this machine's
                torch; ~/.bashrc puts its bin first on PATH (what `conda init` does); the system
                /usr/bin/python3 has no torch.
- ``nopython``  no python3 anywhere on PATH (an overlay hides /usr/bin/python3*).
- ``backnet``   a second interface, eth1 (MTU 9000), on a back network of its own /24 in
                198.18.0.0/15 that this machine has no address on (a switch in its own namespace),
                as rentals' private/RDMA networks are. With ``gateway``: the host gets its own
                namespace with ONLY the back network, and the gateway address forwards its port to
                it (tests/fleet/portfwd.py), so the SSH address can't carry rank traffic.
- ``smallshm``  /dev/shm is a 64 MiB tmpfs of its own (Docker's default --shm-size, which kills
                DataLoader workers with "Bus error" once their batches in flight outgrow it), mounted
                over /dev/shm in the host's mount namespace only.
- ``bullseye``  its own root filesystem: Debian 11 from debootstrap (Python 3.9, glibc 2.31),
                sshd chrooted into it. Built once into ROOTFS_CACHE.
- ``hostile``   a compromised rental (issue 20): its hostname is a template
                (HOSTILE_HOSTNAME), files under HOSTILE_DIR hold templates, ANSI escapes and rich
                markup, ~/.bashrc prints a templated banner, a run's state.json
                (HOSTILE_RUN) lists a peer on the controller's bridge address (HOSTILE_PEER_PORT)
                and its log is hostile text, and /tmp holds a symlink to a root-only file. Attacks
                that would break every command are off until a test creates their flag file
                (Fleet.hostile_on): ``endless`` / ``endless-err`` (a banner without end on stdout
                / stderr), ``home`` ($HOME set to the file's text), ``lie-path`` (a sha1sum on
                PATH that slips the file's text into fetch's reply as an `@@path` line),
                ``agent-COMMAND`` (issue 29: the host's python3 answers that agent command with
                what the file's Python code emits: LYING_PYTHON, FAKE_AGENT). Issue 29 too:
                /etc/os-release is HOSTILE_OS_RELEASE bound over it (a copy of the real one until
                a test writes its own: `Fleet.hostile_os_release`), a run (HOSTILE_TEXT_RUN)
                and the idle watcher's state hold TEXT_CANARY (rich markup, HTML, a fence): the
                run's command and log lines, the watcher's status.
- ``ownroot``   its own writable copy of this machine's root filesystem: an overlay over `/`
                (writes go to the host's tmpfs), sshd chrooted into it, so a playbook may change
                /etc, /usr, /var (users, sshd_config, sysctl.conf, pam.d...) on that host only.
                The roles parity corpus (tests/roles_corpus/) runs on such twins.

Every fleet also has a passphrase-protected key (Fleet.passphrase_key_file, its passphrase in
Fleet.key_passphrase) authorized for every login on every host.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

KINDS = frozenset({"plain", "noisy", "gateway", "sudo", "behind-jump", "conda", "nopython", "bullseye", "backnet",
                   "hostile", "ownroot", "smallshm"})
SMALL_SHM = "64m"  # Docker's default /dev/shm
# What every noisy command prints before its own output (tests assert it never reaches results).
NOISE_OUT = "Welcome to rental-cloud! GPU instance ready. conda base activated."
NOISE_ERR = "bash: warning: setlocale: LC_ALL: cannot change locale (zh_CN.UTF-8)"
SUDO_NOPASSWD_USER = "ubuntu"
SUDO_PASSWORD_USER = "ops"
CONDA_PREFIX = "/root/miniconda3"
GATEWAY_FIRST_PORT = 41001
BACKNET_MTU = 9000

ROOTFS_CACHE = Path(os.environ.get("PROVISION_TEST_CACHE", "/var/cache/provision-tests"))
BULLSEYE_PACKAGES = ("openssh-server", "python3", "python3-venv", "sudo", "procps", "iproute2")


def parse_kinds(kinds: str | Iterable[str | Iterable[str]] | None, size: int) -> list[frozenset[str]]:
    """One trait set per host: a string or set applies to all hosts, a list gives one per host."""
    if kinds is None:
        return [frozenset()] * size
    if isinstance(kinds, str):
        per_host: list = [kinds] * size
    else:
        per_host = list(kinds)
        if per_host and all(isinstance(k, str) for k in per_host) and len(per_host) != size:
            raise ValueError(f"kinds: {len(per_host)} given for {size} hosts (give one per host)")
    if len(per_host) != size:
        raise ValueError(f"kinds: {len(per_host)} given for {size} hosts (give one per host)")
    out = []
    for k in per_host:
        traits = frozenset([k] if isinstance(k, str) else k) - {"plain"}
        unknown = traits - KINDS
        if unknown:
            raise ValueError(f"unknown fleet host kind(s) {sorted(unknown)}; known: {sorted(KINDS)}")
        for own in ("bullseye", "ownroot"):
            if own in traits and traits & {"conda", "gateway", "behind-jump"}:
                raise ValueError(f"{own} hosts can't be combined with conda, gateway or behind-jump")
        if {"bullseye", "ownroot"} <= traits:
            raise ValueError("a host has one root filesystem: bullseye or ownroot, not both")
        if "backnet" in traits and "behind-jump" in traits:
            raise ValueError("backnet hosts can't be behind the jump host")
        if "hostile" in traits and traits & {"noisy", "sudo", "bullseye"}:
            raise ValueError("hostile hosts write their own ~/.bashrc: not with noisy, sudo or bullseye")
        if "gateway" in traits and "behind-jump" in traits:
            raise ValueError("a host is either behind the gateway address or behind the jump host")
        out.append(traits)
    return out


# -- the bullseye root filesystem ---------------------------------------------------------------


def debian_mirror() -> str:
    """The Debian mirror apt uses on this machine (deb822 or one-line sources)."""
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for src in sources:
        try:
            text = src.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] and len(words) > 1 and "security" not in words[1]:
                return words[1]
            if words[:1] == ["deb"]:
                urls = [w for w in words[1:] if "://" in w]
                if urls and "security" not in urls[0]:
                    return urls[0]
    return "http://deb.debian.org/debian"


def bullseye_rootfs_path() -> Path:
    key = hashlib.sha256(",".join(BULLSEYE_PACKAGES).encode()).hexdigest()[:10]
    return ROOTFS_CACHE / f"bullseye-rootfs-{key}"


def bullseye_rootfs(*, build: bool = True, timeout: float = 1500) -> Path:
    """The cached Debian 11 root filesystem; built (as root, with debootstrap) when missing.
    Keyed by the package list; a half-built one is never used (built aside, then renamed)."""
    final = bullseye_rootfs_path()
    if (final / "usr/bin/python3").exists():
        return final
    if not build:
        raise FileNotFoundError(f"{final} is not built (run scripts/test.sh as root)")
    if shutil.which("debootstrap") is None:
        raise FileNotFoundError("debootstrap is not installed (apt-get install debootstrap)")
    ROOTFS_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(final.name + f".build-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(BULLSEYE_PACKAGES)}",
           "bullseye", str(tmp), debian_mirror()]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n" + "\n".join(tail))
    (tmp / "fleet").mkdir(exist_ok=True)  # where a host's sshd config and keys are mounted
    try:
        tmp.rename(final)
    except OSError:  # another run finished first: theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return final


# -- per-host setup (runs inside the host's namespaces, before sshd) ---------------------------


def noisy_rc() -> str:
    return f'echo "{NOISE_OUT}"\necho "{NOISE_ERR}" >&2\n'


def conda_script(python: str, torch_site: str) -> str:
    """Shell that builds the conda-style prefix from `python` (this machine's interpreter that
    has torch). `--copies`: the prefix's python works where /usr/bin/python3 is hidden
    (nopython); the .pth gives it this machine's torch, as conda's site-packages would."""
    lines = [
        "set -e",
        f"{python} -m venv --without-pip --copies {CONDA_PREFIX}",
        f"{python} -m venv --without-pip --copies {CONDA_PREFIX}/envs/bare",
        f"mkdir -p {CONDA_PREFIX}/conda-meta {CONDA_PREFIX}/envs/bare/conda-meta",
        f"echo '{{}}' > {CONDA_PREFIX}/conda-meta/history",
        f"cd {CONDA_PREFIX}/bin && for n in python3 python; do [ -e $n ] || ln -s python3.* $n; done",
        f"for d in {CONDA_PREFIX}/lib/python3*/site-packages; do echo {torch_site} > $d/zz-torch.pth; done",
    ]
    return "\n".join(lines) + "\n"


def torch_prefix() -> tuple[str, str]:
    """(interpreter, site-packages dir holding torch) of this machine's Python that has torch,
    found without importing it. The conda kind needs a real torch."""
    import importlib.util
    import sys

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        raise RuntimeError(f"the conda fleet kind needs torch importable by {sys.executable}")
    site = os.path.dirname(os.path.dirname(spec.origin))
    return os.path.realpath(sys.executable), site


def hidden_by_host(path: str) -> bool:
    """Paths under /root, /home, /tmp, /run: each host mounts its own there."""
    return any(path == top or path.startswith(top + "/") for top in ("/root", "/home", "/tmp", "/run"))


def sudoers_lines() -> str:
    return (
        f"{SUDO_NOPASSWD_USER} ALL=(ALL:ALL) NOPASSWD: ALL\n"
        f"{SUDO_PASSWORD_USER} ALL=(ALL:ALL) ALL\n"
    )


def sudo_users_script(host, keys: list[str]) -> str:
    """Set up `ubuntu` (passwordless sudo) and `ops` (sudo asks for its password) on `host`
    (a FleetHost), both logging in with `keys`: private copies of passwd/shadow/group/sudoers in
    the host's workdir, and the shell (run in the host's namespaces) that bind-mounts them there
    only and makes the homes."""
    import shlex

    etc = Path(host.rootfs or "/") / "etc"
    files = {name: host.workdir / name for name in ("passwd", "shadow", "group", "sudoers")}
    for name, path in files.items():
        shutil.copyfile(etc / name, path)
    os.chmod(files["shadow"], 0o600)
    os.chmod(files["sudoers"], 0o440)
    passwd = files["passwd"].read_text().splitlines()
    uids = [int(line.split(":")[2]) for line in passwd if line.count(":") >= 6]
    uid = max([u for u in uids if 1000 <= u < 60000], default=999)
    homes = []
    with open(files["passwd"], "a") as pw, open(files["group"], "a") as gr, open(files["shadow"], "a") as sh:
        for user in (SUDO_NOPASSWD_USER, SUDO_PASSWORD_USER):
            uid += 1
            pw.write(f"{user}:x:{uid}:{uid}::/home/{user}:/bin/bash\n")
            gr.write(f"{user}:x:{uid}:\n")
            password = host.sudo_passwords.get(user)
            # "*": no password login, but not "locked" (sshd refuses locked accounts' keys too)
            hashed = "*" if password is None else subprocess.run(
                ["openssl", "passwd", "-6", "-stdin"], input=password + "\n",
                capture_output=True, text=True, check=True, timeout=30,
            ).stdout.strip()  # fmt: skip
            sh.write(f"{user}:{hashed}:19000:0:99999:7:::\n")
            homes.append((user, uid))
    with open(files["sudoers"], "a") as fh:
        fh.write(sudoers_lines())
    authorized = shlex.quote("".join(k + "\n" for k in keys))
    rc = shlex.quote(noisy_rc() if "noisy" in host.kinds else "")
    script = ["set -e"]
    script += [f"mount --bind {host.in_host(files[n])} /etc/{n}" for n in files]
    for user, uid in homes:
        home = f"/home/{user}"
        script += [
            f"mkdir -p -m 700 {home}/.ssh",
            f"printf '%s' {authorized} > {home}/.ssh/authorized_keys",
            f"printf '%s' {rc} > {home}/.bashrc",
            f"cp {home}/.bashrc {home}/.profile",
            f"chown -R {uid}:{uid} {home} && chmod 700 {home}",
        ]
    return "\n".join(script)


# -- the hostile kind (issue 20) ----------------------------------------------------------------

# Rendered as a template on the controller, it creates PWNED in the controller's working folder.
# 34 characters: a hostname holds 64 at most (written to /proc: `hostname` refuses it).
HOSTILE_HOSTNAME = "{{ lookup('pipe','touch PWNED') }}"
HOSTILE_DIR = "/root/hostile"  # the planted files
HOSTILE_FLAGS = "/root/.hostile"  # a test turns an attack on by creating a file here
HOSTILE_RUN = "hostile-run"  # a run id whose state.json lists a peer only the host names
HOSTILE_DATA_DIR = "/root/autodl-tmp"
HOSTILE_PEER_PORT = 47022  # on the fleet's bridge address (its own /24): no other fleet uses it
HOSTILE_SECRET_TARGET = "/root/hostile-root-only"  # what the /tmp symlink points at (0600)
HOSTILE_TMP_LINK = "/tmp/provision-shared"
ESCAPES = "\x1b]0;owned-title\x07\x1b[2J\x1b[31mred\x1b[0m\x1b]8;;file:///etc/passwd\x1b\\link\x1b]8;;\x1b\\"
MARKUP = "[bold red]markup[/] [link=file:///etc/passwd]click[/link] [/]"
# Issue 29: what a host says wherever a command prints its words (tests/support/text_plan.py's,
# the same text: tests/unit/test_cli_text.py checks); 60 characters, as a hostname holds 64
TEXT_CANARY = "[/x][link=https://evil.example]L[/link][b]<img onerror=1>```"
HOSTILE_TEXT_RUN = "hostile-text"
HOSTILE_OS_RELEASE = f"{HOSTILE_DIR}/os-release"


def hostile_template(canary: str) -> str:
    """A Jinja expression that creates `canary` on whoever renders it."""
    return "{{ lookup('pipe', 'touch " + canary + "') }}"


def hostile_texts(canary: str) -> dict[str, str]:
    """File name (under HOSTILE_DIR) -> content: what a compromised host says when asked."""
    t = hostile_template(canary)
    return {
        "template.txt": f"{t}\n{{% for i in range(3) %}}{t}{{% endfor %}}\n{{# a comment #}}\n",
        "escapes.txt": f"{ESCAPES}\n{MARKUP}\n",
        "mixed.txt": f"{MARKUP} {t} {ESCAPES}\n",
    }


def hostile_rc(canary: str) -> str:
    """~/.bashrc and ~/.profile: a templated banner always; the flagged attacks when asked."""
    f = HOSTILE_FLAGS
    return (
        f'echo "rental ready {hostile_template(canary)}"\n'
        f'echo "{MARKUP}" >&2\n'
        f'if [ -e {f}/endless ]; then while :; do echo "Welcome! $(printf "%0200d" 0) {{{{ 7*7 }}}}"; done; fi\n'
        f'if [ -e {f}/endless-err ]; then while :; do echo "warning: $(printf "%0200d" 0)" >&2; done; fi\n'
        f'if [ -e {f}/home ]; then HOME=$(cat {f}/home); export HOME; fi\n'
        f'if [ -e {f}/lie-path ]; then PATH={f}/bin:$PATH; export PATH; fi\n'
        f'if ls {f}/agent-* >/dev/null 2>&1; then PATH={f}/pybin:$PATH; export PATH; fi\n'
    )


# Issue 29: the host's own python3 answers agent commands as it likes. With a flag file
# `agent-COMMAND` (Python code run with `emit(**event)` and `result(data)`), that command's reply
# is the code's; every other command goes to the real python3 (the wrapper takes its own folder
# out of PATH first).
LYING_PYTHON = (
    "#!/bin/sh\n"
    "for a; do\n"
    '  case "$a" in ""|*[!a-z_]*) continue ;; esac\n'
    f'  if [ -e {HOSTILE_FLAGS}/agent-"$a" ]; then PATH=$(printf %s "$PATH" | sed "s#{HOSTILE_FLAGS}/pybin:##g") exec python3 {HOSTILE_FLAGS}/fake_agent.py "$a"; fi\n'
    "done\n"
    f'PATH=$(printf %s "$PATH" | sed "s#{HOSTILE_FLAGS}/pybin:##g") exec python3 "$@"\n'
)
FAKE_AGENT = (
    "import json, os, sys, threading, time\n"
    "def drain():\n"
    "    try:\n"
    "        while os.read(0, 1 << 16):\n"
    "            pass\n"
    "    except OSError:\n"
    "        pass\n"
    "reader = threading.Thread(target=drain, daemon=True)\n"
    "reader.start()\n"
    "def emit(**event):\n"
    "    sys.stdout.write(json.dumps(event) + '\\n')\n"
    "    sys.stdout.flush()\n"
    "def result(data):\n"
    "    reader.join(10)\n"
    "    emit(event='result', data=data)\n"
    f"code = open('{HOSTILE_FLAGS}/agent-' + sys.argv[1]).read()\n"
    "exec(compile(code, 'agent-' + sys.argv[1], 'exec'), {'emit': emit, 'result': result, 'time': time, 'sys': sys})\n"
)


# A sha1sum that first writes a false `@@path` line into its shell's stdout (fetch's reply).
LYING_SHA1SUM = (
    "#!/bin/sh\n"
    f'printf "@@path %s\\n" "$(cat {HOSTILE_FLAGS}/lie-path)" >> /proc/$PPID/fd/1\n'
    'PATH=${PATH#*:} exec sha1sum "$@"\n'
)


def hostile_state(peer: str, self_name: str) -> dict:
    """HOSTILE_RUN's state.json: an ended distributed run whose peers include `peer`."""
    log = f"{HOSTILE_DATA_DIR}/runs/{HOSTILE_RUN}/output.log"
    return {
        "run_id": HOSTILE_RUN, "state": "finished", "exit_code": 0, "log": log, "created": 1.0,
        "started": 1.0, "ended": 2.0, "command": ["python", "train.py"],
        "distributed": {"hosts": [self_name, peer], "nproc": {self_name: 1}},
    }


def hostile_script(root: str, host, peer: str, canary: str) -> list[str]:
    """Shell lines (in the host's namespaces, after its /root and /tmp are mounted) that make
    `host` (a FleetHost) the hostile kind."""
    import json
    import shlex

    q = shlex.quote
    run_dir = f"{root}{HOSTILE_DATA_DIR}/runs/{HOSTILE_RUN}"
    text_run = f"{root}{HOSTILE_DATA_DIR}/runs/{HOSTILE_TEXT_RUN}"
    text_log = f"{HOSTILE_DATA_DIR}/runs/{HOSTILE_TEXT_RUN}/output.log"
    text_state = {"run_id": HOSTILE_TEXT_RUN, "state": "finished", "exit_code": 0, "log": text_log, "created": 1.0,
                  "started": 1.0, "ended": 2.0, "command": [TEXT_CANARY]}
    lines = [
        f"printf '%s' {q(HOSTILE_HOSTNAME)} > /proc/sys/kernel/hostname",
        f"mkdir -p {root}{HOSTILE_DIR} {root}{HOSTILE_FLAGS}/bin {run_dir}",
        f"printf '%s' {q(hostile_rc(canary))} > {root}/root/.bashrc",
        f"cp {root}/root/.bashrc {root}/root/.profile",
        f"printf '%s' {q(LYING_SHA1SUM)} > {root}{HOSTILE_FLAGS}/bin/sha1sum",
        f"chmod 755 {root}{HOSTILE_FLAGS}/bin/sha1sum",
        f"mkdir -p {root}{HOSTILE_FLAGS}/pybin",
        f"printf '%s' {q(LYING_PYTHON)} > {root}{HOSTILE_FLAGS}/pybin/python3",
        f"chmod 755 {root}{HOSTILE_FLAGS}/pybin/python3",
        f"printf '%s' {q(FAKE_AGENT)} > {root}{HOSTILE_FLAGS}/fake_agent.py",
        f"printf '%s' {q(json.dumps(hostile_state(peer, host.name)))} > {run_dir}/state.json",
        f"printf '%s\\n' {q(hostile_template(canary))} {q(ESCAPES)} {q(MARKUP)} > {run_dir}/output.log",
        # issue 29: a run and the idle watcher whose every printed string is TEXT_CANARY
        f"mkdir -p {text_run} {root}{HOSTILE_DATA_DIR}/runs/.idle",
        f"printf '%s' {q(json.dumps(text_state))} > {text_run}/state.json",
        f"printf '%s\\n' {q(TEXT_CANARY)} '```' {q(TEXT_CANARY)} > {text_run}/output.log",
        f"printf '%s' {q(json.dumps({'status': TEXT_CANARY, 'pid': 0}))} > {root}{HOSTILE_DATA_DIR}/runs/.idle/state.json",
        f"cat {root}/etc/os-release > {root}{HOSTILE_OS_RELEASE}",
        f"cat {root}/etc/os-release > {root}{HOSTILE_OS_RELEASE}.orig",
        f"mount --bind {root}{HOSTILE_OS_RELEASE} {root}/etc/os-release",
        f"umask 077; echo root-only > {root}{HOSTILE_SECRET_TARGET}",
        f"ln -s {HOSTILE_SECRET_TARGET} {root}{HOSTILE_TMP_LINK}",
    ]
    for name, text in hostile_texts(canary).items():
        lines.append(f"printf '%s' {q(text)} > {root}{HOSTILE_DIR}/{name}")
    return lines
