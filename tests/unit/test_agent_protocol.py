"""The agent's wire protocol as the host runs it: JSON through the json module's C accelerator
without importing `json`, sys.path rebuilt by hand under `python3 -S`, and the import budget of a
`facts` call. Each check runs on every Python found here that the agent must support (3.8+:
pyenv versions, Debian's /usr/bin/python3), in fresh interpreters."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from provision.agent import protocol

REPO = Path(__file__).resolve().parents[2]


def interpreters() -> list[str]:
    found = [sys.executable]
    candidates = ["/usr/bin/python3"] + sorted(
        glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3"))
    )
    for path in candidates:
        if not os.access(path, os.X_OK) or os.path.realpath(path) in map(os.path.realpath, found):
            continue
        version = subprocess.run(
            [path, "-c", "import sys; print(sys.version_info >= (3, 8))"],
            capture_output=True,
            text=True,
        )
        if version.stdout.strip() == "True":  # the agent's floor; older ones are not supported
            found.append(path)
    return found


def run_python(python: str, code: str, *flags: str, env: dict | None = None, **kw):
    full_env = dict(os.environ if env is None else env)
    full_env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [python, *flags, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
        **kw,
    )


class Odd:
    def __str__(self) -> str:
        return "odd object"


SAMPLES = [
    {},
    {"event": "result", "data": {"a": [1, 2.5, None, True, False, "x"], "b": {}}},
    {"unicode": "数据 ü \u2028 \U0001f600", "escapes": 'quote " backslash \\ tab \t nl \n'},
    {"big": 2**70, "neg": -3, "float": 0.1, "exp": 1e300, "tiny": 5e-324},
    {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")},
    {1: "int key", 2.5: "float key", False: "bool key", None: "none key"},
    {"tuple": (1, 2), "nested": [[[]], [{}]], "path": Path("/tmp/x"), "obj": Odd()},
]


@pytest.mark.parametrize("value", SAMPLES)
def test_dumps_gives_json_dumps_text(value):
    assert protocol._accelerator(), "_json should be usable on CPython"
    assert protocol.dumps(value) == json.dumps(value, default=str)


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        '  {"only": ["cpu", "data_dir"], "data_dir": "/root/autodl-tmp"}  \n',
        '{"n": 1.5, "i": -12, "u": "\\u6570\\u636e", "l": [true, false, null]}',
        '[1, 2, {"a": "b"}]',
        '"just a string"',
        "NaN",
        '{"x": Infinity}',
    ],
)
def test_loads_gives_json_loads_value(text):
    got, want = protocol.loads(text), json.loads(text)
    assert json.dumps(got) == json.dumps(want)  # (NaN != NaN, so compared as text)


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} trailing', "{'single': 1}", "[1,]", "nul"])
def test_loads_errors_are_json_errors(text):
    with pytest.raises(ValueError) as ours:
        protocol.loads(text)
    with pytest.raises(ValueError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)


def test_dumps_of_a_circular_structure_raises_like_json():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        protocol.dumps(loop)
    assert protocol.dumps({"after": "still fine"}) == '{"after": "still fine"}'


@pytest.mark.parametrize("python", interpreters())
def test_fast_json_on_each_python(python):
    """The accelerator path is taken (not the fallback) and agrees with json on every Python."""
    code = """
        import json, sys
        sys.modules["json"] = None  # the fast path must not need it
        from provision.agent import protocol
        assert protocol._accelerator(), "fallback taken"
        value = {"a": [1, 2.5, None, True], "u": "\\u6570 \\U0001f600", 3: "k", "f": float("inf")}
        text = protocol.dumps(value)
        back = protocol.loads(text)
        del sys.modules["json"]
        import json
        assert text == json.dumps(value, default=str), text
        assert back == json.loads(text), back
        print("ok")
    """
    proc = run_python(python, code, "-S")
    assert proc.stdout.strip() == "ok", proc.stderr


# -- sys.path under -S ------------------------------------------------------------------------------
PATH_REPORT = """
    import json, os, sys
    if sys.flags.no_site:
        from provision.agent import protocol
        protocol.add_site_packages()
    existing = [os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)]
    print(json.dumps({"path": existing, "prefix": sys.prefix, "exec_prefix": sys.exec_prefix}))
