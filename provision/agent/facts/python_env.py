"""Pythons on the host, conda and its environments, the pip index in effect, and proxies.

Everything here reads files; nothing runs `conda` (which takes a second or more to start), so
conda environments come from `<base>/envs`, `~/.conda/envs` and `~/.conda/environments.txt`,
the same places `conda info --envs` reads. Credentials in index and proxy URLs are masked.
"""

from __future__ import annotations

import os
import sys

from provision.agent.facts._util import list_dir, mask_url, read_text, which

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

CONDA_BASE_GUESSES = (
    "~/miniconda3",
    "~/anaconda3",
    "~/miniforge3",
    "~/mambaforge",
    "/opt/conda",
    "/opt/miniconda3",
    "/opt/anaconda3",
    "/usr/local/miniconda3",
    "/usr/local/anaconda3",
    "/root/miniconda3",
)
PROXY_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
)
_IMPLEMENTATIONS = {"cpython": "CPython", "pypy": "PyPy", "ironpython": "IronPython"}


def gather(
    env: Optional[Dict[str, str]] = None, home: Optional[str] = None, root: str = "/"
) -> Dict[str, Any]:
    env = dict(os.environ) if env is None else env
    home = home or os.path.expanduser("~")
    return {
        "agent": {
            "executable": sys.executable,
            # what platform.python_version() / python_implementation() say, without platform
            "version": sys.version.split()[0],
            "implementation": _IMPLEMENTATIONS.get(
                sys.implementation.name, sys.implementation.name
            ),
            "prefix": sys.prefix,
            "virtualenv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
            "conda": os.path.isdir(os.path.join(sys.prefix, "conda-meta")),
        },
        "system_pythons": find_pythons(env.get("PATH", "")),
        "conda": conda(env, home),
        "pip": pip_config(env, home, root),
        "proxy": proxy(env, root),
    }


def find_pythons(path_variable: str) -> List[Dict[str, Any]]:
    """python3 and python3.X executables on PATH (plus /usr/bin, /usr/local/bin), one per real
    file; the version comes from the file name (python3 -> python3.10), so nothing is run.
    A folder listed twice, or twice under two names (/bin -> /usr/bin), is read once."""
    seen = set()
    seen_dirs = set()
    found = []
    directories = [d for d in path_variable.split(os.pathsep) if d] + ["/usr/local/bin", "/usr/bin"]
    for directory in directories:
        real_dir = os.path.realpath(directory)
        if real_dir in seen_dirs:
            continue
        seen_dirs.add(real_dir)
        try:
            names = sorted(n for n in os.listdir(directory) if _is_python3_name(n))
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            real = os.path.realpath(path)
            if real in seen or not os.access(real, os.X_OK) or os.path.isdir(real):
                continue
            seen.add(real)
            version = _version_in_name(os.path.basename(real)) or _version_in_name(name)
            found.append({"path": path, "real_path": real, "version": version})
    return found


def _is_python3_name(name: str) -> bool:
    """python3 or python3.N (not python3-config, python3.11m, python3.11.bak)."""
    if not name.startswith("python3"):
        return False
    rest = name[len("python3") :]
    return rest == "" or (rest[:1] == "." and rest[1:].isdigit() and rest[1:].isascii())


def _version_in_name(name: str) -> Optional[str]:
    """The first `pythonX.Y` in a file name -> "X.Y" (python3.10 -> "3.10", python3 -> None)."""
    start = name.find("python")
    while start >= 0:
        major, dot, rest = name[start + len("python") :].partition(".")
        minor = ""
        for char in rest:
            if not ("0" <= char <= "9"):
                break
            minor += char
        if major.isdigit() and major.isascii() and dot and minor:
            return "%s.%s" % (major, minor)
        start = name.find("python", start + 1)
    return None


def conda(env: Dict[str, str], home: str) -> Dict[str, Any]:
    """Every conda prefix found (the first is `base`), each env with its Python and torch.

    Rental images ship torch in a conda env (AutoDL: /root/miniconda3), so the torch of each env
    is read from its dist-info metadata (no import: a CUDA torch takes seconds to load)."""
    prefixes = conda_prefixes(env, home)
    base = prefixes[0] if prefixes else None
    active = env.get("CONDA_PREFIX")
    envs = conda_envs(base, home, extra=prefixes[1:] + ([active] if active else []))
    for entry in envs:
        entry["active"] = bool(active) and os.path.realpath(entry["path"]) == os.path.realpath(active)
        executable = os.path.join(entry["path"], "bin", "python")
        entry["executable"] = executable if os.access(executable, os.X_OK) else None
        entry["torch"] = dist_version(site_packages(entry["path"]), "torch")
    channels = []
    for rc in (os.path.join(home, ".condarc"), os.path.join(base, ".condarc") if base else None):
        if rc:
            channels.extend(c for c in condarc_channels(read_text(rc) or "") if c not in channels)
    return {
        "base": base,
        "prefixes": prefixes,
        "active_env": active,
        "envs": envs,
        "channels": [mask_url(c) for c in channels],
    }


