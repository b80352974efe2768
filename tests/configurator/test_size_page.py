"""/size over HTTP: full page, htmx fragment, errors next to fields, the /deploy hand-off."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.configurator import forms

HX = {"HX-Request": "true"}


def _use_links(html: str) -> list[str]:
    return [m.replace("&amp;", "&") for m in re.findall(r'href="(/deploy\?[^"]+)"', html)]


def test_first_visit_shows_form_and_results(client: TestClient) -> None:
    r = client.get("/size")
    assert r.status_code == 200
    html = r.text
    assert '<form id="size-form"' in html and 'action="/size" method="get"' in html
    assert 'hx-get="/size"' in html and 'hx-push-url="true"' in html
    assert 'hx-trigger="input changed delay:400ms, change"' in html
    assert "<!doctype html>" in html.lower()
    # A card per SKU, each with a chart that has a text alternative.
    for sku in ("hgx-h100", "hgx-h200", "hgx-b200", "hgx-b300", "mi355x", "gb300-nvl72"):
        assert f'id="card-{sku}"' in html
        assert f'aria-labelledby="mem-{sku}-t mem-{sku}-d"' in html
    assert "Our recommendation" in html
    assert "/cluster-request?sku=gb300-nvl72&amp;nodes=1" in html  # the rack: sales
    assert "style=" not in html  # CSP: no inline styles


def test_htmx_request_gets_only_the_fragment(client: TestClient) -> None:
    r = client.get("/size?model=llama-3.1-70b&tokens=2T", headers=HX)
    assert r.status_code == 200
    assert "<html" not in r.text and 'id="results-h"' in r.text
    assert 'hx-swap-oob="true"' in r.text
    assert "HX-Request" in r.headers["vary"]
    # History restore gets the full page.
    r = client.get(
        "/size?model=llama-3.1-70b", headers={**HX, "HX-History-Restore-Request": "true"}
    )
    assert "<html" in r.text


def test_results_change_with_the_inputs(client: TestClient) -> None:
    small = client.get("/size?model=llama-3.1-8b&tokens=100B", headers=HX).text
    big = client.get("/size?model=llama-3.1-405b&tokens=15T", headers=HX).text
    assert small != big
    assert "405" in big


def test_invalid_input_is_shown_next_to_its_field_and_kept(client: TestClient) -> None:
    r = client.get("/size?model=params&params=huge&tokens=1T&mfu=250")
    assert r.status_code == 422
    html = r.text
    assert 'value="huge"' in html and 'value="250"' in html
    assert re.search(r'id="f-params"[^>]*aria-invalid="true"', html)
    assert re.search(r'id="f-params"[^>]*aria-describedby="[^"]*err-params"', html)
    assert '<small id="e-params" class="error" role="alert">' in html
    assert '<small id="e-mfu" class="error" role="alert">' in html
    assert "Our recommendation" not in html
    # Live: the same errors arrive out-of-band into the field slots.
    r = client.get("/size?model=params&params=huge&tokens=1T", headers=HX)
    assert r.status_code == 422
    assert re.search(r'<div id="err-params" class="err-slot" hx-swap-oob="true"><small', r.text)


def test_engine_errors_land_on_a_field(client: TestClient) -> None:
    # Longer context than the preset supports: the engine says so, next to seq_len.
    r = client.get("/size?model=llama-3.1-8b&tokens=1T&seq_len=10000000")
    assert r.status_code == 422
    assert 'id="e-seq_len"' in r.text


def test_use_this_carries_the_choice_into_deploy(client: TestClient) -> None:
    r = client.get("/size?model=llama-3.1-70b&tokens=1T")
    links = _use_links(r.text)
    assert links, "a fitting card links to /deploy"
    q = parse_qs(urlsplit(links[0]).query)
    assert set(q) == {
        "sku",
        "nodes",
        "note_model_size",
        "note_token_budget",
        "note_node_count",
        "note_private_network",
        "note_comm_pattern",
        "sizing",
    }
    assert q["note_model_size"] == ["70.6B parameters"]
    assert q["note_token_budget"] == ["1T tokens"]
    assert q["note_node_count"] == q["nodes"]
    assert q["note_private_network"] == ["1" if int(q["nodes"][0]) > 1 else "0"]
    sizing = parse_qs(q["sizing"][0])
    assert sizing["model"] == ["llama-3.1-70b"] and sizing["tokens"] == ["1T"]
    # The GB300 rack never gets a self-serve link.
    assert not any("sku=gb300-nvl72" in link for link in links)
    # The notes are prefilled in the reader's language (issue 19, defect 7).
    client.cookies.set("lang", "zh_CN")
    zh = parse_qs(
        urlsplit(_use_links(client.get("/size?model=llama-3.1-70b&tokens=1T").text)[0]).query
    )
    assert zh["note_model_size"] == ["70.6B 参数"] and zh["note_token_budget"] == ["1T token"]


def test_lora_points_to_single_gpu_offers(client: TestClient) -> None:
    r = client.get("/size?model=llama-3.1-8b&tokens=1B&method=lora")
    assert r.status_code == 200
    assert "single-GPU offer" in r.text and "22.6 hours" in r.text  # under a day: in hours


def test_chinese_page(client: TestClient) -> None:
    client.cookies.set("lang", "zh_CN")
    r = client.get("/size")
    assert r.status_code == 200
    assert 'lang="zh-CN"' in r.text
    assert "配置估算" in r.text
    # the error summary joins label and message with the full-width colon
    bad = client.get("/size?model=llama-3.1-8b&tokens=abc")
    assert bad.status_code == 422
    assert re.search(r'href="#f-tokens">训练 token 数</a>：请输入', bad.text), bad.text


_values = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["1T", "0", "-1", "1e999", "nan", "auto", "explicit", "arch", "params"]),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.dictionaries(
        st.one_of(st.sampled_from(forms.FIELDS), st.text(max_size=8)), _values, max_size=10
    ),
    st.booleans(),
)
def test_no_query_string_causes_a_server_error(
    client: TestClient, q: dict[str, str], htmx: bool
) -> None:
    r = client.get("/size", params=q, headers=HX if htmx else {}, follow_redirects=False)
    if r.status_code == 303:  # empty fields dropped from the address, once
        assert not htmx
        r = client.get(r.headers["location"], follow_redirects=False)
    assert r.status_code in (200, 422), (q, r.status_code)


def test_fp4_can_be_asked_for_and_is_refused_on_a_gpu_without_fp4(client: TestClient) -> None:
    r = client.get("/size?model=llama-3.1-8b&tokens=100B&precision=fp4", headers=HX)
    assert r.status_code == 200
    assert 'id="card-hgx-b300"' in r.text
    r = client.get("/size?model=llama-3.1-8b&tokens=100B&precision=fp4&sku=hgx-h100")
    assert r.status_code == 422
    assert 'id="e-precision"' in r.text
    assert 'value="fp4"' in r.text and "checked" in r.text


TIGHT_Q = (
    "/size?model=llama-3.1-8b&tokens=100B&nodes=1&mfu=0.4&seq_len=6144&mbs=5&recompute=none"
    "&par=explicit&sharding=zero3&shard_group=8"
)


def _cards(html: str) -> dict[str, str]:
    parts = re.split(r'<article class="card sku-card', html)[1:]
    return {re.search(r'id="card-([a-z0-9-]+)"', p).group(1): p for p in parts}  # type: ignore[union-attr]


def test_every_card_shows_its_memory_range(client: TestClient) -> None:
    html = client.get("/size?model=llama-3.1-70b&tokens=2T").text
    for sku, card in _cards(html).items():
        if "Does not fit" in card:
            continue
        assert re.search(r"likely [\d.,]+ GB per GPU, between [\d.,]+ and [\d.,]+ GB", card), sku


def test_a_tight_option_has_a_badge_an_explanation_and_the_headline_a_warning(
    client: TestClient,
) -> None:
    r = client.get(TIGHT_Q)
    assert r.status_code == 200, r.text
    cards = _cards(r.text)
    tight = [sku for sku, c in cards.items() if '<span class="badge warn">Tight</span>' in c]
    assert tight, "some card is tight for this pinned layout"
    for sku in tight:
        assert "upper estimate" in cards[sku] and "trial run" in cards[sku]
        assert '<span class="badge ok">Fits</span>' not in cards[sku]
    # nothing surely fits: the headline is tight, with its warning set apart
    assert 'class="flash flash-warning tight-warning"' in r.text
    zh = client.get(TIGHT_Q, headers={"Accept-Language": "zh-CN"}).text
    assert "偏紧" in zh and "估计上限" in zh and "最可能需要" in zh
    assert "upper estimate" not in zh


def test_a_form_sent_without_js_lands_on_the_short_shareable_url(client: TestClient) -> None:
    """Issue 19, defect 10: the address a customer copies carries no empty parameters."""
    query = {k: "" for k in forms.FIELDS} | {"model": "llama-3.1-70b", "tokens": "300B"}
    r = client.get("/size", params=query, follow_redirects=False)
    assert r.status_code == 303
    target = r.headers["location"]
    assert "=&" not in target and not target.endswith("=")
    assert parse_qs(urlsplit(target).query)["tokens"] == ["300B"]
    page = client.get(target)
    assert page.status_code == 200 and 'value="300B"' in page.text
    # htmx gets the same short address to push into the history.
    r = client.get("/size", params=query, headers={"HX-Request": "true"})
    assert r.status_code == 200
    assert r.headers["HX-Push-Url"] == target


def test_counts_use_plural_forms_not_s_in_brackets(client: TestClient) -> None:
    """Issue 19, defect 7: "1 month per node", "2 nodes", never "month(s)" or "node(s)"."""
    r = client.get("/size", params={"model": "llama-3.1-8b", "tokens": "1T"})
    assert r.status_code == 200
    assert "(s)" not in r.text
    assert "1 month per node" in r.text and "month per node" in r.text
    assert re.search(r"\b\d+ nodes?, \d+ GPUs", r.text)
    client.cookies.set("lang", "zh_CN")
    zh = client.get("/size", params={"model": "llama-3.1-8b", "tokens": "1T"}).text
    assert "(s)" not in zh and "每个节点租 1 个月" in zh


def test_break_even_that_rounds_to_100_percent_reads_all_month() -> None:
    """Issue 19, defect 7: never "busy more than 100 % of the rented time"."""
    from app.configurator.cards import _verdict
    from app.web.i18n import set_locale

    set_locale("en")
    ok, text = _verdict(
        {"rental_cost_usd": 100.0, "hourly_alternative_usd": 90.0, "break_even_utilisation": 0.998}
    )
    assert not ok and "busy all month" in text and "100 %" not in text
    ok, text = _verdict(
        {"rental_cost_usd": 100.0, "hourly_alternative_usd": 90.0, "break_even_utilisation": 0.8}
    )
    assert "more than 80 %" in text


def test_digits_that_are_not_typed_digits_are_refused_at_their_field(client: TestClient) -> None:
    """A superscript or circled digit is not a number the customer typed ("mbs=²" was priced
    as micro-batch 2, "seq_len=①k" as 1024, "nodes=¹" as one node), and a whole number with
    too many digits says how large it may be, not that digits are wrong (EN + ZH)."""
    base = {"model": "llama-3.1-8b", "tokens": "1T"}
    for name, bad in (("gbs", "²"), ("mbs", "²"), ("seq_len", "①k"), ("nodes", "¹")):
        r = client.get("/size", params={**base, name: bad}, headers=HX)
        assert r.status_code == 422, (name, bad)
        assert f'id="e-{name}"' in r.text and "Enter a number using the digits 0–9." in r.text
    r = client.get("/size", params={**base, "gbs": "9" * 40}, headers=HX)
    assert r.status_code == 422 and "Enter at most 16777216." in r.text
    zh = {**HX, "Accept-Language": "zh-CN"}
    r = client.get("/size", params={**base, "gbs": "9" * 40}, headers=zh)
    assert r.status_code == 422 and "请输入不大于 16777216 的数。" in r.text
    r = client.get("/size", params={**base, "gbs": "²"}, headers=zh)
    assert r.status_code == 422 and "请用数字 0–9 输入数值。" in r.text


def test_global_batch_field_reads_as_a_batch_size_next_to_the_micro_batch(
    client: TestClient,
) -> None:
    """The micro-batch is per forward/backward pass and the global batch per optimizer step
    (the two hints no longer contradict each other); a negative batch is asked for at least
    one sequence (not "not negative", which invites a 0 that is refused next); the field's
    hint and error are read with it (EN + ZH)."""
    q = {"model": "llama-3.1-8b", "tokens": "1T", "gbs": "-1"}
    r = client.get("/size", params=q)
    assert r.status_code == 422
    assert "Sequences per GPU in each forward and backward pass." in r.text
    assert "Leave empty to use this run's compute-optimal batch." in r.text
    gbs = re.search(r'<input id="f-gbs"[^>]*>', r.text)
    assert gbs and 'aria-describedby="h-gbs err-gbs"' in gbs.group(0)
    assert 'aria-invalid="true"' in gbs.group(0)
    assert '<small id="e-gbs" class="error" role="alert">Enter at least 1.</small>' in r.text
    zh = client.get("/size", params=q, headers={"Accept-Language": "zh-CN"}).text
    assert "全局批大小（可选）" in zh and "全局批量" not in zh
    assert "每张 GPU 每次前向和反向传播处理的序列数。" in zh
    assert "请输入不小于 1 的数。" in zh


def test_lora_is_spelled_lora_in_the_assumptions(client: TestClient) -> None:
    q = {"model": "llama-3.1-8b", "tokens": "1B", "method": "qlora"}
    en = client.get("/size", params=q).text
    assert "QLoRA: base weights frozen (NF4)" in en and "QLORA" not in en
    zh = client.get("/size", params=q, headers={"Accept-Language": "zh-CN"}).text
    assert "QLoRA：基础权重冻结（NF4）" in zh and "QLORA" not in zh
    zh = client.get("/size", params=q, headers={"Accept-Language": "zh-CN"}).text
    assert "每步（一次优化器更新）处理" in zh and "全局批大小" in zh


def test_a_global_batch_is_stated_with_how_a_layout_rounds_it(client: TestClient) -> None:
    q = {"model": "llama-3.1-8b", "tokens": "1T", "gbs": "1"}
    en = client.get("/size", params=q).text
    assert "global batch as given, in sequences per step: 1;" in en
    zh = client.get("/size", params=q, headers={"Accept-Language": "zh-CN"}).text
    assert "全局批大小按您给定的每步 1 条序列" in zh and "按每个进程一个微批估算" in zh


def _assumed(html: str) -> list[str]:
    part = html.split('class="assumptions"', 1)[1].split("</ul>", 1)[0]
    return [re.sub(r"<[^>]+>", "", li) for li in re.findall(r"<li>(.*?)</li>", part, re.S)]


def test_the_assumptions_give_one_time_formula_and_lora_flops(client: TestClient) -> None:
    """The list said "time = FLOPs / (… × MFU × layout efficiency)" and, two lines on,
    "time = FLOPs / (… × MFU) with the MFU predicted", and "training FLOPs = 6 × …" above
    LoRA's "4·N·T": one formula now, the one that priced the run (EN + ZH)."""
    base = {"model": "llama-3.1-8b", "tokens": "1B"}
    for q, mfu_given in ((base, False), ({**base, "mfu": "40"}, True)):
        items = _assumed(client.get("/size", params=q).text)
        times = [a for a in items if "time = FLOPs" in a]
        assert len(times) == 1, times
        assert ("with the MFU you gave" in times[0]) is mfu_given
    lora = _assumed(client.get("/size", params={**base, "method": "lora"}).text)
    assert any(a.startswith("training FLOPs = 4 × active params × tokens") for a in lora)
    zh = _assumed(
        client.get(
            "/size",
            params={**base, "method": "lora", "mfu": "40"},
            headers={"Accept-Language": "zh-CN"},
        ).text
    )
    assert any(a.startswith("训练 FLOPs = 4 × 激活参数") for a in zh)
    assert [a for a in zh if a.startswith("时间 = FLOPs")] == [
        "时间 = FLOPs /（GPU 数 × 稠密峰值 × MFU × 布局效率），MFU 取您给定的值"
    ]


