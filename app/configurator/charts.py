"""Server-rendered SVG: the stacked memory-per-GPU bar against the GPU's usable memory.

Pure geometry (``memory_bar``) is separate from the markup (``memory_bar_svg``) so the
proportions can be tested without parsing SVG. Colours come from CSS classes
(``.seg-weights`` … in static/configurator.css, using the ``--c-*`` variables of app.css),
never from inline styles (the CSP forbids them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from app.errors import N_

# (key in the engine's memory_per_gpu_bytes, CSS class suffix, label)
SEGMENTS: tuple[tuple[str, str, str], ...] = (
    ("weights", "weights", N_("Weights (working copy)")),
    ("gradients", "grads", N_("Gradients")),
    ("master_weights", "master", N_("Master weights (FP32)")),
    ("optimizer_states", "optim", N_("Optimizer states")),
    ("activations", "act", N_("Activations")),
    ("overhead", "over", N_("Framework overhead")),
)

WIDTH = 600.0
BAR_Y = 8.0
BAR_H = 28.0
HEIGHT = 44.0


@dataclass(frozen=True)
class Segment:
    key: str
    css: str
    label: str
    bytes: float
    x: float
    width: float


@dataclass(frozen=True)
class Bar:
    segments: tuple[Segment, ...]
    total: float
    usable: float
    limit: float
    usable_x: float
    limit_x: float
    scale_max: float

    @property
    def overflows(self) -> bool:
        return self.total > self.limit


def _clean(v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return 0.0
    if not math.isfinite(f) or f < 0:
        return 0.0
    return f


def memory_bar(mem: dict[str, Any], usable: float, limit: float | None = None) -> Bar:
    """Lay out the stacked bar: widths proportional to bytes, never negative.

    The scale is the larger of usable memory and the total, so a job that does not fit
    runs past the usable-memory line instead of being clipped.
    """
    values = [(k, css, label, _clean(mem.get(k))) for k, css, label in SEGMENTS]
    total = sum(v for *_, v in values)
    usable_f = _clean(usable)
    limit_f = _clean(limit) if limit is not None else usable_f
    scale_max = max(total, usable_f, limit_f, 1.0)
    k = WIDTH / scale_max
    x = 0.0
    segs = []
    for key, css, label, v in values:
        w = v * k
        segs.append(Segment(key, css, label, v, x, w))
        x += w
    return Bar(
        segments=tuple(segs),
        total=total,
        usable=usable_f,
        limit=limit_f,
        usable_x=usable_f * k,
        limit_x=limit_f * k,
        scale_max=scale_max,
    )


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f}"


def memory_bar_svg(
    bar: Bar,
    *,
    svg_id: str,
    title: str,
    desc: str,
    limit_label: str,
) -> Markup:
    """The bar as inline SVG with <title>/<desc> (labelled by them for screen readers)."""
    parts = [
        f'<svg class="membar" viewBox="0 0 {WIDTH:.0f} {HEIGHT:.0f}" '
        f'preserveAspectRatio="none" role="img" '
        f'aria-labelledby="{escape(svg_id)}-t {escape(svg_id)}-d" focusable="false">',
        f'<title id="{escape(svg_id)}-t">{escape(title)}</title>',
        f'<desc id="{escape(svg_id)}-d">{escape(desc)}</desc>',
        f'<rect class="track" x="0" y="{BAR_Y}" width="{bar.usable_x:.2f}" height="{BAR_H}"/>',
    ]
    for s in bar.segments:
        if s.width <= 0:
            continue
        parts.append(
            f'<rect class="seg seg-{s.css}" x="{s.x:.2f}" y="{BAR_Y}" '
            f'width="{s.width:.2f}" height="{BAR_H}"/>'
        )
    # The usable-memory edge and the fit limit (headroom marker).
    parts.append(
        f'<line class="usable-line" x1="{bar.usable_x:.2f}" x2="{bar.usable_x:.2f}" '
        f'y1="2" y2="{HEIGHT - 2:.0f}"/>'
    )
    parts.append(
        f'<line class="limit-line" x1="{bar.limit_x:.2f}" x2="{bar.limit_x:.2f}" '
        f'y1="2" y2="{HEIGHT - 2:.0f}"><title>{escape(limit_label)}</title></line>'
    )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every interpolated text is escaped above
