"""Inline SVG charts for the report: plain strings, no scripts, no external resources.

``grouped_hbars`` draws one row per layer with a bar per series (saved bytes,
recomputed bytes); ``hbars`` one bar per row (the partitioner comparison);
``curve`` a line chart of memory-versus-recompute points, or an empty frame
with a message when there are none yet.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
INK = "#1f2937"
MUTED = "#6b7280"
GRID = "#e5e7eb"
CHAR_W = 6.6  # average glyph width at 12px, for laying out labels
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "n/a"
    n = float(n)
    for unit in _UNITS:
        if abs(n) < 1024 or unit == _UNITS[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    raise AssertionError


def nice_ticks(vmax: float, count: int = 5) -> list[float]:
    """0, step, 2*step, ... covering ``vmax`` with a step of 1, 2 or 5 times a power of 10."""
    if vmax <= 0:
        return [0.0, 1.0]
    raw = vmax / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(vmax / step - 1e-9)
    return [i * step for i in range(n + 1)]


def byte_axis(vmax: float) -> tuple[list[float], Callable[[float], str]]:
    """Ticks in bytes on a binary unit (KiB, MiB, ...) and their labels."""
    scale, unit = 1.0, "B"
    for u in _UNITS:
        if vmax / scale < 1024 or u == _UNITS[-1]:
            unit = u
            break
        scale *= 1024
    ticks = [t * scale for t in nice_ticks(vmax / scale)]

    def label(v: float) -> str:
        x = v / scale
        return f"{x:g} {unit}" if x else "0"

    return ticks, label


def _text(
    x: float,
    y: float,
    s: str,
    *,
    anchor: str = "start",
    size: int = 12,
    fill: str = INK,
    weight: str = "normal",
    extra: str = "",
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{fill}" '
        f'text-anchor="{anchor}" font-weight="{weight}"{extra}>{escape(s)}</text>'
    )


def _clip(label: str, width: float) -> str:
    cap = max(4, int(width / CHAR_W))
    return label if len(label) <= cap else label[: cap - 1] + "…"


def _svg(width: float, height: float, body: Sequence[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(title)}" '
        f'font-family="{escape(FONT)}">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
    )


def _legend(series: Sequence[tuple[str, str]], x: float, y: float) -> list[str]:
    out = []
    for name, color in series:
        out.append(
            f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="12" height="12" rx="2" fill="{color}"/>'
        )
        out.append(_text(x + 17, y + 1, name, fill=INK))
        x += 17 + len(name) * CHAR_W + 22
    return out


def _x_axis(
    x0: float,
    x1: float,
    y0: float,
    y1: float,
    vmax: float,
    ticks: Sequence[float],
    label: Callable[[float], str],
) -> list[str]:
    out = []
    for t in ticks:
        x = x0 + (x1 - x0) * t / vmax
        out.append(
            f'<line x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y1:.1f}" '
            f'stroke="{GRID}" stroke-width="1"/>'
        )
        out.append(_text(x, y1 + 16, label(t), anchor="middle", size=11, fill=MUTED))
    return out


def grouped_hbars(
    rows: Sequence[tuple[str, Sequence[float]]],
    series: Sequence[tuple[str, str]],
    *,
    title: str,
    width: int = 860,
) -> str:
    """One row per label, one bar per series (values in bytes), a shared byte axis."""
    label_w = min(230.0, max(60.0, max((len(r[0]) for r in rows), default=4) * CHAR_W + 16))
    bar_h, gap = 11, 10
    row_h = bar_h * len(series) + gap
    top, bottom, right = 34, 30, 92
    x0, x1 = label_w, width - right
    height = top + row_h * len(rows) + bottom
    vmax = max((v for _, vals in rows for v in vals), default=0.0)
    ticks, fmt = byte_axis(vmax)
    vmax = ticks[-1]
    body = _legend(series, x0, 16)
    body += _x_axis(x0, x1, top - 4, top + row_h * len(rows) - gap + 4, vmax, ticks, fmt)
    for r, (label, vals) in enumerate(rows):
        y = top + r * row_h
        body.append(
            _text(
                x0 - 10,
                y + bar_h * len(series) / 2 + 4,
                _clip(label, label_w - 10),
                anchor="end",
                extra=f' data-row="{escape(label)}"',
            )
        )
        for s, ((name, color), v) in enumerate(zip(series, vals, strict=True)):
            w = (x1 - x0) * v / vmax if vmax else 0
            yy = y + s * bar_h
            body.append(
                f'<rect x="{x0:.1f}" y="{yy:.1f}" width="{max(w, 0.0):.1f}" '
                f'height="{bar_h - 2}" rx="2" fill="{color}">'
                f"<title>{escape(f'{label}: {name} {fmt_bytes(v)}')}</title></rect>"
            )
            if v:
                body.append(_text(x0 + w + 5, yy + bar_h - 3, fmt_bytes(v), size=10, fill=MUTED))
    return _svg(width, height, body, title)


def hbars(
    rows: Sequence[tuple[str, float | None, str, str]],
    *,
    title: str,
    width: int = 860,
) -> str:
    """One bar per row: (label, bytes or None, colour, text shown in place of a missing bar)."""
    label_w = min(280.0, max(80.0, max((len(r[0]) for r in rows), default=4) * CHAR_W + 16))
    bar_h, gap, top, bottom, right = 22, 12, 8, 30, 110
    x0, x1 = label_w, width - right
    height = top + (bar_h + gap) * len(rows) + bottom
    vmax = max((v or 0.0 for _, v, _, _ in rows), default=0.0)
    ticks, fmt = byte_axis(vmax)
    vmax = ticks[-1]
    body = _x_axis(x0, x1, top - 4, top + (bar_h + gap) * len(rows) - gap + 4, vmax, ticks, fmt)
    for r, (label, v, color, note) in enumerate(rows):
        y = top + r * (bar_h + gap)
        body.append(_text(x0 - 10, y + bar_h / 2 + 4, _clip(label, label_w - 10), anchor="end"))
        if v is None:
            body.append(_text(x0 + 4, y + bar_h / 2 + 4, note or "not available", fill=MUTED))
            continue
        w = (x1 - x0) * v / vmax if vmax else 0.0
        body.append(
            f'<rect x="{x0:.1f}" y="{y:.1f}" width="{w:.1f}" height="{bar_h}" rx="3" '
            f'fill="{color}"><title>{escape(f"{label}: {fmt_bytes(v)}")}</title></rect>'
        )
        body.append(_text(x0 + w + 6, y + bar_h / 2 + 4, fmt_bytes(v), weight="600"))
    return _svg(width, height, body, title)


def _curve_frame(x0: int, x1: int, y0: int, y1: int, height: int, cost_unit: str) -> list[str]:
    """The plot area's background and the two axis titles."""
    body = [
        f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="#fafafa" '
        f'stroke="{GRID}"/>'
    ]
    body.append(
        _text((x0 + x1) / 2, height - 8, "saved activation memory", anchor="middle", fill=MUTED)
    )
    body.append(
        _text(
            16,
            (y0 + y1) / 2,
            cost_unit,
            anchor="middle",
            fill=MUTED,
            extra=f' transform="rotate(-90 16 {(y0 + y1) / 2:.1f})"',
        )
    )
    return body


