"""Calibration guard: median error vs published measurements, and the stated OOM case."""

from __future__ import annotations

from bench.sizing_accuracy import evaluate

# docs/sizing-accuracy.md reports the median; this bound leaves slack for small model changes
MEDIAN_ABS_ERROR_PCT_MAX = 20.0


def test_median_error_stays_under_the_reported_value() -> None:
    res = evaluate()
    assert res["n_compared"] >= 30
    assert res["median_abs_error_pct"] < MEDIAN_ABS_ERROR_PCT_MAX


def test_stated_oom_case_is_predicted_not_to_fit() -> None:
    res = evaluate()
    assert res["oom_predicted_not_to_fit"]
    oom = [r for r in res["rows"] if r.get("observed") == "OOM"]
    assert [r["id"] for r in oom] == ["fp-a800-8b-pp1dp8tp1-OOM"]
    assert not oom[0]["predicted_fits"]


def test_every_case_with_memory_is_compared() -> None:
    res = evaluate()
    assert not [r for r in res["rows"] if "skipped" in r]
