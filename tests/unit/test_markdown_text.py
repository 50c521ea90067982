"""Markdown reports carry a host's text as text (issue 29, defect 4): a GPU name, a hostname, an
OS name holding `<img onerror=…>`, `<script>`, a link or table syntax renders (CommonMark + GFM
tables, markdown-it-py: what an issue or wiki page does) as the very characters it holds; a log
line of backticks in the train report's tail cannot close its fence. Real renders, real parser."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

import provision.bench  # noqa: F401  (registers the bench's section of the report)
from provision.report.render import render_markdown
from provision.terminal import md, md_code, md_fence
from provision.train.render import render_markdown as render_train_markdown
from provision.train.report import build_document
from tests.unit.report_support import h100_facts, h100_report

HTML = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
LINK = "[click](javascript:alert(3)) ![i](http://evil.example/t.png) <http://evil.example/>"
TABLE = "a | b | c"
CANARY = f"{HTML} {LINK} {TABLE} **bold** _em_ `code`"


def html_of(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def no_host_markup(rendered: str) -> None:
    assert "<img" not in rendered and "<script" not in rendered, "a host's HTML survived Markdown"
    assert "<a " not in rendered and "href" not in rendered, "a host's text became a link"
    assert "<strong>bold</strong>" not in rendered and "<em>em</em>" not in rendered


def test_a_hosts_html_and_links_render_as_text() -> None:
    facts = h100_facts()
    facts["os"]["pretty_name"] = CANARY
    facts["gpus"][0]["name"] = CANARY
    facts["hostname"] = CANARY
    doc = h100_report(facts=facts, host="gpu1")
    rendered = html_of(render_markdown([doc]))
    no_host_markup(rendered)
    # the characters themselves are there, escaped for HTML by the renderer
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in rendered
    assert "[click](javascript:alert(3))" in rendered and "**bold**" in rendered


def _train_doc(tail: list[str], host: str = "gpu1") -> dict[str, Any]:
    summary = {
        "run": {"run_id": "r1", "state": "finished", "exit_code": 0, "seconds": 60.0, "workdir": "/w",
                "log": "/w/output.log", "instrument": True, "command": ["python", "t.py"]},
        "instrumented": True, "steps": 500, "data_wait_fraction": 0.05, "wait_s": 1.0, "step_s": 19.0,
        "loader": {"num_workers": 4, "batch_size": 32, "pin_memory": True},
        "cpu": {"busy_pct_mean": 50.0, "iowait_pct_mean": 0.0, "cores_workers_mean": 1.0, "cpus": 16},
        "gpu": {"source": None, "reason": "no NVIDIA GPU", "per_gpu": []},
        "io": {"dataset_paths": [], "network_open_share": {}, "nfs_read_mb_s_mean": {}},
        "amp": None, "device": "cpu", "epochs": [], "epoch_source": "instrumentation", "tail": tail,
    }
    return build_document(host, summary["run"], summary, [], {"cpu": {"usable_cpus": 16}})


def test_a_log_line_of_backticks_cannot_close_the_fence() -> None:
    tail = ["epoch 1", "```", "# not a heading", HTML, "````` five", "done"]
    markdown = render_train_markdown([_train_doc(tail, host=CANARY)])
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 1 and fences[0].content == "\n".join(tail) + "\n", fences
    rendered = html_of(markdown)
    assert "<h1>not a heading" not in rendered
    no_host_markup(rendered)


def test_inline_code_and_fences_outrun_any_backtick_run() -> None:
    for body in ("a`b", "``x``", "`", "x ``` y"):
        rendered = html_of(md_code(body))
        assert rendered.startswith("<p><code>") and rendered.count("<code>") == 1, (body, rendered)
    block = md_fence(["```", "````", "x"])
    assert block.startswith("`````text\n") and block.endswith("\n`````")


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40))
def test_any_host_text_renders_as_itself(text: str) -> None:
    """md() of any text renders (CommonMark) to exactly its visible form: no tag, link or emphasis."""
    from html import unescape

    from provision.terminal import visible

    shown = visible(text).replace("\r", " ").replace("\n", " ")
    rendered = html_of("x " + md(text))  # inline, after other text, as in a cell or an item
    assert rendered.startswith("<p>") and rendered.rstrip().endswith("</p>")
    inner = rendered.strip()[len("<p>"):-len("</p>")]
    assert "<" not in inner, (text, rendered)
    assert unescape(inner) == ("x " + shown).strip() or unescape(inner) == "x " + shown.rstrip(), (text, rendered)