def _curve_empty_note(x0: int, x1: int, y0: int, y1: int) -> list[str]:
    """The message shown in place of a curve when there are no points."""
    return [
        _text(
            (x0 + x1) / 2,
            (y0 + y1) / 2 - 6,
            "No memory-budget sweep in this report",
            anchor="middle",
            size=14,
            fill=MUTED,
            weight="600",
        ),
        _text(
            (x0 + x1) / 2,
            (y0 + y1) / 2 + 14,
            "points (saved bytes, recompute cost) appear here when a sweep supplies them",
            anchor="middle",
            fill=MUTED,
        ),
    ]


def _y_grid(x0: int, x1: int, y0: int, y1: int, ymax: float, ticks: Sequence[float]) -> list[str]:
    """A horizontal grid line and a label per y tick."""
    body = []
    for t in ticks:
        y = y1 - (y1 - y0) * t / ymax
        body.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="{GRID}"/>')
        body.append(_text(x0 - 6, y + 4, f"{t:g}", anchor="end", size=11, fill=MUTED))
    return body


def _curve_line(
    pts: Sequence[tuple[float, float]],
    xy: Callable[[tuple[float, float]], tuple[float, float]],
    color: str,
    cost_unit: str,
) -> list[str]:
    """The polyline through the points (already in plot coordinates via ``xy``) and a dot
    with a tooltip per point."""
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(map(xy, pts))
    )
    body = [f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2"/>']
    for p in pts:
        x, y = xy(p)
        body.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}">'
            f"<title>{escape(f'{fmt_bytes(p[0])}, {p[1]:g} {cost_unit}')}</title></circle>"
        )
    return body


def curve(
    points: Sequence[tuple[float, float]] | None,
    *,
    cost_unit: str,
    title: str,
    width: int = 860,
    height: int = 240,
    color: str = "#2563eb",
) -> str:
    """Saved bytes (x) against recompute cost (y); an empty frame with a note if no points."""
    left, right, top, bottom = 70, 24, 16, 46
    x0, x1, y0, y1 = left, width - right, top, height - bottom
    body = _curve_frame(x0, x1, y0, y1, height, cost_unit)
    if not points:
        body += _curve_empty_note(x0, x1, y0, y1)
        return _svg(width, height, body, title)
    pts = sorted((float(a), float(b)) for a, b in points)
    xticks, xfmt = byte_axis(max(p[0] for p in pts))
    yticks = nice_ticks(max(p[1] for p in pts))
    xmax, ymax = xticks[-1] or 1.0, yticks[-1] or 1.0
    body += _x_axis(x0, x1, y0, y1, xmax, xticks, xfmt)
    body += _y_grid(x0, x1, y0, y1, ymax, yticks)

    def xy(p: tuple[float, float]) -> tuple[float, float]:
        return x0 + (x1 - x0) * p[0] / xmax, y1 - (y1 - y0) * p[1] / ymax

    body += _curve_line(pts, xy, color, cost_unit)
    return _svg(width, height, body, title)
