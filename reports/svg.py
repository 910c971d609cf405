"""Inline SVG plots, written by hand: no JavaScript, no library, nothing fetched.

Every text that goes into an SVG passes through `esc`. Numbers are formatted by us. Each plot
carries data-* attributes with the numbers it draws, so tests can read them back.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from html import escape

from grader.models import TrainingCurve

INK, MUTED, GRID = "#1f2933", "#616e7c", "#e4e7eb"
BLUE, ORANGE, RED, GREEN = "#2563eb", "#d97706", "#dc2626", "#16a34a"


def esc(text) -> str:
    return escape(str(text), quote=True)


def text_width(text: str) -> int:
    """Width in half-em units: a CJK or full-width character counts two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def clip(text: str, units: int) -> str:
    """`text` cut to `units` half-ems, with an ellipsis when cut."""
    if text_width(text) <= units:
        return text
    while text and text_width(text) > units - 1:
        text = text[:-1]
    return text + "…"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About n round numbers spanning [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks, x = [], first
    while x <= hi + 1e-9 * step:
        ticks.append(round(x, 10))
        x += step
    return ticks


def fmt_tick(x: float) -> str:
    return f"{x:g}"


def loss_curve(curve: TrainingCurve, *, labels: dict, width: int = 680, height: int = 320) -> str:
    """The training loss per step, against ln(V) (the first loss to expect) and the entropy floor.

    A NaN/inf loss is marked in a red band at the top; a loss too large for the plot is drawn at
    its top edge. Below the floor is shaded: an honest model cannot get there.
    labels: step, loss, ln_v, floor, nonfinite, below_floor, title, and optionally empty (shown
    when no loss is finite); already translated.
    """
    left, right, top, bottom = 58, 168, 28, 46
    pw, ph = width - left - right, height - top - bottom
    losses = curve.losses
    n = len(losses)
    steps = max((n - 1) * curve.stride, 1)
    finite = [v for v in losses if v is not None and math.isfinite(v)]
    y_max = max(curve.ln_v * 1.15, curve.floor * 1.5)
    if finite:
        y_max = max(y_max, min(max(finite), 3 * curve.ln_v) * 1.05)
    band = 16  # the NaN band at the top of the plot area

    def x_of(step: float) -> float:
        return left + pw * step / steps

    def y_of(v: float) -> float:
        v = min(max(v, 0.0), y_max)
        return top + band + (ph - band) * (1 - v / y_max)

    nonfinite = [i for i, v in enumerate(losses) if v is None or not math.isfinite(v)]
    out = [
        f'<svg class="plot loss-curve" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'data-points="{n}" data-nonfinite="{len(nonfinite)}" data-ln-v="{curve.ln_v:.6g}" '
        f'data-floor="{curve.floor:.6g}" aria-label="{esc(labels["title"])}">',
        f'<title>{esc(labels["title"])}</title>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#ffffff" stroke="{GRID}"/>',
    ]
    # below the entropy floor: what no honest next-token predictor can reach
    y_floor = y_of(curve.floor)
    out.append(
        f'<rect class="below-floor" x="{left}" y="{y_floor:.1f}" width="{pw}" '
        f'height="{top + ph - y_floor:.1f}" fill="#fde8e8"/>'
    )
    out.append(
        f'<text x="{left + 6}" y="{top + ph - 6}" font-size="11" fill="{RED}">'
        f'{esc(labels["below_floor"])}</text>'
    )
    for tick in nice_ticks(0, y_max):
        y = y_of(tick)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" fill="{MUTED}" '
            f'text-anchor="end">{fmt_tick(tick)}</text>'
        )
    for tick in nice_ticks(0, steps, 6):
        if tick != int(tick):
            continue
        x = x_of(tick)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + ph}" y2="{top + ph + 4}" stroke="{MUTED}"/>')
        out.append(
            f'<text x="{x:.1f}" y="{top + ph + 17}" font-size="11" fill="{MUTED}" '
            f'text-anchor="middle">{int(tick)}</text>'
        )
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 8}" font-size="12" fill="{INK}" '
        f'text-anchor="middle">{esc(labels["step"])}</text>'
    )
    out.append(
        f'<text x="14" y="{top + ph / 2:.1f}" font-size="12" fill="{INK}" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + ph / 2:.1f})">{esc(labels["loss"])}</text>'
    )
    # the two reference lines, labelled at the right
    for value, color, label, cls in (
        (curve.ln_v, BLUE, labels["ln_v"], "ln-v"),
        (curve.floor, ORANGE, labels["floor"], "floor"),
    ):
        y = y_of(value)
        out.append(
            f'<line class="{cls}" x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="{color}" stroke-width="1.5" stroke-dasharray="6 4"/>'
        )
        out.append(
            f'<text x="{left + pw + 6}" y="{y + 4:.1f}" font-size="11" fill="{color}">{esc(label)}</text>'
        )
    # the curve: one polyline per run of finite losses
    runs: list[list[tuple[float, float]]] = []
    run: list[tuple[float, float]] = []
    for i, v in enumerate(losses):
        if v is None or not math.isfinite(v):
            if run:
                runs.append(run)
            run = []
        else:
            run.append((x_of(i * curve.stride), y_of(v)))
    if run:
        runs.append(run)
    for r in runs:
        if len(r) == 1:
            out.append(f'<circle class="loss" cx="{r[0][0]:.1f}" cy="{r[0][1]:.1f}" r="2.5" fill="{INK}"/>')
        else:
            pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in r)
            out.append(
                f'<polyline class="loss" points="{pts}" fill="none" stroke="{INK}" '
                f'stroke-width="1.8" stroke-linejoin="round"/>'
            )
    if nonfinite:
        # runs of NaN/inf as red bars in the band at the top
        start = prev = nonfinite[0]
        spans = []
        for at in nonfinite[1:] + [None]:
            if at is not None and at == prev + 1:
                prev = at
                continue
            spans.append((start, prev))
            if at is not None:
                start = prev = at
        for a, b in spans:
            x0 = x_of(a * curve.stride) - 2
            x1 = x_of(b * curve.stride) + 2
            out.append(
                f'<rect class="nonfinite" x="{x0:.1f}" y="{top + 2}" width="{max(x1 - x0, 4):.1f}" '
                f'height="{band - 4}" fill="{RED}" rx="2"/>'
            )
        out.append(
            f'<text x="{left + pw + 6}" y="{top + band - 4}" font-size="11" fill="{RED}">'
            f'{esc(labels["nonfinite"])}</text>'
        )
    if not finite and labels.get("empty"):
        out.append(
            f'<text class="empty" x="{left + pw / 2:.1f}" y="{top + ph / 2:.1f}" font-size="13" '
            f'fill="{RED}" text-anchor="middle">{esc(labels["empty"])}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def histogram(
    counts: Sequence[int], edges: Sequence[float], *, labels: dict, width: int = 560, height: int = 260
) -> str:
    """Bars of `counts` for the bins [edges[i], edges[i+1]); labels: title, x, y."""
    left, right, top, bottom = 44, 16, 20, 48
    pw, ph = width - left - right, height - top - bottom
    n = len(counts)
    y_max = max(max(counts, default=0), 1)
    bw = pw / max(n, 1)
    out = [
        f'<svg class="plot histogram" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'data-counts="{",".join(map(str, counts))}" aria-label="{esc(labels["title"])}">',
        f'<title>{esc(labels["title"])}</title>',
    ]
    for tick in nice_ticks(0, y_max, min(y_max, 5)):
        if tick != int(tick):
            continue
        y = top + ph * (1 - tick / y_max)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" fill="{MUTED}" '
            f'text-anchor="end">{int(tick)}</text>'
        )
    for i, c in enumerate(counts):
        h = ph * c / y_max
        x = left + i * bw
        out.append(
            f'<g class="bin" data-lo="{edges[i]:g}" data-hi="{edges[i + 1]:g}" data-count="{c}">'
            f'<rect x="{x + 2:.1f}" y="{top + ph - h:.1f}" width="{bw - 4:.1f}" height="{h:.1f}" '
            f'fill="{BLUE}" rx="2"/>'
        )
        if c:
            out.append(
                f'<text x="{x + bw / 2:.1f}" y="{top + ph - h - 4:.1f}" font-size="11" '
                f'fill="{INK}" text-anchor="middle">{c}</text>'
            )
        out.append("</g>")
    for i, e in enumerate(edges):
        x = left + i * bw
        out.append(
            f'<text x="{x:.1f}" y="{top + ph + 16}" font-size="11" fill="{MUTED}" '
            f'text-anchor="middle">{e:g}</text>'
        )
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" stroke="{MUTED}"/>')
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 8}" font-size="12" fill="{INK}" '
        f'text-anchor="middle">{esc(labels["x"])}</text>'
    )
    out.append(
        f'<text x="12" y="{top + ph / 2:.1f}" font-size="12" fill="{INK}" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + ph / 2:.1f})">{esc(labels["y"])}</text>'
    )
    out.append("</svg>")
    return "".join(out)


