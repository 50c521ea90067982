"""YAML loading that remembers where every mapping key, value and list item came from, so that
validation errors say file:line:col like a compiler does."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from provision.errors import ConfigError
from provision.taint import as_data

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # C parser when available: same positions


@dataclass(frozen=True)
class Pos:
    file: str
    line: int  # 1-based
    col: int  # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def display_path(path: str | os.PathLike[str]) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    p = Path(path)
    try:
        rel = os.path.relpath(p)
    except ValueError:
        return str(p)
    return rel if not rel.startswith("..") else str(p)


class YMap(dict):
    """A dict that knows the position of itself, each key and each value."""

    pos: Pos
    key_pos: dict[Any, Pos]
    value_pos: dict[Any, Pos]

    def where(self, key: Any = None, value: bool = False) -> Pos:
        if key is None:
            return self.pos
        table = self.value_pos if value else self.key_pos
        return table.get(key, self.pos)


class YList(list):
    pos: Pos
    item_pos: list[Pos]

    def where(self, index: int | None = None) -> Pos:
        if index is None or index >= len(self.item_pos):
            return self.pos
        return self.item_pos[index]


def _pos(loader: Any, node: yaml.Node) -> Pos:
    mark = node.start_mark
    return Pos(loader.display_name, mark.line + 1, mark.column + 1)


class _Loader(_Base):  # type: ignore[misc, valid-type]
    display_name = "<string>"


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> YMap:
    loader.flatten_mapping(node)  # YAML merge keys (<<: *anchor)
    data = YMap()
    data.pos = _pos(loader, node)
    data.key_pos = {}
    data.value_pos = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise ConfigError(
                f"{_pos(loader, key_node)}: a mapping key must be a plain value"
            ) from None
        if key in data:
            raise ConfigError(
                f"{_pos(loader, key_node)}: duplicate key {key!r} (first at {data.key_pos[key]}); "
                "remove one of them"
            )
        data[key] = loader.construct_object(value_node, deep=True)
        data.key_pos[key] = _pos(loader, key_node)
        data.value_pos[key] = _pos(loader, value_node)
    return data


def _construct_list(loader: _Loader, node: yaml.SequenceNode) -> YList:
    data = YList(loader.construct_object(child, deep=True) for child in node.value)
    data.pos = _pos(loader, node)
    data.item_pos = [_pos(loader, child) for child in node.value]
    return data


def _construct_unsafe(loader: _Loader, node: yaml.Node) -> Any:
    """Ansible's `!unsafe`: the value is data, never rendered as a template."""
    if isinstance(node, yaml.ScalarNode):
        return as_data(loader.construct_scalar(node))
    if isinstance(node, yaml.SequenceNode):
        return as_data(list(_construct_list(loader, node)))
    return as_data(dict(_construct_map(loader, node)))


_Loader.add_constructor("!unsafe", _construct_unsafe)
_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_Loader.add_constructor("tag:yaml.org,2002:seq", _construct_list)
_Loader.add_constructor("tag:yaml.org,2002:omap", _construct_map)


def load_yaml(path: str | os.PathLike[str], text: str | None = None) -> Any:
    """Parse one YAML file; syntax errors become ConfigError with file:line:col."""
    name = display_path(path)
    if text is None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{name}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{name}: cannot read: {exc}") from None
    return loads(text, name)


def loads(text: str, name: str = "<string>") -> Any:
    loader = _Loader(text)
    loader.display_name = name
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        problem = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        raise ConfigError(f"{where}: YAML syntax error: {problem}{context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name}: YAML error: {exc}") from None
    finally:
        loader.dispose()
