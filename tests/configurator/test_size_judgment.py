"""The recommendation's judgment on the /size page, and the Chinese page in Chinese only."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from tests.support.english import english_sentences

HX = {"HX-Request": "true"}

ZH_PAGES = [
    "/size?model=llama-3.1-405b&tokens=15T",
    "/size?model=llama-3.1-70b&tokens=1T&days=1",
    "/size?model=llama-3.1-8b&tokens=1T&seq_len=10000000",
    "/size?model=llama-3.1-8b&tokens=1T&seq_len=lots",
    "/size?model=llama-3.1-8b&tokens=1B&method=lora",
    "/size?model=llama-3.1-405b&tokens=15T&days=1",
    "/size?model=llama-3.1-8b&tokens=100B&sku=mi355x",
    "/size?model=deepseek-v3&tokens=1T&seq_len=64k",
    "/size?model=llama-3.1-8b&tokens=1T&par=explicit&sharding=zero3&tp=3",
    "/size?model=llama-3.1-8b&tokens=1T&par=explicit&sharding=zero3&shard_group=3&nodes=1",
    "/size?model=params&params=7B&tokens=1T&method=qlora&precision=fp8",
    "/size?model=llama-3.1-8b&tokens=5万亿&mfu=80",
    "/size?model=qwen3-32b&tokens=100B&seq_len=32k&framework=fsdp2",
    "/size?model=qwen3-32b&tokens=100B&seq_len=32k&framework=fsdp2&compile=1",
]


def _recommendation(html: str) -> str:
    m = re.search(r'<div class="card rec">(.*?)</div>\s*<h2', html, re.S)
    assert m, "the page has a recommendation"
    return m.group(1)


@pytest.mark.parametrize("url", ZH_PAGES)
def test_chinese_size_page_has_no_english_sentence(client: TestClient, url: str) -> None:
    client.cookies.set("lang", "zh_CN")
    for headers in ({}, HX):
        r = client.get(url, headers=headers)
        assert r.status_code in (200, 422)
        assert english_sentences(r.text) == [], url


def test_the_scanner_sees_english_text_but_not_attributes() -> None:
    html = '<p title="this is an English attribute">训练 needs more memory here</p>'
    assert english_sentences(html) == ["needs more memory here"]
    assert english_sentences("<p>8 × HGX B200 (64 GPUs) 训练 1T tokens</p>") == []


def test_english_page_explains_the_headline(client: TestClient) -> None:
    r = client.get("/size?model=llama-3.1-70b&tokens=5T")
    rec = _recommendation(r.text)
    assert "the cheapest plan that fits" in rec or "within 12 months" in rec
    # not a decade on one node: months, with the use of the months paid for
    m = re.search(r"(\d+) × ([^<]+)</strong>", rec)
    assert m and int(m.group(1)) > 1
    assert "of the" in rec and "paid for" in rec


def test_rocm_platform_never_headlines_unless_accepted(client: TestClient) -> None:
    r = client.get("/size?model=llama-3.1-405b&tokens=15T")
    rec = _recommendation(r.text)
    assert "MI355X</strong>" not in rec
    assert "Talk to sales" in rec
    link = re.search(r'href="(/cluster-request\?[^"]+)"', rec)
    assert link
    q = parse_qs(urlsplit(link.group(1).replace("&amp;", "&")).query)
    assert q["sku"][0] != "mi355x" and int(q["nodes"][0]) > 16 and q["months"]
    assert parse_qs(q["sizing"][0])["model"] == ["llama-3.1-405b"]


def test_a_picked_node_on_an_unaccepted_platform_offers_the_box_to_tick(
    client: TestClient,
) -> None:
    """The customer chose MI355X for an 8B job every node fits: not "only it fits, talk to
    sales", but the one thing to say to check it out."""
    r = client.get("/size?model=llama-3.1-8b&tokens=100B&sku=mi355x")
    rec = _recommendation(r.text)
    assert "Use this" not in rec and "</strong>" not in rec.split('class="rec-why"')[0]
    assert "ROCm" in rec and "choose another node" in rec and "Only" not in rec
    assert "/cluster-request" not in rec
    link = re.search(r'href="(/size\?[^"]+)"[^>]*>My stack runs on ROCm<', rec)
    assert link and "rocm=1" in link.group(1) and "sku=mi355x" in link.group(1)
    ticked = _recommendation(client.get(link.group(1).replace("&amp;", "&")).text)
    assert "Use this" in ticked and "MI355X" in ticked


def test_a_deadline_is_never_shown_as_met_without_a_delivery_date(client: TestClient) -> None:
    # an empty catalog promises no delivery date for any count: no plan can be shown as
    # finishing within the deadline, however fast it trains
    r = client.get("/size?model=llama-3.1-70b&tokens=1T&days=1")
    rec = _recommendation(r.text)
    assert "1-day deadline" not in rec and "Nothing finishes within 1" in rec
    assert "No delivery date we can promise" in r.text


def test_single_gpu_hint_only_when_one_gpu_finishes_soon(client: TestClient) -> None:
    small = client.get("/size?model=llama-3.1-8b&tokens=1B&method=lora").text
    assert "single-GPU offer" in small and re.search(r"trains there in [\d.]+ hours", small)
    big = client.get("/size?model=llama-3.1-8b&tokens=1T&method=lora").text
    assert "single-GPU" not in big and "single GPU" not in big


def test_both_rates_are_named_apart_on_every_card(client: TestClient) -> None:
    html = client.get("/size?model=llama-3.1-8b&tokens=1T").text
    cards = html.count('class="card sku-card')
    assert cards >= 5
    assert html.count("Cost per GPU-hour of this run") == cards
    assert html.count("24/7 rate per GPU-hour") == cards
    assert ">Per GPU-hour<" not in html


def test_eager_parallel_layouts_say_what_torch_compile_changes(client: TestClient) -> None:
    """An eager FSDP2 answer whose layout uses tensor, context or expert parallelism carries
    the note that prices eager DTensor code; with torch.compile on the note is gone."""
    base = "/size?model=qwen3-32b&tokens=100B&seq_len=32k&framework=fsdp2"
    note = "without torch.compile"
    eager = client.get(base, headers=HX)
    compiled = client.get(base + "&compile=1", headers=HX)
    assert eager.status_code == compiled.status_code == 200
    assert note in eager.text
    assert note not in compiled.text
    assert 'name="compile"' in client.get(base).text


def test_an_engine_error_beside_a_field_is_a_sentence_in_each_language(client: TestClient) -> None:
    url = "/size?model=llama-3.1-8b&tokens=1T&par=explicit&sharding=zero3&tp=3"
    en = client.get(url).text
    assert re.search(r'href="#f-tp">[^<]+</a>: Must divide the number of attention heads\.<', en)
    client.cookies.set("lang", "zh_CN")
    zh = client.get(url).text
    assert re.search(r'href="#f-tp">张量并行</a>：必须能整除注意力头数。<', zh), zh
