"""A task's (or include's) loop items: `loop:`, `with_items`/`with_list`/`with_dict` and every
`with_<lookup>` (Ansible's loop_with), as values (data), never templates."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jinja2

from provision.engine.first_found_terms import render_first_found_terms
from provision.engine.lookups import VarsContext, canonical_lookup, run_lookup
from provision.engine.playbook import Include, Task
from provision.engine.templating import TemplateError, is_template
from provision.taint import as_data

if TYPE_CHECKING:
    from provision.engine.templating import Templar


NATIVE_LOOPS = frozenset({"loop", "with_items", "with_list", "with_dict"})


def outputs_as_data(written: Any, rendered: Any) -> Any:
    """Loop items as values: what a template produced is data (never rendered again), the
    playbook's own literal text stays the author's (trusted, as Ansible keeps it: an item's
    `that: 1 == 1` is an expression `assert: "{{ item }}"` may evaluate)."""
    if isinstance(written, str):
        return as_data(rendered) if is_template(written) else rendered
    if isinstance(written, Mapping) and isinstance(rendered, Mapping) and not any(
        is_template(k) for k in written
    ):
        return {k: outputs_as_data(written.get(k), v) for k, v in rendered.items()}
    if isinstance(written, (list, tuple)) and isinstance(rendered, list) and len(written) == len(
        rendered
    ):
        return [outputs_as_data(w, r) for w, r in zip(written, rendered, strict=True)]
    return as_data(rendered)


class LoopItems:
    """Mixin of the task execution: `self.templar` renders."""

    templar: Templar

    def loop_items(self, node: Task | Include, variables: Mapping[str, Any]) -> list[Any]:
        kind = node.loop_kind
        if kind == "with_first_found":  # its terms name controller files (engine/host_paths.py)
            raw = as_data(render_first_found_terms(self.templar, node.loop, variables))
        else:  # items are values, not templates; the playbook's own literals stay the author's
            raw = outputs_as_data(node.loop, self.templar.render(node.loop, variables))
        if kind is not None and kind not in NATIVE_LOOPS:
            return self.lookup_items(node, kind[len("with_") :], raw, variables)
        if kind == "with_dict":
            if not isinstance(raw, Mapping):
                raise TemplateError(f"with_dict needs a mapping, got {type(raw).__name__}")
            return [{"key": k, "value": v} for k, v in raw.items()]
        if isinstance(raw, str):
            if kind in ("with_items", "with_list"):
                return [raw]
            raise TemplateError(
                f"loop needs a list, got the string {raw!r} (use a YAML list or a list variable)"
            )
        if raw is None:
            return []
        if isinstance(raw, Mapping):
            raise TemplateError("loop needs a list, got a mapping (use `| dict2items`)")
        items = list(raw)
        if kind == "with_items":
            flat: list[Any] = []
            for item in items:
                flat.extend(item if isinstance(item, list) else [item])
            return flat
        return items

    def lookup_items(
        self, node: Task | Include, kind: str, raw: Any, variables: Mapping[str, Any]
    ) -> list[Any]:
        """`with_<lookup>`: the lookup's values for the rendered terms (Ansible's loop_with)."""
        terms = tuple(raw) if isinstance(raw, list) else (raw,)
        action = node.action if isinstance(node, Task) else "include_tasks"
        subdir = next((f"{s}s" for s in ("template", "var") if s in action), "files")
        lazy = self.templar.vars(variables)
        try:
            if canonical_lookup(kind) == "template":  # needs a real Jinja context
                return as_data(
                    self.templar.evaluate(
                        "query('template', *__pv_terms)", ChainMap({"__pv_terms": terms}, lazy)
                    )
                )
            # the lookup's values are items (data), as a `loop:` list's are
            return as_data(run_lookup(VarsContext(lazy), kind, terms, {"_subdir": subdir}))
        except jinja2.TemplateError as exc:
            raise TemplateError(f"with_{kind}: {exc}") from None