def test_a_one_day_deadline_and_lead_time_read_day_not_days() -> None:
    """ "Nothing finishes within 1 days" read wrong; the count picks its form, in both
    languages, and a lead time in days is shown whole with the form of the whole number."""
    from app.sizing.messages import Msg, render, translator

    def say(max_days: int, lead: float, lang: str | None = None) -> str:
        params = {"max_days": max_days, "nodes": 2, "name": "HGX H100", "lead_days": lead,
                  "days": 3.0, "finish_days": 5, "finish_day": 5, "cost_usd": 100}  # fmt: skip
        return render(Msg("reason.deadline_missed_finish", params), translator(lang))

    one = say(1, 1.2)
    assert "within 1 day of today" in one and "delivered in 1 day," in one
    assert "1 days" not in one
    many = say(30, 6.6)
    assert "within 30 days of today" in many and "delivered in 7 days," in many
    zh = say(1, 1.2, "zh_CN")
    assert "今天起 1 天内完成" in zh and "1 天交付" in zh and "days" not in zh


def test_a_negative_token_budget_gets_the_least_budget_not_not_negative(
    client: TestClient,
) -> None:
    """tokens=-1 said "Enter a number that is not negative", and the 0 it invites was then
    refused with "Enter at least 1": both now say the least budget."""
    for bad in ("-1", "0"):
        html = client.get("/size", params={"model": "llama-3.1-8b", "tokens": bad}).text
        assert "Enter at least 1" in html and "not negative" not in html, bad
