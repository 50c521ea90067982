"""Shared test setup: every test runs with its own provision state, never the user's.

- PROVISION_HOME, PROVISION_KNOWN_HOSTS and PROVISION_USER_KNOWN_HOSTS point into a per-test
  temp dir (not `tmp_path`, so a test's own tmp_path stays empty), and SSH_AUTH_SOCK is unset:
  nothing reads or writes ~/.ssh or ~/.local/state/provision, and no agent key is offered.
- ANSIBLE_CONFIG names an empty file and the ANSIBLE_* settings are unset: the machine's
  ansible.cfg never changes a test.
- The whole session runs with a temporary HOME and XDG_{CACHE,STATE,CONFIG,DATA}_HOME (set in
  os.environ, so subprocess CLIs, ansible-playbook and the local agent inherit them): nothing a
  test runs writes into this machine's ~/.cache, ~/.local/state, ~/.config or ~/.ansible. The
  fleet's keys and sshd files live in its own workdir, so fleet tests are unaffected. The real
  home stays reachable as REAL_HOME (for interpreters found there, e.g. pyenv's).
- Tests under tests/fleet/ get the `fleet` marker; `fleet` tests skip with the reason when this
  machine cannot run the SSH test fleet (not root, no sshd, no network namespaces).
"""

from __future__ import annotations

import os
import pwd
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

FLEET_DIR = Path(__file__).resolve().parent / "fleet"
if str(FLEET_DIR) not in sys.path:
    sys.path.insert(0, str(FLEET_DIR))  # `from fleet import Fleet` (tests/ is not a package)


# ansible-core's module_utils replace sys.intern with an object of their own when imported, and
# torch._dynamo, imported afterwards in the same process, refuses it (TypeError: substitute_in_graph
# expects a function) — so `provision choose`'s graph tracing failed in whichever test process had
# imported ansible first (the parity harness, test_engine_vs_ansible). provision never imports
# ansible (tests/unit/test_ansible_fallback.py checks it); in the test process dynamo comes first.
try:
    import torch._dynamo  # noqa: F401
except Exception:  # no torch here: nothing to order
    pass

REAL_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)
_XDG = ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")


@pytest.fixture(scope="session", autouse=True)
def temporary_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """HOME and the XDG dirs in a session temp dir, for this process and every child."""
    home = tmp_path_factory.mktemp("home")
    values = {"HOME": str(home), **{name: str(home / name.lower()) for name in _XDG}}
    for name in _XDG:
        Path(values[name]).mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for name, value in values.items():
            mp.setenv(name, value)
        yield home


@pytest.fixture(scope="session", autouse=True)
def kept_connections_dir() -> Iterator[Path]:
    """The SSH masters a test keeps across runs (--persist) live in this session's own short
    directory (a unix socket path is short), and are ended after every test (below): no test
    reuses another's connection, none is left running, and a parallel session's are not ours."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="pvk-", dir="/tmp"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROVISION_SSH_PERSIST_DIR", str(path))
        try:
            yield path
        finally:
            _end_kept()
            import shutil

            shutil.rmtree(path, ignore_errors=True)


def _end_kept() -> None:
    from provision.connection.openssh_kept import disconnect

    disconnect()


@pytest.fixture(autouse=True)
def end_kept_connections(kept_connections_dir: Path) -> Iterator[None]:
    yield
    if any(kept_connections_dir.iterdir()):
        _end_kept()


@dataclass
class ProvisionEnv:
    home: Path
    known_hosts: Path  # the project's file: accept-new writes here
    user_known_hosts: Path  # stands in for ~/.ssh/known_hosts


@pytest.fixture(autouse=True)
def provision_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> ProvisionEnv:
    base = tmp_path_factory.mktemp("provision-env")
    env = ProvisionEnv(
        home=base / "home",
        known_hosts=base / "known_hosts",
        user_known_hosts=base / "user_known_hosts",
    )
    env.home.mkdir()
    monkeypatch.setenv("PROVISION_HOME", str(env.home))
    monkeypatch.setenv("PROVISION_KNOWN_HOSTS", str(env.known_hosts))
    monkeypatch.setenv("PROVISION_USER_KNOWN_HOSTS", str(env.user_known_hosts))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    # No ansible.cfg of this machine (/etc/ansible, ~/.ansible.cfg, ./) nor ANSIBLE_* settings
    # reach provision.config: an empty one is the config, unless a test names its own.
    empty_cfg = base / "ansible.cfg"
    empty_cfg.write_text("")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(empty_cfg))
    for var in _ANSIBLE_SETTINGS:
        monkeypatch.delenv(var, raising=False)
    return env


_ANSIBLE_SETTINGS = (  # the ANSIBLE_* variables provision.config reads
    "ANSIBLE_INVENTORY", "ANSIBLE_REMOTE_USER", "ANSIBLE_PRIVATE_KEY_FILE", "ANSIBLE_ROLES_PATH",
    "ANSIBLE_FORKS", "ANSIBLE_HOST_KEY_CHECKING", "ANSIBLE_BECOME", "ANSIBLE_BECOME_USER",
    "ANSIBLE_BECOME_METHOD",
)  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if FLEET_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.fleet)
    fleet_items = [item for item in items if item.get_closest_marker("fleet")]
    if fleet_items:
        from fleet import preflight

        reason = preflight()
        if reason:
            skip = pytest.mark.skip(reason=f"SSH test fleet unavailable: {reason}")
            for item in fleet_items:
                item.add_marker(skip)
