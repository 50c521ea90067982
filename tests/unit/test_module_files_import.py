"""Every module file imports on its own: the registry skips a broken file (so one bad module
can't take the others down), which would otherwise hide it as "unknown module"."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import provision.modules as modules_pkg

NAMES = sorted(info.name for info in pkgutil.iter_modules(modules_pkg.__path__))


def test_the_modules_folder_has_module_files() -> None:
    assert {"base", "command", "files", "file_state", "text", "net"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_module_file_imports(name: str) -> None:
    importlib.import_module(f"provision.modules.{name}")


def test_every_registered_module_name_resolves() -> None:
    from provision.modules.base import get_module, module_names

    names = module_names()
    assert {"copy", "file", "stat", "lineinfile", "get_url", "template", "blockinfile"} <= set(names)
    for name in names:
        assert get_module(name) is not None
