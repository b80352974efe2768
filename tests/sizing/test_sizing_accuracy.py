"""Calibration guard: error, range coverage and fit verdicts vs published measurements."""

from __future__ import annotations

from bench.sizing_accuracy import evaluate, load_public

# issue 16's targets on the public set (old + widened)
MEDIAN_ABS_ERROR_PCT_MAX = 15.0
INSIDE_RANGE_MIN = 0.80
RANGE_RATIO_MAX = 1.6


def test_median_error_and_range_coverage_meet_the_targets() -> None:
    res = evaluate()
    assert res["n_compared"] >= 38
    assert res["median_abs_error_pct"] <= MEDIAN_ABS_ERROR_PCT_MAX
    assert res["inside_share"] >= INSIDE_RANGE_MIN
    assert res["max_range_ratio"] <= RANGE_RATIO_MAX + 1e-6


def test_every_fit_verdict_is_right() -> None:
    res = evaluate()
    assert res["fit_agreement"] == res["n_verdicts"]
    for r in res["rows"]:
        if r.get("observed") == "ran":
            assert r["fit"] in ("fits", "tight"), r["id"]


def test_stated_oom_cases_are_predicted_not_to_fit() -> None:
    res = evaluate()
    assert res["oom_predicted_not_to_fit"]
    oom = [r for r in res["rows"] if r.get("observed") == "OOM"]
    assert "fp-a800-8b-pp1dp8tp1-OOM" in [r["id"] for r in oom]
    assert all(r["fit"] == "does_not_fit" and not r["predicted_fits"] for r in oom)


def test_every_case_with_memory_is_compared() -> None:
    res = evaluate()
    assert not [r for r in res["rows"] if "skipped" in r]


def test_public_cases_name_source_metric_and_reading() -> None:
    for c in load_public():
        assert c["source"].startswith("https://"), c["id"]
        assert c["metric"] and c["how_read"] and c["config"]["framework"]
        assert c["outcome"] in ("ran", "OOM")
