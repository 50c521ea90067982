"""Lookups as ansible-core's plugins give them (plugins/lookup/*.py): each case's value is
Ansible's, and where ansible-core is installed each case is also run through Ansible's own
plugin to show the recorded value is its."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from provision.engine.templating import Templar, TemplateError

T = Templar()

CSV = "Smith,Jane,js@x\nGerman von Lastname,Demo,d@x\n\"\"\"The Rock\"\" Johnson\",Dwayne,r@x\n"
TSV = "fruit\tbananas\nelectronics\ttvs\n"
INI = (
    "[global]\nvalue1 = g1\n\n[section1]\nvalue1 = s1\nvalue2 = s2\nother = o\n"
    "[interp]\nhome = /Users\nmy_dir = %(home)s/lumberjack\n"
)


def _ansible(name: str, terms: list[Any], basedir: Path, variables: dict[str, Any], **kw: Any) -> Any:
    pytest.importorskip("ansible", reason="ansible-core is not installed")
    from ansible._internal._templating._jinja_plugins import _LookupContext
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import lookup_loader

    loader = DataLoader()
    loader.set_basedir(str(basedir))
    with _LookupContext(invoked_as_with=False):
        return lookup_loader.get(name, loader=loader).run(terms, variables=variables, **kw)


@pytest.fixture
def play_dir(tmp_path: Path) -> Path:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "people.csv").write_text(CSV)
    (tmp_path / "files" / "tabs.csv").write_text(TSV)
    (tmp_path / "files" / "conf.ini").write_text(INI)
    (tmp_path / "files" / "app.properties").write_text("value.dot = dotted\nname = x\n")
    (tmp_path / "vars").mkdir()
    (tmp_path / "vars" / "linux.yml").write_text("a: 1\n")
    return tmp_path


# (lookup, terms, keyword arguments, Ansible's values)
CASES: list[tuple[str, list[Any], dict[str, Any], list[Any]]] = [
    ("sequence", ["start=0 end=3"], {}, ["0", "1", "2", "3"]),
    ("sequence", ["2-6/2"], {}, ["2", "4", "6"]),
    ("sequence", ["7-8:host%02d"], {}, ["host07", "host08"]),
    ("sequence", [], {"count": 5, "start": 10}, ["10", "11", "12", "13", "14"]),
    ("sequence", ["count=5 start=0"], {"stride": -1}, ["0", "-1", "-2", "-3", "-4", "-5", "-6"]),
    ("sequence", ["count=5 start=0", "count=5"], {"start": 20},
     ["0", "1", "2", "3", "4", "20", "21", "22", "23", "24"]),
    ("sequence", ["count=5 start=0"], {"stride": 0}, []),
    ("sequence", ["count=0"], {}, []),
    ("sequence", [], {}, []),
    ("together", [["a", "b"], [1]], {}, [["a", 1], ["b", None]]),
    ("subelements", [[{"id": "x", "l": [1, 2]}], "l"], {}, [[{"id": "x"}, 1], [{"id": "x"}, 2]]),
    ("subelements", [[{"id": "x", "t": {"k": [3]}}, {"id": "y"}], "t.k", {"skip_missing": True}], {},
     [[{"id": "x", "t": {}}, 3]]),
    ("csvfile", ["Smith"], {"file": "people.csv", "delimiter": ",", "col": 1}, ["Jane"]),
    ("csvfile", ["Jane"], {"file": "people.csv", "delimiter": ",", "col": 0, "keycol": 1}, ["Smith"]),
    ("csvfile", ["German von Lastname file=people.csv delimiter=, col=1"], {}, ["Demo"]),
    ("csvfile", ['"The Rock" Johnson file=people.csv delimiter=, col=1'], {}, ["Dwayne"]),
    ("csvfile", ["electronics", "fruit"], {"file": "tabs.csv"}, ["tvs", "bananas"]),
    ("csvfile", ["fruit file=tabs.csv delimiter=TAB"], {}, ["bananas"]),
    ("csvfile", ["nope file=people.csv delimiter=,"], {}, []),
    ("csvfile", ["nope file=people.csv delimiter=, default=what?"], {}, ["what?"]),
    ("csvfile", ["nope"], {"file": "people.csv", "delimiter": ",", "default": ["a", "b"]}, ["a", "b"]),
    ("ini", ["value1"], {"file": "conf.ini", "section": "section1"}, ["s1"]),
    ("ini", ["value1"], {"file": "conf.ini"}, ["g1"]),
    ("ini", ["value[1-2] section=section1 file=conf.ini re=true"], {}, ["s1", "s2"]),
    ("ini", ["unknown default=dflt section=section1 file=conf.ini"], {}, ["dflt"]),
    ("ini", ["my_dir"], {"file": "conf.ini", "section": "interp"}, ["/Users/lumberjack"]),
    ("ini", ["my_dir"], {"file": "conf.ini", "section": "interp", "interpolation": False},
     ["%(home)s/lumberjack"]),
    ("ini", ["value.dot"], {"file": "app.properties", "type": "properties"}, ["dotted"]),
    ("first_found", [{"files": ["nope.yml", "linux.yml"], "paths": ["vars"]}], {}, ["vars/linux.yml"]),
    ("first_found", ["nope.yml", "vars/linux.yml"], {}, ["vars/linux.yml"]),
    ("first_found", ["linux.yml"], {"skip": True}, []),  # lookup() searches no vars/ subfolder
    ("first_found", ["a.yml,vars/linux.yml"], {}, ["vars/linux.yml"]),
]  # fmt: skip


def _ids(case: tuple[str, list[Any], dict[str, Any], list[Any]]) -> str:
    return f"{case[0]}-{case[1]!r}-{case[2]!r}"[:80]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_lookup_values_as_ansibles(case: tuple[str, list[Any], dict[str, Any], list[Any]],
                                   play_dir: Path) -> None:
    name, terms, kwargs, expected = case
    variables = {"__terms": terms, "__kw": kwargs, "playbook_dir": str(play_dir)}
    ours = T.render("{{ query('" + name + "', *__terms, **__kw) }}", variables)
    if name == "first_found":
        ours = [str(Path(p).relative_to(play_dir)) for p in ours]
    assert ours == expected


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_the_recorded_values_are_ansibles(
    case: tuple[str, list[Any], dict[str, Any], list[Any]], play_dir: Path
) -> None:
    name, terms, kwargs, expected = case
    theirs = _ansible(name, list(terms), play_dir, {"playbook_dir": str(play_dir)}, **kwargs)
    theirs = [list(t) if isinstance(t, tuple) else t for t in theirs]
    if name == "first_found":
        theirs = [str(Path(p).relative_to(play_dir)) for p in theirs]
    assert theirs == expected


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("query('sequence', 'start=0 junk=3')", "unrecognized arguments to with_sequence"),
        ("query('sequence', 'start=A end=3')", "has an invalid value"),
        ("query('sequence', '1-4/C')", "has an invalid value"),
        ("query('sequence', 'start=1')", "must specify count or end in with_sequence"),
        ("query('sequence', 'start=1 end=4 count=2')", "can't specify both count and end"),
        ("query('sequence', 'start=4 end=1 stride=2')", "to count backwards make stride negative"),
        ("query('sequence', 'start=1 end=4 stride=-2')", "to count forward don't make stride"),
        ("query('sequence', 'start=1 end=4 format=d')", "bad formatting string: d"),
        ("query('together')", "with_together requires at least one element in each list"),
        ("query('varnames', True)", "Invalid setting identifier"),
        ("query('varnames', '*')", "Unable to use .* nothing to repeat"),
        ("lookup('vars', 42)", "Variable name must be 'str' not 'int'"),
        ("lookup('vars', 'doesnotexist') ~ ''", "No variable named 'doesnotexist' was found"),
        ("lookup('csvfile', 'file=people.csv, delimiter=, col=1')", "Search key is required"),
        ("lookup('csvfile', file='people.csv', col=1)", "Search key is required"),
        ("lookup('csvfile', 'x file=people.csv thisarg=y')", "'thisarg' is not a valid option"),
        ("lookup('csvfile', 'x file=people.csv col=2,')", "has an invalid value"),
        ("lookup('csvfile', 'x', file='doesnotexist')", "No such file or directory"),
        ("lookup('ini', 'x', file='conf.ini', section='missing')", "No section 'missing'"),
        ("lookup('ini', 'file=conf.ini', 'value1')", "No key to look up was provided"),
        ("lookup('ini', 'invalid=option')", "'invalid' is not a valid option"),
        ("lookup('first_found', 'nope.yml')", "No file was found when using first_found"),
    ],
)
def test_lookup_errors_as_ansibles(expr: str, message: str, play_dir: Path) -> None:
    with pytest.raises(TemplateError, match=message):
        T.render("{{ " + expr + " }}", {"playbook_dir": str(play_dir)})


def test_ini_duplicate_keys_and_case(tmp_path: Path) -> None:
    (tmp_path / "d.ini").write_text("[r]\nname = bob\nNAME = marley\n")
    variables = {"playbook_dir": str(tmp_path)}
    with pytest.raises(TemplateError, match="Duplicate option in 'd.ini'"):
        T.render("{{ lookup('ini', 'name', file='d.ini', section='r') }}", variables)
    assert T.render(
        "{{ lookup('ini', 'NAME', file='d.ini', section='r', case_sensitive=True) }}", variables
    ) == "marley"


def test_lookup_and_query_shapes_and_errors_option(play_dir: Path) -> None:
    variables = {"playbook_dir": str(play_dir), "x": None, "qz_1": 1, "qz_2": 2, "qa_1": 3}
    assert T.render("{{ lookup('sequence', 'count=2') }}", variables) == "1,2"
    assert T.render("{{ lookup('vars', name='test') }}", variables) == []  # no terms: none
    assert T.render("{{ lookup('vars', 'x') }}", variables) is None  # a null variable is one
    assert T.render("{{ lookup('vars', 'nope', default='d') }}", variables) == "d"
    assert T.render("{{ lookup('first_found', 'nope', errors='ignore') }}", variables) is None
    assert T.render("{{ query('first_found', 'nope', errors='warn') }}", variables) == []
    assert T.render("{{ query('list', [1, 2], 3) }}", variables) == [[1, 2], 3]  # as given
    assert T.render("{{ query('varnames', '^q.*_\\d') | sort }}", variables) == [
        "qa_1", "qz_1", "qz_2",
    ]  # fmt: skip


def test_inventory_hostnames_patterns() -> None:
    groups = {
        "all": ["n1", "t1", "t3", "t4", "t9"],
        "ungrouped": ["n1"],
        "g1": ["t1", "t3", "t4"],
        "g2": ["t3", "t4", "t9"],
    }
    variables = {"groups": groups}

    def names(pattern: str) -> Any:
        return T.render("{{ query('inventory_hostnames', '" + pattern + "') }}", variables)

    assert names("g1") == ["t1", "t3", "t4"]
    assert names("g1:!t3") == ["t1", "t4"]
    assert names("g1:&g2") == ["t3", "t4"]
    assert names("all") == groups["all"]
    assert names("t?") == ["t1", "t3", "t4", "t9"]
    assert names("doesnotexist") == []


def test_template_lookup_as_ansibles(tmp_path: Path) -> None:
    """Includes found beside the template and in the search path's templates/, an include's
    last newline dropped and the file's own kept, one value native, nothing at all None, the
    delimiters and trim_blocks as options, ansible_managed and template_vars defined."""
    (tmp_path / "templates").mkdir()
    files = {
        "hello.txt": "Hello {% include 'world.txt' %}!\n",
        "world.txt": "world\n",
        "five.j2": "{{ 5 }}\n",
        "dict.j2": "{\"foo\": \"{{ 'bar' }}\"}\n",
        "none.j2": "{# nothing #}",
        "delims.txt": "[# c #]Hello [% who %]!",
        "tb.j2": "{% if True %}\nHello\n{% endif %}\nBye\n",
        "managed.j2": "{{ ansible_managed }} {{ extra }}",
    }
    for name, text in files.items():
        (tmp_path / "templates" / name).write_text(text)
    variables = {"playbook_dir": str(tmp_path), "ansible_search_path": [str(tmp_path)], "who": "w"}

    def render(expr: str) -> Any:
        return T.render("{{ " + expr + " }}", variables)

    assert render("lookup('template', 'hello.txt')") == "Hello world!\n"
    assert render("lookup('template', 'five.j2')") == 5
    assert render("lookup('template', 'dict.j2')") == '{"foo": "bar"}\n'
    assert render("lookup('template', 'none.j2')") is None
    assert render(
        "lookup('template', 'delims.txt', variable_start_string='[%', variable_end_string='%]',"
        " comment_start_string='[#', comment_end_string='#]')"
    ) == "Hello w!"
    assert render("lookup('template', 'tb.j2')") == "Hello\nBye\n"
    assert render("lookup('template', 'tb.j2', trim_blocks=False)") == "\nHello\n\nBye\n"
    assert render("lookup('template', 'managed.j2', template_vars={'extra': 'x'})") == (
        "Ansible managed x"
    )


def test_implicit_magic_variables_as_ansibles() -> None:
    """`ansible_playbook_python` (the controller's Python) for every host, `ansible_host` for
    every task (Ansible's PlayContext.update_vars): lookup_vars and ansible-test inventories
    (`ansible_python_interpreter={{ ansible_playbook_python }}`) use them."""
    from provision.engine.variables import VariableManager
    from provision.inventory.model import Host, Inventory

    host = Host(name="web", address="10.0.0.5")
    manager = VariableManager(Inventory(hosts={"web": host}), {}, Path("."))
    variables = manager.task_vars(manager.state(host))
    assert variables["ansible_playbook_python"] == sys.executable
    assert variables["ansible_host"] == "10.0.0.5"


def test_inventory_interpreter_template(tmp_path: Path) -> None:
    from provision.inventory.loader import load_inventory

    (tmp_path / "inv").write_text(
        "testhost ansible_connection=local ansible_python_interpreter='{{ ansible_playbook_python }}'\n"
    )
    inventory = load_inventory([str(tmp_path / "inv")])
    assert inventory.hosts["testhost"].python == sys.executable
