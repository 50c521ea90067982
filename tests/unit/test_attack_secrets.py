"""Secrets stay secret: the one secret-name rule (provision/secrets.py), URL passwords, `no_log`
arguments, and inventory output — through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import provision.bench  # noqa: F401  (registers the bench's section of the report)
from provision.modules.base import Arg, Module, secret_arg_values
from provision.secrets import MASK, Masker, collect_secrets, is_secret_name, mask_tree, mask_urls

ROOT = Path(__file__).resolve().parents[2]

SECRET_NAMES = [
    "ansible_password",
    "ansible_ssh_pass",
    "ansible_ssh_password",
    "ansible_become_pass",
    "ansible_become_password",
    "ansible_sudo_pass",
    "db_password",
    "smtp_pass",
    "HF_TOKEN",
    "github_token",
    "aws_secret",
    "client_secret",
    "deploy_key",
    "api_key",
    "wandb_api_key",
    "OPENAI_API_KEY",
    "passphrase",
    "registry_credentials",
    "private_key",
    "ssh_private_key",
    "KEY_PASSPHRASE",
]
NOT_SECRET = [
    "password_env",
    "hf_token_env",
    "ansible_ssh_private_key_file",
    "key_path",
    "user",
    "ansible_user",
    "ansible_host",
    "index_url",
    "monkey",
    "keyboard",
    "bypass",
    "passage",
    "key",  # a mapping's key (dict2items / with_dict's item.key), authorized_key's public key
    "ssh_public_key",
    "public_key",
    "ssh_key_pub",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", NOT_SECRET)
def test_names_that_hold_no_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_url_passwords_are_masked_in_any_text() -> None:
    text = "pip -i https://bob:pa%40ss@pypi.example/simple; ssh://root@gpu1 http://tok@h/x"
    assert mask_urls(text) == (
        f"pip -i https://bob:{MASK}@pypi.example/simple; ssh://root@gpu1 http://tok@h/x"
    )
    found = collect_secrets([{"index": "https://bob:pa%40ss@pypi.example/simple"}])
    assert found == {"pa%40ss", "pa@ss"}
    masker = Masker(found)
    assert "pa@ss" not in masker.text("auth failed for pa@ss at https://bob:pa%40ss@pypi.example/")


def test_masking_nested_values_under_secret_names() -> None:
    shown = mask_tree(
        {"vault_secret": {"a": "x", "b": [1, None]}, "api_key": 7, "ok": True, "flag_token": False}
    )
    assert shown == {
        "vault_secret": {"a": MASK, "b": [MASK, None]},
        "api_key": MASK,
        "ok": True,
        "flag_token": False,
    }


class _Demo(Module):
    name = "demo_no_log"
    args = {"url": Arg("str"), "secret_thing": Arg("str", no_log=True), "plain": Arg("str")}


def test_no_log_arguments_and_secret_names_feed_the_masker() -> None:
    values = secret_arg_values(
        _Demo(),
        {"url": "https://u:urlpass1@h/", "secret_thing": "hidden12", "plain": "shown",
         "headers": {"Authorization": "Bearer tok123"}},
    )
    assert {"urlpass1", "hidden12", "Bearer tok123"} <= set(values)
    assert "shown" not in values


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path


SECRETS = {
    "ansible_become_pass": "becomeSECRET1",
    "ansible_ssh_pass": "sshSECRET2",
    "ansible_password": "pwSECRET3",
    "wandb_api_key": "wandbSECRET4",
    "hf_token": "hfSECRET6",
}


def cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "provision", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_inventory_output_masks_every_secret(tmp_path: Path) -> None:
    host_vars = " ".join(f"{k}={v}" for k, v in SECRETS.items() if k != "hf_token")
    inventory = write(
        tmp_path / "hosts.ini",
        f"""
        [gpus]
        g1 ansible_host=198.18.0.5 {host_vars} mirror=https://u:urlSECRET5@pypi.x/simple
        [gpus:vars]
        hf_token={SECRETS["hf_token"]}
        password_env=MY_PW_VAR
        """,
    )
    every = [*SECRETS.values(), "urlSECRET5"]
    for shape in (["--list"], ["--json"], ["--json", "--export"], ["--graph"], []):
        out = cli("inventory", "-i", str(inventory), *shape)
        assert out.returncode == 0, out.stderr
        leaked = [s for s in every if s in out.stdout or s in out.stderr]
        assert leaked == [], (shape, leaked)
    listed = json.loads(cli("inventory", "-i", str(inventory), "--json").stdout)
    hostvars = listed["_meta"]["hostvars"]["g1"]
    assert hostvars["ansible_become_pass"] == MASK and hostvars["wandb_api_key"] == MASK
    assert hostvars["mirror"] == f"https://u:{MASK}@pypi.x/simple"
    assert hostvars["password_env"] == "MY_PW_VAR"  # names a variable: shown


def test_run_json_hides_no_log_and_url_credentials(tmp_path: Path) -> None:
    playbook = write(
        tmp_path / "site.yml",
        f"""
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: fetch with credentials
              get_url:
                url: "http://alice:urlSECRET7@127.0.0.1:9/x"
                dest: {tmp_path}/dl
                url_password: "noLogSECRET8"
                headers:
                  Authorization: "Bearer headerSECRET9"
                timeout: 1
              ignore_errors: true
            - debug:
                msg: "token is {{{{ my_api_key }}}}"
        """,
    )
    out = cli("run", str(playbook), "--json", "-v", "-e", "my_api_key=varSECRET10")
    assert out.stdout.strip(), out.stderr
    json.loads(out.stdout)
    for secret in ("urlSECRET7", "noLogSECRET8", "headerSECRET9", "varSECRET10"):
        assert secret not in out.stdout and secret not in out.stderr, secret
    assert MASK in out.stdout


def test_reports_never_hold_url_passwords(tmp_path: Path) -> None:
    from provision.report.document import build_report, write_report

    doc = build_report(
        "gpu1",
        install={"index_url": "https://bob:repPASS99@mirror.example/simple", "action": "installed"},
        bench={"network": {"index": {"url": "http://x:benchPASS77@h/simple"}}},
    )
    paths = write_report(doc, tmp_path / "reports")
    for path in paths.values():
        text = Path(path).read_text()
        assert "repPASS99" not in text and "benchPASS77" not in text, path
    assert doc["install"]["index_url"] == f"https://bob:{MASK}@mirror.example/simple"


# -- get_url: every downloader gets the URL, credentials and headers without argv ----------------


class _AuthServer:
    """127.0.0.1 HTTP server that answers only with the right Basic auth and X-Api-Token."""

    def __init__(self, user: str, password: str, token: str) -> None:
        import base64
        import http.server
        import threading

        expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        seen: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                ok = self.headers.get("Authorization") == expected and self.headers.get("X-Api-Token") == token
                seen.append("ok" if ok else "denied")
                body = b"payload\n" if ok else b""
                self.send_response(200 if ok else 401)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.seen = seen
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.port = self.server.server_address[1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _tool_dir(tmp_path: Path, downloader: str) -> Path:
    """A PATH with the tools the get_url script needs and exactly one downloader."""
    import shutil

    bin_dir = tmp_path / f"bin-{downloader}"
    bin_dir.mkdir()
    tools = ["sh", "sed", "mktemp", "cat", "sha256sum", "sha1sum", "dirname", "basename", "mv", "cmp",
             "rm", "stat", "chmod", "chown", "chgrp", "id", "head", "tail", "tr", "date", "base64",
             downloader]
    for tool in tools:
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed here")
        target = Path(os.path.realpath(found)) if tool != "python3" else Path(sys.executable)
        (bin_dir / tool).symlink_to(target)
    return bin_dir


@pytest.mark.parametrize("downloader", ["curl", "wget", "python3"])
def test_get_url_sends_credentials_and_headers_without_argv(tmp_path: Path, downloader: str) -> None:
    from provision.connection.local import LocalConnection
    from provision.inventory.model import Host
    from provision.modules.base import TaskContext, get_module, normalize_args

    password, token = "pw$(id)'\"" + os.urandom(4).hex(), "tok " + os.urandom(4).hex()
    server = _AuthServer("alice", password, token)
    try:
        module = get_module("get_url")()  # type: ignore[misc]
        args = normalize_args(module, {
            "url": f"http://127.0.0.1:{server.port}/data.txt", "dest": str(tmp_path / "got.txt"),
            "url_username": "alice", "url_password": password, "headers": {"X-Api-Token": token},
        })
        conn = LocalConnection(Host("localhost", local=True))
        seen_argv: list[str] = []
        original = conn.run

        def run(command: str, **kw: object):  # every command line the module sends
            seen_argv.append(command)
            return original(command, **kw)  # type: ignore[arg-type]

        conn.run = run  # type: ignore[method-assign]
        ctx = TaskContext(host=conn.host, connection=conn, args=args,
                          environment={"PATH": str(_tool_dir(tmp_path, downloader))})
        result = module.run(ctx)
    finally:
        server.close()
    assert server.seen == ["ok"], server.seen
    assert (tmp_path / "got.txt").read_text() == "payload\n"
    assert result.data["url"] == f"http://alice:{MASK}@127.0.0.1:{server.port}/data.txt"
    assert not [c for c in seen_argv if password in c or token in c]
