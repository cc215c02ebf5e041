"""Line charts rendered as inline SVG on the server: no JavaScript, no CDN, works offline."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

#: Distinguishable line colours (Okabe-Ito, readable by most colour-blind people).
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000")

WIDTH, HEIGHT = 640, 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 150, 12, 28


@dataclass(frozen=True, slots=True)
class Line:
    """One series of a chart: its legend label and its (epoch seconds, value) points."""

    label: str
    points: tuple[tuple[float, float], ...]
    #: What the label means, shown as the legend's tooltip ('' for none).
    hint: str = ""


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) from at or below ``low``
    to at or above ``high``."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / max(count - 1, 1)
    if raw <= 0.0 or not math.isfinite(raw):  # a range too narrow (or wide) to divide
        return [low, high]
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(power * m for m in (1.0, 2.0, 5.0, 10.0) if power * m >= raw)
    first = math.floor(low / step)
    last = math.ceil(high / step)
    # The divisions can round (subnormals, huge values); make sure the ends still cover.
    first -= first * step > low
    last += last * step < high
    return [index * step for index in range(first, last + 1)]


def format_value(value: float) -> str:
    """A short label for an axis tick or a legend value."""
    magnitude = abs(value)
    if magnitude >= 1e9:
        return f"{value / 1e9:.3g}G"
    if magnitude >= 1e6:
        return f"{value / 1e6:.3g}M"
    if magnitude >= 1e4:
        return f"{value / 1e3:.3g}k"
    return f"{value:.4g}"


def _bounds(
    lines: Sequence[Line], thresholds: Sequence[float]
) -> tuple[float, float, float, float]:
    xs = [x for line in lines for x, _ in line.points]
    ys = [y for line in lines for _, y in line.points if math.isfinite(y)]
    ys += [t for t in thresholds if math.isfinite(t)]
    x_low, x_high = min(xs), max(xs)
    if x_high == x_low:
        x_low, x_high = x_low - 30, x_high + 30
    y_low, y_high = min(*ys, 0.0), max(ys)
    if y_high == y_low:
        y_high = y_low + 1.0
    ticks = nice_ticks(y_low, y_high)
    return x_low, x_high, min(y_low, ticks[0]), max(y_high, ticks[-1])


def line_chart(
    title: str, lines: Sequence[Line], unit: str = "", thresholds: Sequence[float] = ()
) -> str:
    """An SVG document (as text) with one polyline per line, axes and a legend.

    Lines without points are left out; with no points at all the chart says so.
    ``thresholds`` (of alert rules on this metric) are drawn as dashed red lines.
    """
    lines = [line for line in lines if line.points]
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
    )
    if not lines or not any(math.isfinite(y) for line in lines for _, y in line.points):
        return head + f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" class="empty">no data</text></svg>'
    x_low, x_high, y_low, y_high = _bounds(lines, thresholds)
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def sx(x: float) -> float:
        return _LEFT + (x - x_low) / (x_high - x_low) * plot_w

    def sy(y: float) -> float:
        return _TOP + plot_h - (y - y_low) / (y_high - y_low) * plot_h

    parts = [head, _axes(x_low, x_high, y_low, y_high, sx, sy, unit)]
    for threshold in thresholds:
        y = sy(threshold)
        parts.append(
            f'<line class="threshold" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y:.1f}" '
            f'y2="{y:.1f}" stroke="#cf222e" stroke-dasharray="5,4"/>'
            f'<text x="{WIDTH - _RIGHT - 4}" y="{y - 4:.1f}" class="tick" text-anchor="end" '
            f'fill="#cf222e">alert &gt; {escape(format_value(threshold))}</text>'
        )
    for index, line in enumerate(lines):
        colour = PALETTE[index % len(PALETTE)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in line.points if math.isfinite(y))
        parts.append(
            f'<polyline class="series" data-label="{escape(line.label)}" fill="none" '
            f'stroke="{colour}" stroke-width="1.6" points="{coords}"/>'
        )
        legend_y = _TOP + 12 + index * 16
        last = line.points[-1][1]
        parts.append(
            f'<rect x="{WIDTH - _RIGHT + 10}" y="{legend_y - 8}" width="10" height="10" '
            f'fill="{colour}"/><text x="{WIDTH - _RIGHT + 24}" y="{legend_y + 1}" '
            f'class="legend">{_tooltip(line.hint)}{escape(line.label)} = '
            f"{escape(format_value(last))}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _axes(
    x_low: float,
    x_high: float,
    y_low: float,
    y_high: float,
    sx: Callable[[float], float],
    sy: Callable[[float], float],
    unit: str,
) -> str:
    parts = []
    bottom = HEIGHT - _BOTTOM
    for tick in nice_ticks(y_low, y_high):
        y = sy(tick)
        parts.append(
            f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">'
            f"{escape(format_value(tick))}</text>"
        )
    span = x_high - x_low
    for index in range(5):
        x = x_low + span * index / 4
        layout = "%H:%M:%S" if span < 86400 else "%m-%d %H:%M"
        label = datetime.fromtimestamp(x, UTC).strftime(layout)
        parts.append(
            f'<text x="{sx(x):.1f}" y="{bottom + 18}" class="tick" text-anchor="middle">'
            f"{label}</text>"
        )
    parts.append(
        f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{bottom}" y2="{bottom}" class="axis"/>'
        f'<line x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{bottom}" class="axis"/>'
    )
    if unit:
        parts.append(f'<text x="4" y="{_TOP + 8}" class="tick">{escape(unit)}</text>')
    return "".join(parts)


def _tooltip(hint: str) -> str:
    return f"<title>{escape(hint)}</title>" if hint else ""
