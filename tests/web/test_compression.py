"""Responses are gzip-compressed only when the client's Accept-Encoding accepts gzip:
``gzip;q=0`` means "not gzip" (RFC 9110 §12.5.3), whatever else the header lists."""

from __future__ import annotations

import gzip

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.catalog.seed import seed
from app.web.encoding import accepts_gzip, choose_encoding
from tests.conftest import START

SIZE_URL = "/size?model=llama-3.1-8b&tokens=100B&seq_len=4096&sku=hgx-b200"


@pytest.mark.parametrize(
    "header",
    [
        "gzip",
        "GZIP",
        "x-gzip",
        "gzip, deflate, br, zstd",  # what browsers send
        "br;q=1.0, gzip;q=0.8, *;q=0.1",
        "*",
        "identity;q=0.5, gzip",
        "gzip;q=0.5, identity;q=0.5",  # a tie: compress
        "gzip ; q=0.001",
        "deflate, *;q=0.3",  # gzip through the wildcard
        "gzip;q=0, gzip;q=1",  # listed twice: the better weight
    ],
)
def test_gzip_is_chosen_when_acceptable(header: str) -> None:
    assert choose_encoding(header) == "gzip"


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "   ",
        "identity",
        "gzip;q=0",
        "gzip;q=0.0, deflate, br",
        "GZip; Q=0.000",
        "x-gzip;q=0",
        "br, zstd",  # codings we do not offer
        "br, gzip;q=0, *",  # named with q=0: the wildcard does not bring it back
        "*;q=0",
        "*;q=0, identity",
        "gzip;q=0.4, identity;q=0.9",  # identity preferred
        "gzip;q=abc",  # an unreadable weight never turns compression on
        "gzip;q=2",
        "gzip;q=nan",
        "gzipx, gzi, agzip",  # not the substring
    ],
)
def test_gzip_is_refused_when_not_acceptable(header: str | None) -> None:
    assert not accepts_gzip(header)


@pytest.fixture
def seeded(engine):  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        seed(s, START)
        s.commit()
    return engine


def _raw(client: TestClient, url: str, accept_encoding: str, **headers: str):  # type: ignore[no-untyped-def]
    """The response as sent (httpx would decode the body and keep the header)."""
    with client.stream("GET", url, headers={"Accept-Encoding": accept_encoding, **headers}) as r:
        body = b"".join(r.iter_raw())
    return r, body


@pytest.mark.parametrize("url", ["/", "/static/vendor/htmx-2.0.8.min.js"])
def test_pages_and_static_files_honour_q_zero(client: TestClient, url: str) -> None:
    plain, plain_body = _raw(client, url, "gzip;q=0, deflate")
    assert plain.status_code == 200
    assert "content-encoding" not in plain.headers
    assert len(plain_body) > 800  # big enough that gzip would have been used
    packed, packed_body = _raw(client, url, "gzip;q=0.5, deflate")
    assert packed.headers["content-encoding"] == "gzip"
    assert "Accept-Encoding" in packed.headers["vary"]
    if url == "/":  # a fresh CSRF token in each page: not byte-for-byte the same
        assert b"<html" in gzip.decompress(packed_body)
    else:
        assert gzip.decompress(packed_body) == plain_body


def test_the_cached_size_fragment_honours_q_zero(client: TestClient, seeded) -> None:  # type: ignore[no-untyped-def]
    hx = {"HX-Request": "true"}
    for _ in range(2):  # rendered, then from the cache
        plain, plain_body = _raw(client, SIZE_URL, "gzip;q=0, br", **hx)
        assert plain.status_code == 200
        assert "content-encoding" not in plain.headers
        assert b"hgx" in plain_body.lower() or b"B200" in plain_body
        packed, packed_body = _raw(client, SIZE_URL, "br;q=1, gzip;q=0.2", **hx)
        assert packed.headers["content-encoding"] == "gzip"
        assert gzip.decompress(packed_body) == plain_body


def test_a_language_weighted_zero_is_never_picked(raw_client: TestClient) -> None:
    """The same rule for Accept-Language: ``zh;q=0`` means "not Chinese"."""
    r = raw_client.get("/", headers={"Accept-Language": "fr, zh-CN;q=0"})
    assert '<html lang="en">' in r.text
    r = raw_client.get("/", headers={"Accept-Language": "fr, zh-CN;q=0.1"})
    assert '<html lang="zh-CN">' in r.text