def conda_base(env: Dict[str, str], home: str) -> Optional[str]:
    found = conda_prefixes(env, home)
    return found[0] if found else None


def conda_prefixes(env: Dict[str, str], home: str) -> List[str]:
    """conda installations (a `conda-meta/` folder beside `envs/` or `bin/conda`): the one
    CONDA_EXE / PATH names first, then the usual places, each real folder once."""
    candidates = []
    if env.get("CONDA_EXE"):  # set by `conda init` shells: <base>/bin/conda
        candidates.append(os.path.dirname(os.path.dirname(env["CONDA_EXE"])))
    found = which("conda", path=env.get("PATH"))
    if found:
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(found))))
    candidates.extend(guess.replace("~", home, 1) for guess in CONDA_BASE_GUESSES)
    found: List[str] = []
    seen = set()
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if real in seen:
            continue
        if os.path.isdir(os.path.join(candidate, "conda-meta")) and (
            os.path.isdir(os.path.join(candidate, "envs"))
            or os.path.exists(os.path.join(candidate, "bin", "conda"))
        ):
            seen.add(real)
            found.append(candidate)
    return found


def conda_envs(
    base: Optional[str], home: str, extra: Optional[List[str]] = None
) -> List[Dict[str, Any]]:
    paths: List[str] = []
    for prefix in ([base] if base else []) + list(extra or []):
        paths.append(prefix)
        paths.extend(list_dir(os.path.join(prefix, "envs")))
    paths.extend(list_dir(os.path.join(home, ".conda", "envs")))
    listed = read_text(os.path.join(home, ".conda", "environments.txt")) or ""
    paths.extend(line.strip() for line in listed.splitlines() if line.strip())
    result = []
    seen = set()
    for path in paths:
        real = os.path.realpath(path)
        if real in seen or not os.path.isdir(os.path.join(path, "conda-meta")):
            continue
        seen.add(real)
        result.append(
            {
                "name": "base" if path == base else os.path.basename(path.rstrip("/")),
                "path": path,
                "python": conda_python_version(path),
            }
        )
    return result


def site_packages(prefix: str) -> List[str]:
    """<prefix>/lib/pythonX.Y/site-packages, plus the folders its .pth files add (a path line,
    not an `import` line): where `import torch` would look, without starting that Python."""
    found: List[str] = []
    for lib in list_dir(os.path.join(prefix, "lib"), "python3"):
        sp = os.path.join(lib, "site-packages")
        if not os.path.isdir(sp):
            continue
        found.append(sp)
        for pth in list_dir(sp, "", ".pth"):
            for line in (read_text(pth) or "").splitlines():
                line = line.strip()
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                folder = os.path.normpath(os.path.join(sp, line))
                if os.path.isdir(folder) and folder not in found:
                    found.append(folder)
    return found


def dist_version(folders: List[str], project: str) -> Optional[Dict[str, str]]:
    """{"version", "location"} of an installed distribution, from its dist-info METADATA."""
    prefix = project.lower().replace("-", "_") + "-"
    for folder in folders:
        for info in list_dir(folder, "", ".dist-info"):
            name = os.path.basename(info)
            if not name.lower().startswith(prefix):
                continue
            for line in (read_text(os.path.join(info, "METADATA")) or "").splitlines():
                if line.startswith("Version:"):
                    return {"version": line.split(":", 1)[1].strip(), "location": folder}
                if not line.strip():
                    break
    return None


def conda_python_version(prefix: str) -> Optional[str]:
    # conda records each installed package as conda-meta/<name>-<version>-<build>.json
    import re

    for meta in list_dir(os.path.join(prefix, "conda-meta"), "python-3", ".json"):
        match = re.match(r"python-(\d+\.\d+\.\d+)", os.path.basename(meta))
        if match:
            return match.group(1)
    return None


def condarc_channels(text: str) -> List[str]:
    """Entries of `channels:` and `default_channels:` lists in a .condarc (a YAML subset)."""
    channels = []
    in_list = False
    for line in text.splitlines():
        stripped = line.strip()
        key, colon, rest = line.partition(":")
        if colon and key.rstrip() in ("channels", "default_channels") and not rest.strip():
            in_list = True
            continue
        if in_list and stripped.startswith("- "):
            channels.append(stripped[2:].strip().strip("\"'"))
            continue
        if stripped and not line.startswith((" ", "\t", "-")):
            in_list = False
    return channels


