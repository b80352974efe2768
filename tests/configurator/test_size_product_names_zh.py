"""A Chinese /size page names the rack as every other Chinese page does (整机柜): on its
card, in the node list, in the headline and in the notes, never "GB300 NVL72 rack"."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from tests.support.english import text_chunks

HX = {"HX-Request": "true"}
QUERIES = (
    {},  # the first visit: every card, the rack's included
    {"model": "llama-3.1-405b", "tokens": "15T"},  # the rack in the headline's alternatives
    {"model": "llama-3.1-70b", "tokens": "1T", "sku": "gb300-nvl72"},  # the rack alone
)


@pytest.mark.parametrize("query", QUERIES)
def test_the_rack_reads_as_chinese_on_size(client: TestClient, query: dict[str, str]) -> None:
    client.cookies.set("lang", "zh_CN")
    for headers in ({}, HX):
        html = client.get("/size", params=query, headers=headers).text
        text = "\n".join(text_chunks(html))
        assert not re.search(r"\brack\b", text), [c for c in text.split("\n") if "rack" in c]
        assert "GB300 NVL72 整机柜" in text
    # the English page keeps the catalogue's name
    client.cookies.set("lang", "en")
    assert "GB300 NVL72 rack" in client.get("/size", params=query).text
