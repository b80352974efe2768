"""The recommendation's judgment through the public ``size()`` contract, and notes as codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.api.sizing import router
from app.catalog.specs import SELF_SERVE_MAX_NODES
from app.clock import FixedClock
from app.sizing import SizingError, size
from app.sizing import layout as layout_mod
from app.sizing.messages import CATALOG
from app.sizing.recommend import NEAR_CHEAPEST, YEAR_PREMIUM

YEAR_DAYS = 12 * 730 / 24
B405_15T = {"model": {"preset": "llama-3.1-405b"}, "tokens": 15e12}
B70_5T = {"model": {"preset": "llama-3.1-70b"}, "tokens": 5e12}
B70_1T_1DAY = {"model": {"preset": "llama-3.1-70b"}, "tokens": 1e12, "max_days": 1}


def _rec_option(out: dict[str, Any]) -> dict[str, Any]:
    rec = out["recommendation"]
    return next(o for o in out["options"] if o["sku"] == rec["sku"])


def _codes(out: dict[str, Any]) -> list[str]:
    return [c["code"] for c in out["recommendation"]["reason_codes"]]


# --- never a platform the customer did not accept ------------------------------------------


@pytest.mark.parametrize(
    "req", [B405_15T, B70_5T, B70_1T_1DAY, {"model": {"params": 7e9}, "tokens": 1e12}]
)
def test_rocm_is_never_the_headline_unless_accepted(req: dict[str, Any]) -> None:
    assert size(req)["recommendation"]["sku"] != "mi355x"


def test_only_an_unaccepted_platform_fits_means_no_headline_node() -> None:
    out = size({"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11, "sku": "mi355x"})
    rec = out["recommendation"]
    assert out["options"][0]["fits"]
    assert rec["sku"] is None and rec["nodes"] is None
    # the customer picked this node (every node fits an 8B job): not "only it fits, talk to
    # sales", but what to tick to check it out
    assert rec["talk_to_sales"] is False
    assert rec["reason_code"]["code"] == "reason.picked_unaccepted_platform"
    assert "ROCm" in rec["reason"] and "Only" not in rec["reason"]
    ok = size(
        {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11, "sku": "mi355x", "rocm_ok": True}
    )
    assert ok["recommendation"]["sku"] == "mi355x"


# --- deadlines -------------------------------------------------------------------------------


def test_a_deadline_is_met_whenever_some_option_meets_it() -> None:
    out = size(B70_1T_1DAY)
    assert any(o.get("meets_deadline") for o in out["options"])
    best = _rec_option(out)
    assert best["meets_deadline"] is True and best["training_days"] <= 1.0001
    # meeting it takes a cluster beyond self-serve: that is a sales conversation
    assert out["recommendation"]["talk_to_sales"] is True
    assert _codes(out)[0] == "reason.sales_deadline"


def test_a_self_serve_deadline_stays_self_serve() -> None:
    out = size({"model": {"preset": "llama-3.1-8b"}, "tokens": 1e12, "max_days": 10})
    best = _rec_option(out)
    assert best["meets_deadline"] and not out["recommendation"]["talk_to_sales"]
    assert best["nodes"] <= SELF_SERVE_MAX_NODES
    assert _codes(out)[0] == "reason.deadline"


def test_when_no_option_meets_the_deadline_we_say_so() -> None:
    out = size({**B405_15T, "max_days": 1})
    assert not any(o.get("meets_deadline") for o in out["options"])
    assert _codes(out)[0] == "reason.deadline_missed"
    assert "Nothing finishes within 1 day;" in out["recommendation"]["reason"]
    accepted = [o for o in out["options"] if o["fits"] and o["sku"] != "mi355x"]
    # issue 16: an option whose upper memory estimate fits beats a tight one
    sure = [o for o in accepted if o["fit"] == "fits"] or accepted
    assert _rec_option(out)["training_days"] == min(o["training_days"] for o in sure)


# --- near-cheapest, soonest, fewest nodes for the same months ---------------------------------


@pytest.mark.parametrize(
    "req",
    [
        {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e12},
        {"model": {"params": 7e9}, "tokens": 1e12},
        {"model": {"preset": "qwen2.5-14b"}, "tokens": 2e12},
    ],
)
def test_among_plans_within_5_percent_of_the_cheapest_the_soonest_wins(req: dict[str, Any]) -> None:
    out = size(req)
    best = _rec_option(out)
    pool = [
        o for o in out["options"] if o["fits"] and not o["talk_to_sales"] and o["sku"] != "mi355x"
    ]
    cheapest = min(o["rental_cost_usd"] for o in pool)
    near = [o for o in pool if o["rental_cost_usd"] <= cheapest * (1 + NEAR_CHEAPEST)]
    assert best in near
    assert best["training_days"] == min(o["training_days"] for o in near)


def test_fewest_nodes_that_finish_within_the_same_rented_months() -> None:
    out = size(B70_5T)
    best = _rec_option(out)
    n, months = best["nodes"], best["months"]
    # one node fewer (same layout efficiency) would need more months
    hours_fewer = best["training_days"] * 24 * n / (n - 1)
    assert hours_fewer > months * 730
    assert 0 < best["utilisation_of_rented_time"] <= 1
    assert out["recommendation"]["utilisation_of_rented_time"] == best["utilisation_of_rented_time"]
    assert "reason.utilisation" in _codes(out)


def test_a_run_past_12_months_is_not_the_headline_when_more_nodes_finish_within_a_year() -> None:
    out = size(B70_5T)
    best = _rec_option(out)
    assert best["training_days"] <= YEAR_DAYS
    assert 1 < best["nodes"] <= SELF_SERVE_MAX_NODES
    assert not out["recommendation"]["talk_to_sales"]
    cheapest = min(
        o["rental_cost_usd"] for o in out["options"] if o["fits"] and o["sku"] != "mi355x"
    )
    assert best["rental_cost_usd"] <= cheapest * (1 + YEAR_PREMIUM) * 1.2


def test_nothing_self_serve_within_12_months_headlines_talk_to_sales_with_the_cluster() -> None:
    out = size(B405_15T)
    rec = out["recommendation"]
    best = _rec_option(out)
    assert rec["talk_to_sales"] is True
    assert best["nodes"] > SELF_SERVE_MAX_NODES
    assert best["training_days"] <= YEAR_DAYS
    assert rec["reason_code"]["code"] == "reason.sales_cluster"


# --- the single-GPU hint ----------------------------------------------------------------------


def test_single_gpu_only_when_one_gpu_finishes_within_a_month() -> None:
    small = size({"model": {"preset": "llama-3.1-8b"}, "tokens": 1e9, "method": "lora"})
    assert small["single_gpu_offer"] is True
    days = small["recommendation"]["single_gpu_days"]
    assert 0 < days < 30
    # under a day the sentence says hours (never "0.9 days" for 22 hours, nor "0.0 days")
    said = f"{days * 24:.1f} hours" if days < 1 else f"{days:.1f} days"
    assert said in small["recommendation"]["reason"]
    big = size({"model": {"preset": "llama-3.1-8b"}, "tokens": 1e12, "method": "lora"})
    assert big["single_gpu_offer"] is False
    assert "single-GPU" not in big["recommendation"]["reason"]


def test_single_gpu_respects_the_deadline() -> None:
    req = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e10, "method": "lora"}
    days = size(req)["recommendation"]["single_gpu_days"]
    assert size({**req, "max_days": days * 2})["single_gpu_offer"] is True
    assert size({**req, "max_days": days / 2})["single_gpu_offer"] is False


# --- the two rates ----------------------------------------------------------------------------


def test_both_rates_are_on_every_fitting_option_under_different_names() -> None:
    for o in size({"model": {"preset": "llama-3.1-8b"}, "tokens": 1e12})["options"]:
        run, rate = o["effective_usd_per_gpu_hour"], o["usd_per_gpu_hour_24_7"]
        assert run >= rate * 0.999  # whole months spread over the run never cost less


# --- notes as codes ---------------------------------------------------------------------------


def _all_codes(out: dict[str, Any]) -> list[dict[str, Any]]:
    found = [
        *out["assumption_codes"],
        *out["warning_codes"],
        *out["recommendation"]["reason_codes"],
    ]
    for o in out["options"]:
        found += o["note_codes"]
    return found


@pytest.mark.parametrize(
    "req",
    [B405_15T, B70_1T_1DAY, {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e9, "method": "lora"}],
)
def test_every_sentence_has_a_code_and_renders_in_chinese(req: dict[str, Any]) -> None:
    en = size(req)
    zh = size(req, lang="zh_CN")
    assert len(en["assumptions"]) == len(en["assumption_codes"])
    assert len(en["warnings"]) == len(en["warning_codes"])
    for o in en["options"]:
        assert len(o["notes"]) == len(o["note_codes"])
    for c in _all_codes(en):
        assert c["code"] in CATALOG and isinstance(c["params"], dict)
    # same codes, prose in Chinese
    assert _all_codes(en) == _all_codes(zh)
    assert zh["recommendation"]["reason"] != en["recommendation"]["reason"]
    assert re.search(r"[\u4e00-\u9fff]", zh["recommendation"]["reason"])
    assert all(re.search(r"[\u4e00-\u9fff]", a) for a in zh["assumptions"])


def test_assumptions_are_built_from_the_constants_they_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    req = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11}
    before = " ".join(size(req)["assumptions"])
    assert f"PP {layout_mod.PP_EFF}" in before
    from app.sizing import engine

    monkeypatch.setattr(layout_mod, "PP_EFF", 0.5)
    engine.cache_clear()  # answers computed under a patched constant must not outlive it
    try:
        assert "PP 0.5" in " ".join(size(req)["assumptions"])
    finally:
        engine.cache_clear()


def test_validation_errors_carry_codes() -> None:
    with pytest.raises(SizingError) as ei:
        size({"model": {"preset": "llama-3.1-8b"}, "tokens": 1e12, "seq_len": 1, "colour": 1})
    d = ei.value.as_dict()
    by_field = {e["field"]: e for e in d["errors"]}
    assert by_field["seq_len"]["code"] == "request.range"
    assert by_field["seq_len"]["params"] == {"lo": "16", "hi": "1048576", "got": "1"}
    assert by_field["colour"]["code"] == "request.unknown_field"


@pytest.fixture(scope="module")
def api() -> TestClient:
    app = FastAPI()
    app.include_router(router)
    # the router reads the app's clock (the customer's today for finish dates); no engine:
    # the answer then carries no delivery dates, as when the catalog cannot be read
    app.state.clock = FixedClock(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))
    return TestClient(app)


def test_api_answers_in_the_accept_language(api: TestClient) -> None:
    req = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11}
    zh = api.post("/api/v1/sizing", json=req, headers={"Accept-Language": "zh-CN,zh;q=0.9"})
    en = api.post("/api/v1/sizing", json=req)
    assert zh.status_code == en.status_code == 200
    assert re.search(r"[\u4e00-\u9fff]", zh.json()["recommendation"]["reason"])
    assert not re.search(r"[\u4e00-\u9fff]", en.json()["recommendation"]["reason"])
    assert zh.json()["recommendation"]["reason_code"] == en.json()["recommendation"]["reason_code"]
    bad = api.post(
        "/api/v1/sizing", json={**req, "seq_len": 1}, headers={"Accept-Language": "zh-CN"}
    )
    err = bad.json()["detail"]["errors"][0]
    assert bad.status_code == 422 and err["code"] == "request.range"
    assert "1048576" in err["message"] and re.search(r"[\u4e00-\u9fff]", err["message"])


def test_openapi_describes_every_request_field_with_bounds(api: TestClient) -> None:
    spec = api.get("/openapi.json").json()
    body = spec["paths"]["/api/v1/sizing"]["post"]["requestBody"]["content"]["application/json"]
    props = body["schema"]["properties"]
    for name in (
        "model",
        "tokens",
        "seq_len",
        "micro_batch_size",
        "max_days",
        "rocm_ok",
        "parallelism",
    ):
        assert name in props
    assert props["tokens"]["exclusiveMinimum"] == 0 and props["tokens"]["maximum"] == 1e15
    assert props["seq_len"]["minimum"] == 16
    model = props["model"]["properties"]
    assert set(model) == {"preset", "params", "architecture"}
    assert "$ref" not in json.dumps(body)


def test_cli_speaks_the_language_asked_for() -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.sizing",
            "--preset",
            "llama-3.1-8b",
            "--tokens",
            "1e11",
            "--lang",
            "zh_CN",
            "--indent",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert re.search(r"[\u4e00-\u9fff]", out["recommendation"]["reason"])
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.sizing",
            "--preset",
            "llama-3.1-8b",
            "--tokens",
            "1e11",
            "--seq-len",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert json.loads(bad.stderr)["errors"][0]["code"] == "request.range"


# --- the answer cache (issue 17) ----------------------------------------------------------------


def test_identical_normalised_requests_share_one_cached_answer() -> None:
    from app.sizing import engine

    engine.cache_clear()
    req = {"model": {"preset": "qwen2.5-7b"}, "tokens": 3e11}
    first = size(req)
    size({**req, "seq_len": 4096, "method": "full", "parallelism": "auto"})  # the same job
    assert engine.cache_len() == 1
    size(req, prices={"hgx-h100": 1})  # other prices: another answer
    assert engine.cache_len() == 2
    # callers get their own copies: changing one answer never changes the next
    first["options"][0]["layout"]["tp"] = 99
    first["options"][0]["storage"]["dataset_bytes"] = -1
    first["recommendation"]["reason_codes"][0]["params"]["nodes"] = -1
    again = size(req)
    assert again["options"][0]["layout"]["tp"] != 99
    assert again["options"][0]["storage"]["dataset_bytes"] > 0
    assert again["recommendation"]["reason_codes"][0]["params"]["nodes"] > 0


def test_the_apps_openapi_document_shows_the_sizing_request(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/api/v1/sizing"]["post"]
    props = op["requestBody"]["content"]["application/json"]["schema"]["properties"]

    def bound(prop: dict[str, Any], key: str) -> Any:
        for alt in [prop, *prop.get("anyOf", [])]:
            if key in alt:
                return alt[key]
        return None

    assert bound(props["max_days"], "maximum") == 3650
    assert bound(props["nodes"], "maximum") == 1024
    assert bound(props["micro_batch_size"], "minimum") == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tokens": True}, "tokens"),
        ({"seq_len": True}, "seq_len"),
        ({"global_batch_size": True}, "global_batch_size"),
        ({"mfu": False}, "mfu"),
        ({"model": {"params": True}}, "model.params"),
        ({"parallelism": {"tp": True}}, "parallelism.tp"),
    ],
)
def test_true_or_false_is_not_a_number(api: TestClient, body: dict[str, Any], field: str) -> None:
    """JSON booleans are refused where a number is expected (lax parsing would have sized
    ``"tokens": true`` as a one-token run); switches still take them."""
    req = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11, **body}
    bad = api.post("/api/v1/sizing", json=req, headers={"Accept-Language": "zh-CN"})
    assert bad.status_code == 422
    err = bad.json()["detail"]["errors"][0]
    assert err["field"] == field and err["code"] == "request.bool_not_number"
    assert re.search(r"[\u4e00-\u9fff]", err["message"])
    ok = api.post(
        "/api/v1/sizing",
        json={"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11, "compile": True},
    )
    assert ok.status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tokens": "1e12"}, "tokens"),
        ({"tokens": "100000000000"}, "tokens"),
        ({"seq_len": "128"}, "seq_len"),
        ({"nodes": "2"}, "nodes"),
        ({"mfu": "0.4"}, "mfu"),
        ({"max_days": "30"}, "max_days"),
        ({"model": {"params": "7e9"}}, "model.params"),
        ({"parallelism": {"tp": "2"}}, "parallelism.tp"),
    ],
)
def test_text_is_not_a_number(api: TestClient, body: dict[str, Any], field: str) -> None:
    """A strict API: ``"tokens": "1e12"`` is text where the schema says number, refused with
    the field and a code (lax parsing sized it as 1e12), in the reader's language."""
    req = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11, **body}
    for lang, script in (("en", r"JSON number"), ("zh-CN", r"[\u4e00-\u9fff]")):
        bad = api.post("/api/v1/sizing", json=req, headers={"Accept-Language": lang})
        assert bad.status_code == 422
        errs = bad.json()["detail"]["errors"]
        assert [(e["field"], e["code"]) for e in errs] == [(field, "request.string_not_number")]
        assert re.search(script, errs[0]["message"])


def test_text_still_goes_where_text_is_meant(api: TestClient) -> None:
    """Strings stay strings (a preset id, a node type, the ``"auto"`` layout), and a whole
    number sent as ``4096.0`` is still a whole number."""
    req = {
        "model": {"preset": "llama-3.1-8b"},
        "tokens": 1e11,
        "sku": "hgx-b200",
        "parallelism": "auto",
        "seq_len": 4096.0,
    }
    assert api.post("/api/v1/sizing", json=req).status_code == 200


@pytest.mark.parametrize("value", [1e20, 1e308, -1e20])
def test_a_huge_whole_number_is_out_of_range_not_invalid(api: TestClient, value: float) -> None:
    """``"global_batch_size": 1e20`` is a whole number beyond the bound: the answer says the
    range, as for 1e9 (it said "is not a valid value")."""
    req = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11, "global_batch_size": value}
    r = api.post("/api/v1/sizing", json=req)
    assert r.status_code == 422
    err = r.json()["detail"]["errors"][0]
    assert err["field"] == "global_batch_size" and err["code"] == "request.range"
    assert "must be between 1 and 16777216" in err["message"]
