"""Chinese pages use Chinese punctuation between translated pieces: "可用容量：79.6 GiB",
"（模拟）", not "可用容量: " or " (模拟)" — while digit grouping (1,800), times and code
stay as they are. English pages keep their own marks."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.accounts.models import User
from app.catalog.seed import seed
from app.catalog.specs import all_specs
from app.i18n import labelled, punct
from tests.conftest import START
from tests.support.chinese import ascii_punctuation
from tests.web.test_chinese_pages import (  # noqa: F401  (seeded: the fixture)
    Seeded,
    customer_pages,
    seeded,
)

PUBLIC = [
    "/",
    "/nodes",
    *[f"/nodes/{s.id}" for s in all_specs()],
    *[f"/pricing/monthly-vs-hourly?sku={s.id}" for s in all_specs() if s.self_serve],
    "/size?model=llama-3.1-8b&tokens=100B&seq_len=4096&sku=hgx-b200",
    "/size?model=deepseek-v3&tokens=1T&max_days=10",
    "/deploy?sku=hgx-b200&nodes=2",
    "/cluster-request",
]


def test_the_scanner_finds_ascii_marks_in_chinese_text_only() -> None:
    html = (
        "<dd>每 GPU 80 GB<sup>V</sup>; 驱动报告的可用容量: 79.6 GiB</dd>"
        "<p>NVLink 5（整机柜 130 TB/s）, 1,800 GB/s</p><p>US$1.00 (模拟)</p><h1>包月还是按小时?</h1>"
    )
    assert len(ascii_punctuation(html)) == 6  # ; : , ( ) ?
    fine = (
        "<dd>每 GPU 80 GB<sup>V</sup>；驱动报告的可用容量：79.6 GiB</dd><p>共 1,800 GB/s，09:00</p>"
        "<p>Llama 3.1 8B (8.0B)</p><p>运行 <code>nvidia-smi topo -m</code>（每台）</p>"
    )
    assert ascii_punctuation(fine) == []


def test_punctuation_follows_the_language() -> None:
    assert labelled("Tax ID", "DE123", "en") == "Tax ID: DE123"
    assert labelled("税号", "DE123", "zh_CN") == "税号：DE123"
    assert [punct(m, "zh_CN") for m in ("; ", " (", ")", "list")] == ["；", "（", "）", "、"]
    assert [punct(m, "en") for m in ("; ", " (", ")", "list")] == ["; ", " (", ")", ", "]


@pytest.fixture
def catalog(engine):  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        seed(s, START)
        s.commit()
    return engine


def test_public_pages_in_chinese_use_full_width_punctuation(client: TestClient, catalog) -> None:  # type: ignore[no-untyped-def]
    client.cookies.set("lang", "zh_CN")
    found = {}
    for url in PUBLIC:
        r = client.get(url)
        assert r.status_code == 200, url
        if hits := ascii_punctuation(r.text):
            found[url] = hits
    assert not found, found


def test_the_node_page_reads_naturally_in_each_language(client: TestClient, catalog) -> None:  # type: ignore[no-untyped-def]
    client.cookies.set("lang", "zh_CN")
    zh = client.get("/nodes/gb300-nvl72").text
    assert "驱动报告的可用容量：268.6 GiB" in zh
    assert "每 GPU 288 GB" in zh
    assert "），每 GPU 双向 1,800 GB/s" in zh  # the link's note, then the speed
    assert 'title="来源：' in zh  # the source superscript's tooltip
    client.cookies.set("lang", "en")
    en = client.get("/nodes/gb300-nvl72").text
    assert "288 GB per GPU" in en and "; usable as reported by the driver: 268.6 GiB" in en
    assert ", 1,800 GB/s per GPU, both ways" in en and 'title="Source: ' in en


def test_customer_pages_in_chinese_use_full_width_punctuation(
    client: TestClient,
    seeded: Seeded,  # noqa: F811
    login: Callable[[TestClient, User], TestClient],
) -> None:
    login(client, seeded.customer)
    client.cookies.set("lang", "zh_CN")
    pages = customer_pages(seeded)
    found = {}
    for url in pages:
        r = client.get(url)
        assert r.status_code == 200, url
        if hits := ascii_punctuation(r.text):
            found[url] = hits
    assert not found, found
    assert "（模拟）" in client.get(f"/topups/{seeded.invoice_id}").text


def test_staff_pages_in_chinese_use_full_width_punctuation(
    client: TestClient,
    seeded: Seeded,  # noqa: F811
    login: Callable[[TestClient, User], TestClient],
) -> None:
    login(client, seeded.ops)
    client.cookies.set("lang", "zh_CN")
    found = {}
    for url in ["/staff/ops", f"/staff/ops/orders/{seeded.delivered.id}", "/staff/nodes"]:
        r = client.get(url)
        assert r.status_code == 200, url
        if hits := ascii_punctuation(r.text):
            found[url] = hits
    assert not found, found
