"""`provision.yml`: a project's environment, written once and picked up by `install` and `up`.

    python: "3.11"              # a version (python3.11 on the host) or an interpreter path
    torch: "2.5"                # a spec: 2.5 | 2.5.1 | ">=2.4,<2.6" | latest
    variant: cu124              # optional: force a build (otherwise the resolver picks)
    with: [torchvision]         # companions at the matching versions
    packages: [numpy, "transformers==4.44.2"]
    requirements: requirements.txt   # relative to this file
    mirror: tuna                # or index_url / extra_index_urls / find_links
    env: ~/.provision/envs/myproject
    locked: provision.lock      # install exactly this lock (relative to this file)
    datasets:                   # read by `stage`/`up`; kept as written
      - {name: imagenet-mini, source: ./data/imagenet-mini}

Found in the current directory or the nearest parent that has one. Command-line options win over
the file. Every error names the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from provision.errors import ConfigError
from provision.install.mirrors import PRESETS

PROJECT_FILE = "provision.yml"
_COMPANIONS = ("torchvision", "torchaudio")
_KEYS = {
    "python": 'a Python version like "3.11" or an interpreter path',
    "torch": 'a torch spec like "2.5", "2.5.1", ">=2.4,<2.6" or latest',
    "variant": "a build tag like cu124 or cpu",
    "with": "a list of companions: torchvision, torchaudio",
    "packages": "a list of pip requirement strings",
    "requirements": "a requirements file path (relative to provision.yml)",
    "mirror": "a mirror preset: " + ", ".join(PRESETS),
    "index_url": "an index URL",
    "extra_index_urls": "a list of index URLs",
    "find_links": "a list of find-links URLs or host paths",
    "env": "the managed environment's path on the host",
    "locked": "a lock file path (relative to provision.yml)",
    "datasets": "a list of datasets for `provision stage`/`up`",
}


@dataclass
class Project:
    path: Path
    python: str | None = None
    torch: str | None = None
    variant: str | None = None
    with_: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    requirements: Path | None = None
    mirror: str | None = None
    index_url: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    env: str | None = None
    locked: Path | None = None
    datasets: list[Any] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)  # key -> line, for later messages

    def where(self, key: str) -> str:
        return f"{self.path}:{self.lines.get(key, 1)}"


def find_project(start: Path | None = None) -> Path | None:
    """provision.yml in `start` (default: the current directory) or its nearest parent."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        candidate = d / PROJECT_FILE
        if candidate.is_file():
            return candidate
    return None


def load_project(path: str | Path) -> Project:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            f"{path}:{mark.line + 1 if mark else 1}: not valid YAML: {getattr(exc, 'problem', exc)}"
        ) from None
    project = Project(path=path)
    if root is None:
        return project
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError(
            f"{path}:{root.start_mark.line + 1}: provision.yml is a mapping of keys ({', '.join(_KEYS)})"
        )
    loader_data = yaml.safe_load(text) or {}
    base = path.parent
    for key_node, _value_node in root.value:
        key = key_node.value
        line = key_node.start_mark.line + 1
        where = f"{path}:{line}"
        if key not in _KEYS:
            import difflib

            close = difflib.get_close_matches(str(key), list(_KEYS), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{where}: unknown key '{key}'{hint}; known: {', '.join(_KEYS)}")
        project.lines[key] = line
        value = loader_data.get(key)
        if value is None:
            continue

        def need(
            kind: type | tuple, value: Any = value, key: str = key, where: str = where
        ) -> None:
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ConfigError(f"{where}: '{key}' must be {_KEYS[key]}, got {value!r}")

        if key in ("with", "packages", "extra_index_urls", "find_links"):
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            need(list, value)
            for item in value:
                if not isinstance(item, str) or not item.strip():
                    raise ConfigError(
                        f"{where}: '{key}' must be {_KEYS[key]}; {item!r} is not a string"
                    )
            if key == "with":
                bad = [v for v in value if v not in _COMPANIONS]
                if bad:
                    raise ConfigError(
                        f"{where}: 'with' takes {', '.join(_COMPANIONS)}; got {', '.join(bad)}"
                    )
                project.with_ = list(value)
            else:
                setattr(project, key, list(value))
        elif key == "datasets":
            need(list)
            project.datasets = list(value)
        elif key in ("python", "torch"):
            need((str, int, float))
            setattr(project, key, str(value))
        elif key in ("requirements", "locked"):
            need(str)
            p = Path(value).expanduser()
            p = p if p.is_absolute() else base / p
            if not p.is_file():
                raise ConfigError(f"{where}: '{key}': {p} does not exist")
            setattr(project, key, p)
        elif key == "mirror":
            need(str)
            if value not in PRESETS:
                raise ConfigError(
                    f"{where}: unknown mirror '{value}'; presets: {', '.join(PRESETS)}"
                )
            project.mirror = value
        else:
            need(str)
            setattr(project, key, value)
    if project.mirror and project.index_url:
        raise ConfigError(
            f"{project.where('index_url')}: give either 'mirror' or 'index_url', not both"
        )
    if project.python and isinstance(loader_data.get("python"), float):
        # YAML reads 3.10 as the float 3.1: refuse rather than build the wrong env
        raise ConfigError(
            f'{project.where("python")}: quote the Python version (python: "{loader_data["python"]}"), '
            "YAML reads an unquoted 3.10 as 3.1"
        )
    return project


def python_for(project_python: str) -> str:
    """`3.11` -> `python3.11`; a path stays a path."""
    text = project_python.strip()
    if text.replace(".", "").isdigit():
        return f"python{text}"
    return text
