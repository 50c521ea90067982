"""Small inline SVG charts, so the HTML report is one self-contained file (rented servers and
the people reading reports may have no internet: no CDN scripts)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

_W, _H, _PAD = 520, 240, 44
_COLORS = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2"]


def _frame(title: str, body: str) -> str:
    return (
        f'<svg class="chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {_W} {_H}" '
        f'xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}">'
        f'<text x="{_W / 2}" y="16" text-anchor="middle" font-size="13" font-weight="bold">{escape(title)}</text>'
        f"{body}</svg>"
    )


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float], unit: str = "") -> str:
    """Vertical bars with value labels; empty input gives an empty-state chart."""
    if not values:
        return _frame(title, f'<text x="{_W / 2}" y="{_H / 2}" text-anchor="middle">no data</text>')
    top = max(max(values), 1e-9) * 1.15
    inner_w, inner_h = _W - 2 * _PAD, _H - 2 * _PAD
    step = inner_w / len(values)
    parts = [f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#888"/>']
    for i, (label, value) in enumerate(zip(labels, values, strict=False)):
        h = inner_h * value / top
        x = _PAD + i * step + step * 0.15
        y = _H - _PAD - h
        parts.append(f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{step * 0.7:.1f}" height="{h:.1f}" '
                     f'fill="{_COLORS[i % len(_COLORS)]}"><title>{escape(label)}: {value:.4g}{escape(unit)}</title></rect>')
        parts.append(f'<text x="{x + step * 0.35:.1f}" y="{y - 4:.1f}" text-anchor="middle" font-size="11">{value:.3g}{escape(unit)}</text>')
        parts.append(f'<text x="{x + step * 0.35:.1f}" y="{_H - _PAD + 16:.1f}" text-anchor="middle" font-size="11">{escape(label)}</text>')
    return _frame(title, "".join(parts))


def line_chart(title: str, xs: Sequence[float], ys: Sequence[float], x_label: str, y_label: str) -> str:
    if not xs:
        return _frame(title, f'<text x="{_W / 2}" y="{_H / 2}" text-anchor="middle">no data</text>')
    x_max = max(max(xs), 1)
    y_max = max(max(ys), 1e-9) * 1.15
    inner_w, inner_h = _W - 2 * _PAD, _H - 2 * _PAD

    def px(x: float) -> float:
        return _PAD + inner_w * (x / x_max if len(xs) > 1 else 0.5)

    def py(y: float) -> float:
        return _H - _PAD - inner_h * y / y_max

    points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys, strict=False))
    parts = [
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#888"/>',
        f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_H - _PAD}" stroke="#888"/>',
        f'<polyline class="series" fill="none" stroke="{_COLORS[0]}" stroke-width="2" points="{points}"/>',
        f'<text x="{_W / 2}" y="{_H - 6}" text-anchor="middle" font-size="11">{escape(x_label)}</text>',
        f'<text x="12" y="{_H / 2}" text-anchor="middle" font-size="11" transform="rotate(-90 12 {_H / 2})">{escape(y_label)}</text>',
    ]
    for x, y in zip(xs, ys, strict=False):
        parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{_COLORS[0]}"><title>{x:g}: {y:.4g}</title></circle>')
        parts.append(f'<text x="{px(x):.1f}" y="{_H - _PAD + 14:.1f}" text-anchor="middle" font-size="10">{x:g}</text>')
        parts.append(f'<text x="{px(x):.1f}" y="{py(y) - 7:.1f}" text-anchor="middle" font-size="10">{y:.3g}</text>')
    return _frame(title, "".join(parts))