def rate_bars(rows: list[tuple[str, str, int, int]], *, title: str, width: int = 680) -> str:
    """Horizontal bars: rows of (key, label, passed, total), the pass rate passed / total."""
    label_w, right, row_h, top = 300, 90, 24, 8
    pw = width - label_w - right
    height = top * 2 + row_h * max(len(rows), 1)
    out = [
        f'<svg class="plot rates" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-label="{esc(title)}">',
        f'<title>{esc(title)}</title>',
    ]
    for i, (key, label, passed, total) in enumerate(rows):
        y = top + i * row_h
        rate = passed / total if total else 0.0
        color = GREEN if rate >= 0.8 else (ORANGE if rate >= 0.5 else RED)
        shown = clip(label, 42)
        out.append(
            f'<g class="rate" data-key="{esc(key)}" data-passed="{passed}" data-total="{total}">'
            f'<text x="{label_w - 8}" y="{y + 16}" font-size="12" fill="{INK}" '
            f'text-anchor="end">{esc(shown)}</text>'
            f'<rect x="{label_w}" y="{y + 4}" width="{pw}" height="{row_h - 8}" fill="{GRID}" rx="3"/>'
            f'<rect x="{label_w}" y="{y + 4}" width="{pw * rate:.1f}" height="{row_h - 8}" '
            f'fill="{color}" rx="3"/>'
            f'<text x="{label_w + pw + 6}" y="{y + 16}" font-size="12" fill="{INK}">'
            f'{100 * rate:.0f}% ({passed}/{total})</text></g>'
        )
    out.append("</svg>")
    return "".join(out)
