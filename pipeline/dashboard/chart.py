"""The per-layer numerics charts as inline SVG, drawn here so the page needs no script and works from file://.

Relative RMS (log scale) against layer index. The model page draws small multiples: one small chart per capture
point (17 series in one plot cannot be read), each with the tolerance as a dashed line, and one for the layer output
with the model's own routing beside the noise floor measured in the same run (grey, dashed): the reference tier's
own arithmetic in bf16, what precision alone moves. Each measurement is one <circle class="point">, so a test can
count them; a non-finite one is drawn at the top and marked over.
"""

from __future__ import annotations

import math
from html import escape

WIDTH, HEIGHT = 760, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 170, 16, 40  # margins; the right one holds the legend
SMALL = (300, 170, 8)  # a small multiple: width, height, right margin (its title is the figure's caption)
# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


def small_multiples(rows: list[dict], tolerance: float | None, label: str = "") -> list[tuple[str, str]]:
    """(capture, <svg>) per capture point, in the order the rows first name them."""
    by_capture: dict[str, list[dict]] = {}
    for row in rows:
        by_capture.setdefault(str(row["capture"]), []).append(row)
    return [(c, numerics_svg(r, tolerance, f"{label} {c}", small=True)) for c, r in by_capture.items()]


def floor_svg(layers: list[dict], label: str = "") -> str | None:
    """The layer output with the candidate's own routing against the noise floor (validate's "unreplayed" block:
    rows {"layer", "candidate_rel_rms", "floor_rel_rms"}); None when the report has no floor."""
    candidate = [{"capture": "candidate", "layer": r["layer"], "rel_rms": r["candidate_rel_rms"]}
                 for r in layers if isinstance(r, dict) and _number(r.get("candidate_rel_rms"))]  # fmt: skip
    floor = [(int(r["layer"]), float(r["floor_rel_rms"])) for r in layers
             if isinstance(r, dict) and _number(r.get("floor_rel_rms")) and isinstance(r.get("layer"), int)]  # fmt: skip
    if not candidate or not floor:
        return None
    return numerics_svg(candidate, None, label, small=True, floor=floor)


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def numerics_svg(
    rows: list[dict],
    tolerance: float | None = None,
    label: str = "",
    *,
    small: bool = False,
    floor: list[tuple[int, float]] | None = None,
) -> str:
    """rows: [{"capture": str, "layer": int, "rel_rms": float}, ...] -> an <svg> element as text; `floor`: the
    noise floor as (layer, rel_rms), drawn as a grey dashed line."""
    width, height, right = SMALL if small else (WIDTH, HEIGHT, RIGHT)
    series: dict[str, list[tuple[int, float]]] = {}
    nonfinite = []
    for row in rows:
        value = float(row["rel_rms"])
        if not math.isfinite(value):
            nonfinite.append((str(row["capture"]), int(row["layer"])))
            continue
        series.setdefault(str(row["capture"]), []).append((int(row["layer"]), max(value, 0.0)))
    floor = [(layer, max(v, 0.0)) for layer, v in floor or [] if math.isfinite(v)]
    layers = [layer for points in series.values() for layer, _ in points] + [layer for _, layer in nonfinite]
    if not layers:
        return '<p class="empty">no numerics in this report</p>'
    # The axis spans the non-zero values (and the tolerance); an exact zero (bitwise equal) sits on a "0" line
    # below it, so that one equal layer does not stretch the axis over ten empty decades.
    values = [v for points in series.values() for _, v in points if v > 0] + [v for _, v in floor if v > 0]
    values += [tolerance] if tolerance else []
    values = values or [1.0]
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    hi = hi if hi > lo else lo + 1
    zero = any(v == 0 for points in series.values() for _, v in points) or any(v == 0 for _, v in floor)
    lo -= 1 if zero else 0  # one decade's room for the zero line
    first, last = min(layers), max(layers)
    span = max(last - first, 1)
    plot_w, plot_h = width - LEFT - right, height - TOP - BOTTOM

    def x(layer: int) -> float:
        return LEFT + (layer - first) / span * plot_w

    def y(value: float) -> float:
        return TOP + (hi - math.log10(value)) / (hi - lo) * plot_h if value > 0 else TOP + plot_h

    svg_open = (
        f'<svg class="numerics{" small" if small else ""}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="relative RMS by layer {escape(label)}" xmlns="http://www.w3.org/2000/svg">'
    )
    out = [svg_open]
    every = max(1, math.ceil((hi - lo + 1) / (5 if small else 12)))  # at most 5 (small) or 12 labelled decades
    for exp in range(lo + (1 if zero else 0), hi + 1):  # one grid line per decade
        gy = y(10.0**exp)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{gy:.1f}" y2="{gy:.1f}"/>')
        if (hi - exp) % every == 0:
            out.append(f'<text class="tick" x="{LEFT - 6}" y="{gy + 4:.1f}" text-anchor="end">1e{exp}</text>')
    if zero:
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{y(0) + 4:.1f}" text-anchor="end">0</text>')
    for layer in _layer_ticks(first, last, 5 if small else 12):
        out.append(f'<text class="tick" x="{x(layer):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{layer}</text>')
    out.append(f'<text class="axis" x="{LEFT + plot_w / 2}" y="{height - 4}" text-anchor="middle">layer</text>')
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
    for capture, layer in nonfinite:  # no value to place: at the top, marked over
        out.append(
            f'<circle class="point over nonfinite" cx="{x(layer):.1f}" cy="{TOP:.1f}" r="3">'
            f"<title>{escape(capture)} layer {layer}: not finite</title></circle>"
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
                f"<title>{escape(capture)} layer {layer}: {v:.3e}{' (bitwise equal)' if v == 0 else ''}</title></circle>"
            )
        out.append("</g>")
        if small:
            continue
        ly = TOP + 8 + i * 18
        out.append(f'<rect x="{LEFT + plot_w + 16}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text class="legend" x="{LEFT + plot_w + 32}" y="{ly + 1}">{escape(capture)}</text>')
    if floor:  # over the candidate, so that where the two meet the floor still shows
        path = " ".join(f"{x(layer):.1f},{y(v):.1f}" for layer, v in sorted(floor))
        out.append(f'<polyline class="noise-floor" points="{path}" fill="none"><title>noise floor</title></polyline>')
    out.append("</svg>")
    return "\n".join(out)


def _layer_ticks(first: int, last: int, most: int = 12) -> list[int]:
    step = max(1, math.ceil((last - first + 1) / most))
    return list(range(first, last + 1, step))
