"""The memory bar: proportional, never negative, with a text alternative."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.configurator.charts import SEGMENTS, WIDTH, memory_bar, memory_bar_svg

GB = 1e9
MEM = {
    "weights": 2 * GB,
    "gradients": 2 * GB,
    "master_weights": 4 * GB,
    "optimizer_states": 8 * GB,
    "activations": 20 * GB,
    "overhead": 4 * GB,
    "total": 40 * GB,
}


def test_widths_are_proportional_to_bytes() -> None:
    bar = memory_bar(MEM, 80 * GB, 76 * GB)
    widths = {s.key: s.width for s in bar.segments}
    assert widths["gradients"] == pytest.approx(widths["weights"])
    assert widths["optimizer_states"] == pytest.approx(4 * widths["weights"])
    assert widths["activations"] == pytest.approx(10 * widths["weights"])
    # Scale: usable memory spans the whole width when the job fits.
    assert bar.usable_x == pytest.approx(WIDTH)
    assert sum(widths.values()) == pytest.approx(WIDTH / 2)
    assert bar.limit_x == pytest.approx(WIDTH * 76 / 80)
    # Segments are stacked without gaps or overlaps.
    x = 0.0
    for s in bar.segments:
        assert s.x == pytest.approx(x)
        x += s.width


def test_a_job_that_does_not_fit_runs_past_the_usable_line() -> None:
    mem = dict(MEM, activations=200 * GB)
    bar = memory_bar(mem, 80 * GB, 76 * GB)
    assert bar.overflows
    assert bar.segments[-1].x + bar.segments[-1].width == pytest.approx(WIDTH)
    assert bar.usable_x < WIDTH


def test_bad_numbers_never_make_negative_widths() -> None:
    bar = memory_bar({"weights": -5, "gradients": float("nan"), "activations": "x"}, -1, None)
    assert all(s.width >= 0 and s.x >= 0 for s in bar.segments)
    assert bar.usable_x >= 0


@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=6, max_size=6),
    st.floats(min_value=-1e12, max_value=1e12),
)
def test_any_input_gives_finite_non_negative_geometry(vals: list[float], usable: float) -> None:
    mem = {k: v for (k, _c, _l), v in zip(SEGMENTS, vals, strict=True)}
    bar = memory_bar(mem, usable)
    for s in bar.segments:
        assert s.width >= 0 and math.isfinite(s.width) and s.x + s.width <= WIDTH + 1e-6


def test_svg_has_title_desc_and_a_rect_per_segment() -> None:
    bar = memory_bar(MEM, 80 * GB, 76 * GB)
    svg = memory_bar_svg(
        bar, svg_id="mem-x", title="Memory per GPU", desc="40 GB of 80 GB", limit_label="Limit"
    )
    root = ET.fromstring(str(svg))
    ns = ""
    assert root.get("role") == "img"
    assert root.get("aria-labelledby") == "mem-x-t mem-x-d"
    assert root.find(f"{ns}title").text == "Memory per GPU"  # type: ignore[union-attr]
    assert root.find(f"{ns}desc").text == "40 GB of 80 GB"  # type: ignore[union-attr]
    segs = [r for r in root.iter("rect") if "seg" in (r.get("class") or "")]
    assert len(segs) == 6
    assert all(float(r.get("width", "0")) >= 0 for r in segs)
    assert "style=" not in str(svg)  # the CSP forbids inline styles


def test_svg_escapes_text() -> None:
    bar = memory_bar(MEM, 80 * GB)
    svg = memory_bar_svg(bar, svg_id="m", title="<b>", desc="a & b", limit_label="x")
    assert "<b>" not in str(svg) and "&lt;b&gt;" in str(svg)
