"""A Chinese /size page names the rack as every other Chinese page does (整机柜): on its
card, in the node list, in the headline and in the notes, never "GB300 NVL72 rack"."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

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


def test_the_deploy_links_notes_read_as_chinese(client: TestClient) -> None:
    """The engineers' notes /size prefills on /deploy: the communication pattern is the
    layout in the reader's words (the collective keeps NCCL's name)."""
    query = {"model": "llama-3.1-70b", "tokens": "1T", "sku": "hgx-h100", "nodes": "4"}
    client.cookies.set("lang", "zh_CN")
    html = client.get("/size", params=query).text
    links = [m.replace("&amp;", "&") for m in re.findall(r'href="(/deploy\?[^"]+)"', html)]
    assert links
    notes = parse_qs(urlsplit(links[0]).query)
    comm = notes["note_comm_pattern"][0]
    assert re.search("[\u4e00-\u9fff]", comm) and not re.search(r"[a-z]+ [a-z]+ [a-z]+", comm)
    client.cookies.set("lang", "en")
    html = client.get("/size", params=query).text
    links = [m.replace("&amp;", "&") for m in re.findall(r'href="(/deploy\?[^"]+)"', html)]
    assert re.search(
        r"[a-z]+ [a-z]+ [a-z]+", parse_qs(urlsplit(links[0]).query)["note_comm_pattern"][0]
    )
