"""A bad value in a page's address is named as a reader names it ("Page number: Enter a whole
number."), in their language, never by the handler's parameter ("page:", "order_id:")."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.mark.parametrize(
    ("url", "en", "zh"),
    [
        ("/balance?page=abc", "Page number: ", "页码："),
        ("/console/orders/abc", "Order number: ", "订单号："),
    ],
)
def test_a_bad_address_value_is_named_for_the_reader(
    client: TestClient, make_user, login, url: str, en: str, zh: str
) -> None:  # type: ignore[no-untyped-def]
    login(client, make_user())
    r = client.get(url)
    assert r.status_code == 422 and en in r.text
    assert "page: " not in r.text and "order_id" not in r.text
    client.cookies.set("lang", "zh_CN")
    r = client.get(url)
    assert r.status_code == 422 and zh in r.text


def test_several_bad_values_read_as_sentences(client: TestClient, make_user, login) -> None:  # type: ignore[no-untyped-def]
    login(client, make_user(role="sales"))
    r = client.get("/staff/quotes", params={"q": "x" * 300, "page": "abc"})
    assert r.status_code == 422
    assert "Search: " in r.text and "Page number: " in r.text
    assert ".;" not in r.text and "q: " not in r.text


def test_a_value_out_of_range_gives_the_range(client: TestClient, make_user, login) -> None:  # type: ignore[no-untyped-def]
    login(client, make_user())
    r = client.get("/receipts?page=0")
    assert r.status_code == 422 and "Page number: Enter at least 1." in r.text, r.text[-800:]
