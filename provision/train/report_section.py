"""`provision train`'s section of the report: documents with a `train` part are rendered in their
own layout (provision/train/render.py) and compared with the host's previous train report by the
job's own figures. Registered when provision.train is imported."""

from __future__ import annotations

from provision.report.sections import Section, register
from provision.train import render
from provision.train.report import COMPARED_TRAIN, headline_figures, is_train

SECTION = register(
    Section(
        name="train",
        owns=is_train,
        render_markdown=render.render_markdown,
        render_html=render.render_html,
        headline=headline_figures,
        compared=COMPARED_TRAIN,
    )
)
