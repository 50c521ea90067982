"""Pythons, conda environments, pip index and proxies, from real files in temporary dirs."""

import os
import sys

from provision.agent.facts import python_env
from provision.agent.facts._util import mask_url


def write(path, text=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_pip_index_from_files_and_environment_with_credentials_masked(tmp_path):
    root, home = tmp_path / "root", tmp_path / "home"
    write(root / "etc/pip.conf", "[global]\nindex-url = https://pypi.tuna.tsinghua.edu.cn/simple\n")
    write(
        home / ".config/pip/pip.conf",
        "[global]\nindex-url = https://mirrors.aliyun.com/pypi/simple/\ntrusted-host = mirrors.aliyun.com\n"
        "[install]\nextra-index-url =\n    https://download.pytorch.org/whl/cu121\n    https://bob:t0ken@pkgs.example.com/simple\n",
    )
    env = {"XDG_CONFIG_DIRS": "/nonexistent-xdg", "XDG_CONFIG_HOME": str(home / ".config")}
    pip = python_env.pip_config(env, str(home), str(root))
    assert pip["index_url"] == "https://mirrors.aliyun.com/pypi/simple/"  # user file beats /etc
    assert pip["index_from"] == str(home / ".config/pip/pip.conf")
    assert pip["extra_index_urls"] == [
        "https://download.pytorch.org/whl/cu121",
        "https://***@pkgs.example.com/simple",
    ]
    assert pip["trusted_hosts"] == ["mirrors.aliyun.com"]
    env["PIP_INDEX_URL"] = "https://user:secret@nexus.corp/repository/pypi/simple"
    pip = python_env.pip_config(env, str(home), str(root))
    assert (
        pip["index_url"] == "https://***@nexus.corp/repository/pypi/simple"
        and pip["index_from"] == "PIP_INDEX_URL"
    )
    assert "secret" not in repr(pip)


def test_default_index_and_broken_config(tmp_path):
    home = tmp_path / "home"
    write(home / ".pip/pip.conf", "index-url without a section\n")
    pip = python_env.pip_config({}, str(home), str(tmp_path / "root"))
    assert pip["index_url"] == "https://pypi.org/simple" and pip["index_from"] == "default"
    assert "error" in pip["config_files"][0]


def test_conda_base_envs_and_channels(tmp_path):
    home = tmp_path / "home"
    base = home / "miniconda3"
    write(base / "conda-meta/python-3.10.13-h955ad1f_0.json", "{}")
    write(base / "bin/conda", "#!/bin/sh\n")
    write(base / "envs/torch21/conda-meta/python-3.11.5-h955ad1f_0.json", "{}")
    write(base / "envs/notanenv/readme.txt")
    other = tmp_path / "elsewhere/env-x"
    write(other / "conda-meta/history")
    write(home / ".conda/environments.txt", f"{base}\n{other}\n")
    write(
        home / ".condarc",
        "channels:\n  - https://mirrors.tuna.tsinghua.edu.cn/anaconda/pkgs/main\n  - defaults\nshow_channel_urls: true\n",
    )
    env = {"CONDA_EXE": str(base / "bin/conda"), "PATH": ""}
    conda = python_env.conda(env, str(home))
    assert conda["base"] == str(base)
    assert [(e["name"], e["python"]) for e in conda["envs"]] == [
        ("base", "3.10.13"),
        ("torch21", "3.11.5"),
        ("env-x", None),
    ]
    assert conda["channels"] == [
        "https://mirrors.tuna.tsinghua.edu.cn/anaconda/pkgs/main",
        "defaults",
    ]


def test_pythons_on_path_deduplicated_by_real_file(tmp_path):
    bin_dir = tmp_path / "bin"
    real = write(bin_dir / "python3.10", "#!/bin/sh\n")
    real.chmod(0o755)
    (bin_dir / "python3").symlink_to(real)
    write(bin_dir / "python3-config", "#!/bin/sh\n").chmod(0o755)
    found = python_env.find_pythons(str(bin_dir))
    mine = [p for p in found if p["real_path"] == str(real)]
    assert len(mine) == 1 and mine[0]["version"] == "3.10"
    assert not any(p["path"].endswith("-config") for p in found)


def test_proxy_environment_and_autodl_network_turbo(tmp_path):
    root = tmp_path / "root"
    write(
        root / "etc/network_turbo",
        "export http_proxy=http://172.20.0.113:12798 && export https_proxy=http://172.20.0.113:12798\n"
        'export no_proxy="localhost,127.0.0.1"\n',
    )
    env = {"https_proxy": "http://u:p@proxy.corp:3128", "HOME": "/root"}
    proxy = python_env.proxy(env, str(root))
    assert proxy["environment"] == {"https_proxy": "http://***@proxy.corp:3128"}
    assert proxy["network_turbo"] == {
        "present": True,
        "sets": {
            "http_proxy": "http://172.20.0.113:12798",
            "https_proxy": "http://172.20.0.113:12798",
            "no_proxy": "localhost,127.0.0.1",
        },
    }
    assert python_env.proxy({}, str(tmp_path / "none"))["network_turbo"] == {"present": False}


def test_agent_interpreter_is_described():
    facts = python_env.gather(
        env={"PATH": os.path.dirname(sys.executable)}, home="/nonexistent-home"
    )
    assert facts["agent"]["executable"] == sys.executable
    assert facts["agent"]["version"].startswith("{}.{}".format(*sys.version_info[:2]))


def test_mask_url():
    assert mask_url("https://pypi.org/simple") == "https://pypi.org/simple"
    assert mask_url("http://a:b@host:8080/x?y=1") == "http://***@host:8080/x?y=1"
    assert mask_url(None) is None


def test_a_folder_on_path_twice_or_under_two_names_is_read_once(tmp_path):
    real_dir = tmp_path / "usr" / "bin"
    write(real_dir / "python3.12", "#!/bin/sh\n").chmod(0o755)
    (tmp_path / "bin").symlink_to(real_dir)  # merged /usr: /bin -> /usr/bin
    path = os.pathsep.join([str(tmp_path / "bin"), str(real_dir), str(real_dir)])
    found = [p for p in python_env.find_pythons(path) if p["real_path"].startswith(str(tmp_path))]
    assert found == [
        {"path": str(tmp_path / "bin" / "python3.12"), "real_path": str(real_dir / "python3.12"),
         "version": "3.12"}
    ]  # fmt: skip


def test_python_names_and_versions_as_the_regular_expressions_read_them():
    import re

    name_pattern, version_pattern = (
        re.compile(r"^python3(\.\d+)?$"),
        re.compile(r"python(\d+\.\d+)"),
    )
    names = [
        "python3", "python3.8", "python3.13", "python3.11m", "python3-config", "python3.11-config",
        "python3.", "python3.x", "python2.7", "python", "ipython3", "python3.10.bak", "xpython3",
        "pypy3.9", "python3.12-dbg", "libpython3.11.so", "python-3.10",
    ]  # fmt: skip
    for name in names:
        assert python_env._is_python3_name(name) == bool(name_pattern.match(name)), name
        match = version_pattern.search(name)
        assert python_env._version_in_name(name) == (match.group(1) if match else None), name


INI_SAMPLES = [
    "[global]\nindex-url = https://pypi.tuna.tsinghua.edu.cn/simple\ntrusted-host=a b\n",
    "# comment\n; other comment\n\n[global]\nIndex-URL: https://x/simple # not a comment\n",
    "[global]\nindex-url = a\n[install]\nindex-url = b\n[global]\nindex-url = c\n",
    "[global]\nkey = a=b:c\nother:x=y\n  \n",
    "[global]\nextra-index-url =\n    https://a/simple\n    https://b/simple\n",  # continuation
    "[DEFAULT]\nindex-url = d\n[global]\ntimeout = 5\n",  # DEFAULT values reach every section
    "[global] # trailing\nindex-url = x\n",
    "index-url without a section\n",
    "[global]\nno delimiter here\n",
    "[global]\n= value without a key\n",
    "   [global]\nindex-url = indented header\n",
    "",
]


def test_pip_conf_reads_as_configparser_reads_it():
    import configparser

    for text in INI_SAMPLES:
        parser = configparser.RawConfigParser(strict=False)
        try:
            parser.read_string(text)
            expected = {s: dict(parser.items(s)) for s in parser.sections()}
        except configparser.Error as exc:
            expected = ("error", str(exc).splitlines()[0])
        try:
            got = python_env.read_ini(text)
        except ValueError as exc:
            got = ("error", str(exc).splitlines()[0])
        assert got == expected, text


def test_condarc_channels_without_regular_expressions():
    text = (
        "channels:\n  - conda-forge\n  - 'https://u:p@mirror/conda'\n"
        "default_channels :  \n  - defaults\n"
        "channels: [inline]\n  - not-a-list-entry\n"
        " channels:\n  - indented-key\n"
    )
    assert python_env.condarc_channels(text) == [
        "conda-forge",
        "https://u:p@mirror/conda",
        "defaults",
    ]
