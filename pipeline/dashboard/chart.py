"""The per-layer numerics chart as inline SVG, drawn here so the page needs no script and works from file://.

Relative RMS (log scale) against layer index, one series per capture point; a dashed line marks the tolerance.
Each measurement is one <circle class="point">, so a test can count them.
"""

from __future__ import annotations

import math
from html import escape

WIDTH, HEIGHT = 760, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 170, 16, 40  # margins; the right one holds the legend
FLOOR = 1e-12  # where an exact zero is drawn on the log axis
# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


def numerics_svg(rows: list[dict], tolerance: float | None = None, label: str = "") -> str:
    """rows: [{"capture": str, "layer": int, "rel_rms": float}, ...] -> an <svg> element as text."""
    series: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        series.setdefault(str(row["capture"]), []).append((int(row["layer"]), max(float(row["rel_rms"]), FLOOR)))
    values = [v for points in series.values() for _, v in points] + ([tolerance] if tolerance else [])
    layers = [layer for points in series.values() for layer, _ in points]
    if not values or not layers:
        return '<p class="empty">no numerics in this report</p>'
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    hi = hi if hi > lo else lo + 1
    first, last = min(layers), max(layers)
    span = max(last - first, 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(layer: int) -> float:
        return LEFT + (layer - first) / span * plot_w

    def y(value: float) -> float:
        return TOP + (hi - math.log10(value)) / (hi - lo) * plot_h

    svg_open = (
        f'<svg class="numerics" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="relative RMS by layer {escape(label)}" xmlns="http://www.w3.org/2000/svg">'
    )
    out = [svg_open]
    for exp in range(lo, hi + 1):  # one grid line per decade
        gy = y(10.0**exp)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{gy:.1f}" y2="{gy:.1f}"/>')
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{gy + 4:.1f}" text-anchor="end">1e{exp}</text>')
    for layer in _layer_ticks(first, last):
        out.append(f'<text class="tick" x="{x(layer):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{layer}</text>')
    out.append(f'<text class="axis" x="{LEFT + plot_w / 2}" y="{HEIGHT - 4}" text-anchor="middle">layer</text>')
    out.append(
        f'<text class="axis" x="12" y="{TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 12 {TOP + plot_h / 2})">relative RMS</text>'
    )
    if tolerance:
        ty = y(tolerance)
        out.append(f'<line class="tolerance" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{ty:.1f}" y2="{ty:.1f}"/>')
        out.append(
            f'<text class="tick" x="{LEFT + plot_w - 4}" y="{ty - 4:.1f}" text-anchor="end">'
            f"tolerance {tolerance:.0e}</text>"
        )
    for i, (capture, points) in enumerate(sorted(series.items())):
        colour = PALETTE[i % len(PALETTE)]
        points.sort()
        path = " ".join(f"{x(layer):.1f},{y(v):.1f}" for layer, v in points)
        out.append(f'<g class="series" data-capture="{escape(capture)}">')
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for layer, v in points:
            over = " over" if tolerance and v > tolerance else ""
            out.append(
                f'<circle class="point{over}" cx="{x(layer):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}">'
                f"<title>{escape(capture)} layer {layer}: {v:.3e}</title></circle>"
            )
        out.append("</g>")
        ly = TOP + 8 + i * 18
        out.append(f'<rect x="{LEFT + plot_w + 16}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text class="legend" x="{LEFT + plot_w + 32}" y="{ly + 1}">{escape(capture)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _layer_ticks(first: int, last: int, most: int = 12) -> list[int]:
    step = max(1, math.ceil((last - first + 1) / most))
    return list(range(first, last + 1, step))