def pip_config_files(env: Dict[str, str], home: str, root: str = "/") -> List[str]:
    """pip's configuration files in the order pip reads them (later ones win)."""
    files = [os.path.join(root, "etc/pip.conf")]
    for directory in (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":"):
        files.append(os.path.join(root, directory.lstrip("/"), "pip/pip.conf"))
    files.append(os.path.join(home, ".pip/pip.conf"))
    files.append(
        os.path.join(env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "pip/pip.conf")
    )
    files.append(os.path.join(sys.prefix, "pip.conf"))
    if env.get("PIP_CONFIG_FILE") and env["PIP_CONFIG_FILE"] != os.devnull:
        files.append(env["PIP_CONFIG_FILE"])
    return files


def pip_config(env: Dict[str, str], home: str, root: str = "/") -> Dict[str, Any]:
    index = None
    index_from = "default"
    extra: List[str] = []
    trusted: List[str] = []
    read = []
    for path in pip_config_files(env, home, root):
        text = read_text(path)
        if text is None:
            continue
        try:
            sections = read_ini(text, path)
        except ValueError as exc:
            read.append({"path": path, "error": str(exc).splitlines()[0]})
            continue
        read.append({"path": path})
        for section in ("global", "install"):
            options = sections.get(section)
            if options is None:
                continue
            for key in ("index-url", "index_url"):
                if key in options:
                    index, index_from = options[key].strip(), path
            for key in ("extra-index-url", "extra_index_url"):
                if key in options:
                    extra = options[key].split()
            for key in ("trusted-host", "trusted_host"):
                if key in options:
                    trusted = options[key].split()
    if env.get("PIP_INDEX_URL"):
        index, index_from = env["PIP_INDEX_URL"], "PIP_INDEX_URL"
    if env.get("PIP_EXTRA_INDEX_URL"):
        extra = env["PIP_EXTRA_INDEX_URL"].split()
    if env.get("PIP_TRUSTED_HOST"):
        trusted = env["PIP_TRUSTED_HOST"].split()
    return {
        "index_url": mask_url(index) or "https://pypi.org/simple",
        "index_from": index_from,
        "extra_index_urls": [mask_url(u) for u in extra],
        "trusted_hosts": trusted,
        "config_files": read,
    }


def read_ini(text: str, source: str = "<string>") -> Dict[str, Dict[str, str]]:
    """section -> {option (lower case): value}, as pip's RawConfigParser(strict=False) reads the
    file; ValueError (configparser.Error) when it cannot. A plain file -- `[section]` lines,
    unindented `key = value` lines, comments -- is read here; any other (continuation lines,
    a DEFAULT section, odd headers) goes to configparser, which costs ~5 ms to import."""
    sections = _plain_ini(text)
    if sections is not None:
        return sections
    import configparser

    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(text, source=source)
    except configparser.Error as exc:
        raise ValueError(str(exc)) from exc
    return {name: dict(parser.items(name)) for name in parser.sections()}


def _plain_ini(text: str) -> Optional[Dict[str, Dict[str, str]]]:
    """What configparser reads from a file in the plain subset, else None."""
    sections: Dict[str, Dict[str, str]] = {}
    current: Optional[Dict[str, str]] = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if line[0] in " \t":  # a continuation line, or one configparser may take for one
            return None
        if stripped[0] == "[":
            name = stripped[1:-1]
            if stripped[-1] != "]" or not name or "]" in name or name == "DEFAULT":
                return None
            current = sections.setdefault(name, {})
            continue
        if current is None:  # an option before any section: configparser's error to give
            return None
        cuts = [i for i in (stripped.find("="), stripped.find(":")) if i >= 0]
        key = stripped[: min(cuts)].strip().lower() if cuts else ""
        if not key:
            return None
        current[key] = stripped[min(cuts) + 1 :].strip()
    return sections


def proxy(env: Dict[str, str], root: str = "/") -> Dict[str, Any]:
    """Proxy variables in this environment, and what AutoDL's /etc/network_turbo would set
    (it is sourced by hand, `source /etc/network_turbo`, so a fresh SSH shell lacks it)."""
    current = {name: mask_url(env[name]) for name in PROXY_VARIABLES if env.get(name)}
    turbo_path = os.path.join(root, "etc/network_turbo")
    turbo_text = read_text(turbo_path)
    turbo: Dict[str, Any] = {"present": turbo_text is not None}
    if turbo_text is not None:
        import re

        assignment = re.compile(r"\b(%s)=([^\s;&]+)" % "|".join(PROXY_VARIABLES))
        turbo["sets"] = {
            name: mask_url(value.strip("\"'")) for name, value in assignment.findall(turbo_text)
        }
    return {"environment": current, "network_turbo": turbo}