"""


def path_report(python: str, *flags: str, env: dict | None = None) -> dict:
    proc = run_python(python, PATH_REPORT, *flags, env=env, cwd="/")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    repo = os.path.realpath(REPO)
    report["path"] = [p for p in report["path"] if p != repo]  # PYTHONPATH, same in both
    return report


@pytest.mark.parametrize("python", interpreters())
def test_site_packages_under_dash_s_match_site(python, tmp_path):
    """The folders `site` would add, in its order, including a user site with a .pth that
    names a folder (added) and runs an import (not run)."""
    user_base = tmp_path / "userbase"
    probe = run_python(python, "import sys; print('%d.%d' % sys.version_info[:2])")
    user_site = user_base / "lib" / f"python{probe.stdout.strip()}" / "site-packages"
    user_site.mkdir(parents=True)
    extra = tmp_path / "extra"
    extra.mkdir()
    marker = tmp_path / "imported"
    (user_site / "extra.pth").write_text(
        f"# a comment\n{extra}\n{tmp_path / 'missing'}\n"
        f"import os; open({str(marker)!r}, 'w').close()\n"
    )
    env = dict(os.environ, PYTHONUSERBASE=str(user_base))
    env.pop("PYTHONNOUSERSITE", None)
    with_site = path_report(python, env=env)
    assert marker.exists()  # site ran the import line
    marker.unlink()
    without_site = path_report(python, "-S", env=env)
    assert not marker.exists(), "an import line of a .pth file was run under -S"
    assert without_site == with_site
    assert str(extra) in with_site["path"] and str(user_site) in with_site["path"]


@pytest.mark.parametrize("system_site", [False, True])
def test_site_packages_of_a_virtualenv_under_dash_s(system_site, tmp_path):
    venv = tmp_path / "venv"
    args = [sys.executable, "-m", "venv", "--without-pip", str(venv)]
    subprocess.run(args + (["--system-site-packages"] if system_site else []), check=True)
    python = str(venv / "bin" / "python")
    with_site = path_report(python)
    without_site = path_report(python, "-S")
    assert without_site == with_site
    assert without_site["prefix"] == str(venv)
    assert any(p.startswith(os.path.realpath(venv)) for p in without_site["path"])


# -- the import budget of a facts call ------------------------------------------------------------
EXPENSIVE = (
    "re",
    "json",
    "typing",
    "enum",
    "collections",
    "subprocess",
    "threading",
    "socket",
    "platform",
    "shutil",
    "glob",
    "configparser",
    "urllib.parse",
    "importlib.util",
    "ctypes",
    "traceback",
    "runpy",
)


def test_facts_on_a_host_without_gpu_imports_nothing_expensive(tmp_path):
    """Debian's python3 -S, no GPU tools: a facts call is file reads. Each module listed costs
    0.5-6 ms of CPU to import, and this is paid per host per call; a failure here names the
    module some change started importing (or the unusual file on this machine -- a mount path
    with an escaped space, a .condarc, a torch install -- that legitimately needs it)."""
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK):
        pytest.skip("no /usr/bin/python3")
    from provision.agent import nvidia

    if nvidia.find_nvidia_smi():
        pytest.skip("this machine has nvidia-smi: facts rightly starts it")
    code = f"""
        import sys
        sys.argv = ["agent", "facts"]
        sys.stdin = open({str(tmp_path / "request")!r})
        from provision.agent.protocol import main
        code = main()
        loaded = sorted(m for m in {EXPENSIVE!r} if m in sys.modules)
        sys.stderr.write("LOADED %r EXIT %d\\n" % (loaded, code))
    """
    (tmp_path / "request").write_text("{}\n")
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PROVISION_AGENT_NO_NVML": "1",
    }
    proc = run_python(python, code, "-S", env=env)
    assert "LOADED [] EXIT 0" in proc.stderr, proc.stderr[-3000:]
    (result,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert result["event"] == "result" and result["data"]["hostname"] == os.uname().nodename


def test_an_error_still_carries_its_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-S", "-m", "provision.agent", "facts"],
        input=b'{"only": ["nope"]}\n',
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=str(tmp_path),
        timeout=60,
    )
    assert proc.returncode == 1
    (event,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert event["event"] == "error" and "unknown fact key" in event["message"]
    assert "Traceback (most recent call last)" in event["traceback"]


def test_bad_request_line_is_a_protocol_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-S", "-m", "provision.agent", "ping"],
        input=b"{not json\n",
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=str(tmp_path),
        timeout=60,
    )
    (event,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 2 and event["kind"] == "protocol"
    assert event["message"].startswith("bad request line: Expecting property name")


def test_ping_reports_platform_python_version():
    import platform

    data = protocol.ping({}, None)
    assert data["python"] == platform.python_version() and data["protocol"] == 1
