"""The `prediction` section of a bench/train report as the renderers show it: a table of
predicted vs measured samples/s, and the cost-vs-hours chart of the offers `choose` ranked."""

from __future__ import annotations

from typing import Any

from provision.report.charts import scatter_chart


def rows(doc: dict[str, Any]) -> list[list[str]]:
    section = doc.get("prediction") if isinstance(doc.get("prediction"), dict) else {}
    out = []
    for c in section.get("checks") or []:
        out.append([str(c.get("workload")), str(c.get("precision")), str(c.get("batch")),
                    f"{c.get('predicted_samples_per_s'):.4g}", f"{c.get('measured_samples_per_s'):.4g}",
                    f"{c.get('ratio'):.2f}×"])
    return out


HEADER = ["workload", "precision", "batch", "predicted samples/s", "measured samples/s", "measured ÷ predicted"]


def title(doc: dict[str, Any]) -> str:
    gpu = (doc.get("prediction") or {}).get("gpu") if isinstance(doc.get("prediction"), dict) else None
    return f"Predicted by `provision choose` vs measured ({gpu})" if gpu else "Predicted vs measured"


def chart(doc: dict[str, Any]) -> str:
    """'' when the report has no offers from `choose` (the template then shows no chart)."""
    section = doc.get("prediction") if isinstance(doc.get("prediction"), dict) else {}
    offers = [o for o in section.get("offers") or [] if o.get("predicted_hours") and o.get("predicted_cost")]
    if not offers:
        return ""
    points = [(f"{o['id']} ({o['count']}× {o['gpu']})", o["predicted_hours"], o["predicted_cost"],
               2 if o.get("rank") == 1 else (0 if o.get("fits") else 3)) for o in offers]
    return scatter_chart("choose", f"Offers for {section.get('offers_model') or 'the model'}: cost vs hours to finish",
                         points, "hours", "cost")
