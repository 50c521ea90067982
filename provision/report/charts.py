"""Small inline SVG charts, so the HTML report is one self-contained file: rented servers and
the people reading reports may have no internet, so no CDN scripts, fonts or images.

Each function returns one `<svg class="chart" data-chart=NAME>` element; an empty input gives
the same frame with "not measured" and the reason, so a reader sees what is missing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

_W, _H = 560, 260
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 16, 40, 46
_COLORS = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#9D755D")


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def _fmt(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _frame(name: str, title: str, body: str, legend: Sequence[str] = ()) -> str:
    parts = [
        f'<svg class="chart" data-chart="{escape(name)}" role="img" aria-label="{escape(title)}" '
        f'viewBox="0 0 {_W} {_H}" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        'font-family="system-ui, sans-serif">',
        f'<text x="{_W / 2}" y="18" text-anchor="middle" font-size="14" font-weight="bold">'
        f"{escape(title)}</text>",
    ]
    x = _LEFT
    for i, label in enumerate(legend):
        parts.append(
            f'<rect class="legend" x="{x}" y="26" width="10" height="10" '
            f'fill="{_COLORS[i % len(_COLORS)]}"/>'
            f'<text x="{x + 14}" y="35" font-size="11">{escape(label)}</text>'
        )
        x += 24 + 7 * len(label)
    parts.append(body)
    parts.append("</svg>")
    return "".join(parts)


def empty_chart(name: str, title: str, reason: str) -> str:
    return _frame(
        name,
        title,
        f'<text class="empty" x="{_W / 2}" y="{_H / 2}" text-anchor="middle" font-size="13" '
        f'fill="#777">not measured: {escape(reason)}</text>',
    )


def _axes(top: float, unit: str) -> list[str]:
    """Y axis with 4 gridlines from 0 to `top`, and the x axis line."""
    inner_h = _H - _TOP - _BOTTOM
    out = []
    for k in range(5):
        value = top * k / 4
        y = _H - _BOTTOM - inner_h * k / 4
        out.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_W - _RIGHT}" y2="{y:.1f}" stroke="#e5e5e5"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="10" fill="#555">'
            f"{_fmt(value)}</text>"
        )
    out.append(
        f'<line x1="{_LEFT}" y1="{_H - _BOTTOM}" x2="{_W - _RIGHT}" y2="{_H - _BOTTOM}" stroke="#888"/>'
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_H - _BOTTOM}" stroke="#888"/>'
    )
    if unit:
        out.append(
            f'<text x="14" y="{(_TOP + _H - _BOTTOM) / 2:.1f}" text-anchor="middle" font-size="11" '
            f'transform="rotate(-90 14 {(_TOP + _H - _BOTTOM) / 2:.1f})">{escape(unit)}</text>'
        )
    return out


def grouped_bar_chart(
    name: str,
    title: str,
    groups: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    unit: str = "",
    empty_reason: str = "no data",
) -> str:
    """Bars for each group (x axis) and series (colour); `series` = [(label, value per group)]."""
    values = _finite([v for _, vs in series for v in vs])
    if not groups or not values:
        return empty_chart(name, title, empty_reason)
    top = max(values) * 1.15 or 1.0
    inner_w, inner_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    step = inner_w / len(groups)
    width = step * 0.8 / max(1, len(series))
    parts = _axes(top, unit)
    for g, group in enumerate(groups):
        x0 = _LEFT + g * step + step * 0.1
        for s, (label, vals) in enumerate(series):
            value = vals[g] if g < len(vals) else None
            if value is None or not math.isfinite(float(value)):
                continue
            h = inner_h * float(value) / top
            x, y = x0 + s * width, _H - _BOTTOM - h
            parts.append(
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{width * 0.92:.1f}" height="{h:.1f}" '
                f'fill="{_COLORS[s % len(_COLORS)]}"><title>{escape(group)} {escape(label)}: '
                f"{_fmt(float(value))} {escape(unit)}</title></rect>"
                f'<text x="{x + width * 0.46:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-size="10">'
                f"{_fmt(float(value))}</text>"
            )
        parts.append(
            f'<text x="{x0 + step * 0.4:.1f}" y="{_H - _BOTTOM + 16}" text-anchor="middle" '
            f'font-size="11">{escape(group)}</text>'
        )
    legend = [label for label, _ in series] if len(series) > 1 else []
    return _frame(name, title, "".join(parts), legend)


def bar_chart(
    name: str,
    title: str,
    labels: Sequence[str],
    values: Sequence[float | None],
    unit: str = "",
    empty_reason: str = "no data",
) -> str:
    """One bar per label."""
    return grouped_bar_chart(name, title, labels, [(unit, values)], unit, empty_reason)


def line_chart(
    name: str,
    title: str,
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    x_label: str,
    y_label: str,
    empty_reason: str = "no data",
) -> str:
    """Lines through (x, y) points, one per series, on a shared linear x axis."""
    points = [(x, y) for _, pts in series for x, y in pts if math.isfinite(y)]
    if not points:
        return empty_chart(name, title, empty_reason)
    xs = sorted({x for x, _ in points})
    x_min, x_max = min(xs), max(xs)
    top = max(y for _, y in points) * 1.15 or 1.0
    inner_w, inner_h = _W - _LEFT - _RIGHT - 10, _H - _TOP - _BOTTOM

    def px(x: float) -> float:
        return (
            _LEFT + 10 + (inner_w * (x - x_min) / (x_max - x_min) if x_max > x_min else inner_w / 2)
        )

    def py(y: float) -> float:
        return _H - _BOTTOM - inner_h * y / top

    parts = _axes(top, y_label)
    for x in xs:
        parts.append(
            f'<text x="{px(x):.1f}" y="{_H - _BOTTOM + 15}" text-anchor="middle" font-size="10">'
            f"{x:g}</text>"
        )
    parts.append(
        f'<text x="{(_LEFT + _W - _RIGHT) / 2:.1f}" y="{_H - 8}" text-anchor="middle" '
        f'font-size="11">{escape(x_label)}</text>'
    )
    for s, (label, pts) in enumerate(series):
        pts = sorted((x, y) for x, y in pts if math.isfinite(y))
        if not pts:
            continue
        color = _COLORS[s % len(_COLORS)]
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        parts.append(
            f'<polyline class="series" fill="none" stroke="{color}" stroke-width="2" points="{coords}"/>'
        )
        for x, y in pts:
            parts.append(
                f'<circle class="point" cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}">'
                f"<title>{escape(label)} {x:g}: {_fmt(y)}</title></circle>"
                f'<text x="{px(x):.1f}" y="{py(y) - 7:.1f}" text-anchor="middle" font-size="10">'
                f"{_fmt(y)}</text>"
            )
    legend = [label for label, _ in series] if len(series) > 1 else []
    return _frame(name, title, "".join(parts), legend)


def scatter_chart(
    name: str,
    title: str,
    points: Sequence[tuple[str, float, float, int]],
    x_unit: str,
    y_unit: str,
    empty_reason: str = "no data",
) -> str:
    """Labelled points from 0; `points` = [(label, x, y, colour index)] (`choose`: offers by
    predicted hours and cost to finish, the recommended one in its own colour)."""
    pts = [(lbl, float(x), float(y), c) for lbl, x, y, c in points
           if math.isfinite(float(x)) and math.isfinite(float(y))]
    if not pts:
        return empty_chart(name, title, empty_reason)
    top = max(y for _, _, y, _ in pts) * 1.15 or 1.0
    right = max(x for _, x, _, _ in pts) * 1.1 or 1.0
    inner_w, inner_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    parts = _axes(top, y_unit)
    for k in range(5):
        x = _LEFT + inner_w * k / 4
        parts.append(f'<text x="{x:.1f}" y="{_H - _BOTTOM + 14}" text-anchor="middle" font-size="10" '
                     f'fill="#555">{_fmt(right * k / 4)}</text>')
    parts.append(f'<text x="{_LEFT + inner_w / 2:.1f}" y="{_H - 8}" text-anchor="middle" font-size="11">'
                 f"{escape(x_unit)}</text>")
    for label, xv, yv, c in pts:
        x, y = _LEFT + inner_w * xv / right, _H - _BOTTOM - inner_h * yv / top
        parts.append(f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{_COLORS[c % len(_COLORS)]}">'
                     f"<title>{escape(label)}: {_fmt(xv)} {escape(x_unit)}, {_fmt(yv)} {escape(y_unit)}</title>"
                     f'</circle><text x="{x + 6:.1f}" y="{y - 5:.1f}" font-size="10">{escape(label)}</text>')
    return _frame(name, title, "".join(parts))
