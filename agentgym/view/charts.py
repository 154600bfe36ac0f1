"""Charts drawn on the server as inline SVG: curves of a training run's metrics and bars of success rates.

Every label is escaped; colours are SVG attributes (classes from the page's style sheet), never inline style.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from markupsafe import Markup, escape

WIDTH, HEIGHT = 420, 226
_LEFT, _RIGHT, _TOP, _BOTTOM = 46, 12, 26, 30
SERIES_CLASSES = ("s0", "s1", "s2", "s3")


def _number(value: float, step: float | None = None) -> str:
    """``value`` with as many decimals as ``step`` (the distance between ticks) needs, else three significant."""
    if value == 0:
        return "0"
    if step is None:
        return f"{value:.3g}"
    if abs(value) >= 1e5 or step < 1e-4:
        return f"{value:.3g}"
    decimals = max(0, -math.floor(math.log10(step) + 1e-9) + (0 if round(step / 10 ** math.floor(math.log10(step)), 6)
                                                                    in (1.0, 2.0, 5.0) else 1))
    return f"{value:.{decimals}f}"


def _ticks(low: float, high: float, count: int = 4) -> tuple[list[float], float]:
    """Round tick values from ``low`` to ``high`` (about ``count`` steps), and the step."""
    if high <= low:
        return [low], 1.0
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step - 1e-9) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)], step


def line_chart(title: str, series: Mapping[str, Sequence[tuple[float, float]]], *, unit_range: bool = False,
               x_label: str = "step") -> Markup:
    """Curves of ``series`` (name: (x, y) points) on shared axes; ``unit_range`` fixes y to [0, 1]."""
    points = [p for values in series.values() for p in values if math.isfinite(p[1])]
    top = _TOP + 16  # a row for the legend under the title
    parts = [(f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
             f'aria-label="{escape(title)}"><text class="title" x="{_LEFT}" y="16">{escape(title)}</text>')]
    if not points:
        parts.append(f'<text class="empty" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">no values yet</text>')
        return Markup("".join(parts) + "</svg>")
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = (0.0, 1.0) if unit_range else (min(ys), max(ys))
    if y1 - y0 < 1e-12:
        y0, y1 = y0 - 0.5, y1 + 0.5
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - top - _BOTTOM

    def sx(x: float) -> float:
        return _LEFT + (x - x0) / (x1 - x0) * plot_w

    def sy(y: float) -> float:
        return top + (1 - (y - y0) / (y1 - y0)) * plot_h

    y_ticks, y_step = _ticks(y0, y1)
    for tick in y_ticks:
        parts.append(f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{sy(tick):.1f}" y2="{sy(tick):.1f}"/>'
                     f'<text class="tick" x="{_LEFT - 4}" y="{sy(tick) + 3:.1f}" text-anchor="end">'
                     f'{escape(_number(tick, y_step))}</text>')
    x_ticks, x_step = _ticks(x0, x1, 6)
    for tick in x_ticks:
        parts.append(f'<text class="tick" x="{sx(tick):.1f}" y="{HEIGHT - _BOTTOM + 13}" text-anchor="middle">'
                     f'{escape(_number(tick, x_step))}</text>')
    parts.append(f'<text class="tick" x="{WIDTH - _RIGHT}" y="{HEIGHT - 4}" text-anchor="end">{escape(x_label)}</text>')
    parts.append(f'<rect class="frame" x="{_LEFT}" y="{top}" width="{plot_w}" height="{plot_h}"/>')
    legend_x = _LEFT
    for i, (name, values) in enumerate(series.items()):
        css = SERIES_CLASSES[i % len(SERIES_CLASSES)]
        finite = sorted(p for p in values if math.isfinite(p[1]))
        if len(finite) > 1:
            path = " ".join(f"{'M' if j == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for j, (x, y) in enumerate(finite))
            parts.append(f'<path class="line {css}" d="{path}"/>')
        step = max(1, len(finite) // 200)  # at most ~200 dots a curve
        for x, y in finite[::step]:
            parts.append(f'<circle class="dot {css}" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5"><title>'
                         f'{escape(name)} at {x_label} {escape(_number(x))}: {escape(_number(y))}</title></circle>')
        parts.append(f'<circle class="dot {css}" cx="{legend_x + 5}" cy="{top - 10}" r="4"/>'
                     f'<text class="legend" x="{legend_x + 12}" y="{top - 6}">{escape(name)}</text>')
        legend_x += 7 * len(name) + 22
    return Markup("".join(parts) + "</svg>")


def bar_chart(title: str, bars: Sequence[tuple[str, float | None]]) -> Markup:
    """Horizontal bars of rates in [0, 1], one per ``(label, rate)``; a rate of None (nothing scored) draws no bar."""
    row, label_w = 20, min(260, 7 * max((len(name) for name, _ in bars), default=4) + 10)
    height = _TOP + row * max(1, len(bars)) + 22
    width = WIDTH
    plot_w = width - label_w - _RIGHT - 44
    parts = [(f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(title)}"><text class="title" x="4" y="16">{escape(title)}</text>')]
    for tick in (0.0, 0.5, 1.0):
        x = label_w + tick * plot_w
        parts.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP - 4}" y2="{height - 18}"/>'
                     f'<text class="tick" x="{x:.1f}" y="{height - 6}" text-anchor="middle">{tick:.0%}</text>')
    for i, (name, rate) in enumerate(bars):
        y = _TOP + i * row
        shown = name if len(name) <= 36 else "…" + name[-35:]
        parts.append(f'<text class="label" x="{label_w - 6}" y="{y + 13}" text-anchor="end">{escape(shown)}'
                     f'<title>{escape(name)}</title></text>')
        if rate is None:
            parts.append(f'<text class="tick" x="{label_w + 4}" y="{y + 13}">n/a</text>')
            continue
        w = max(0.0, min(1.0, rate)) * plot_w
        parts.append(f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row - 6}">'
                     f'<title>{escape(name)}: {rate:.1%}</title></rect>'
                     f'<text class="tick" x="{label_w + w + 4:.1f}" y="{y + 13}">{rate:.0%}</text>')
    return Markup("".join(parts) + "</svg>")
