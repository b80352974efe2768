"""The live /size fragment answered from the per-process cache of rendered fragments:
the same bytes for every reader (nothing per user in them), one entry per language, and
a list-price change made in another process is on the very next answer."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.catalog import service as svc
from app.catalog.seed import seed
from app.configurator.fragments import FragmentCache, PriceVersionMemo, fragment_cache_of
from app.main import create_app
from tests.conftest import CSRF_TOKEN, START

HX = {"HX-Request": "true"}
URL = "/size?model=llama-3.1-8b&tokens=100B&seq_len=4096&sku=hgx-b200"


@pytest.fixture
def seeded(engine):  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        seed(s, START)
        s.commit()
    return engine


def _change_price(engine, cents: int, *, ops) -> None:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        svc.set_list_price(s, sku_id="hgx-b200", cents=cents, reason="market", actor=ops, now=START)
        s.commit()


def test_typing_the_same_query_again_is_answered_from_the_cache(app, client, seeded) -> None:  # type: ignore[no-untyped-def]
    cache = fragment_cache_of(app.state)
    first = client.get(URL, headers=HX)
    # the same request spelled with the form's empty fields is the same canonical query
    again = client.get(URL + "&params=&mfu=&nodes=", headers=HX)
    assert first.status_code == again.status_code == 200
    assert first.content == again.content
    pushed = again.headers["hx-push-url"]
    assert pushed == first.headers["hx-push-url"]
    assert pushed.startswith("/size?model=llama-3.1-8b") and "params=" not in pushed
    assert cache.hits >= 1 and len(cache) == 1
    # security headers are still added to a cached answer
    assert again.headers["x-content-type-options"] == "nosniff"
    assert "content-security-policy" in again.headers


def test_languages_are_cached_apart(app, client, seeded) -> None:  # type: ignore[no-untyped-def]
    en = client.get(URL, headers=HX).text
    zh = client.get(URL, headers={**HX, "Accept-Language": "zh-CN"}).text
    assert "Every node, side by side" in en and "Every node, side by side" not in zh
    assert en != zh and len(fragment_cache_of(app.state)) == 2
    assert client.get(URL, headers=HX).text == en


def test_nothing_per_user_is_in_a_cached_fragment(
    app, client, seeded, make_user, login, new_client
) -> None:  # type: ignore[no-untyped-def]
    user = make_user(email="reader@example.com")
    signed_in = login(new_client(), user)
    mine = signed_in.get(URL, headers=HX)
    assert mine.status_code == 200
    assert "reader@example.com" not in mine.text
    assert CSRF_TOKEN not in mine.text and "csrf" not in mine.text.lower()
    # an anonymous reader gets the very same bytes (from the cache)
    before = fragment_cache_of(app.state).hits
    assert client.get(URL, headers=HX).content == mine.content
    assert fragment_cache_of(app.state).hits == before + 1
    # the full page (not cached) still carries the reader's CSRF token for the forms
    page = signed_in.get(URL)
    assert '<meta name="csrf-token" content="s.' in page.text


def test_a_price_change_in_another_process_is_on_the_next_fragment(  # type: ignore[no-untyped-def]
    app, client, settings, clock, seeded, make_user
) -> None:
    ops = make_user(email="ops-frag@example.com", role="ops")
    other = create_app(settings, clock=clock)  # a second process on the same database
    try:
        with TestClient(other) as c2:
            for c in (client, c2):
                for _ in range(2):  # rendered once, then from the cache
                    assert "$34,900.00" in c.get(URL, headers=HX).text
            assert fragment_cache_of(other.state).hits >= 1
            _change_price(other.state.engine, 36_000_00, ops=ops)
            for c in (client, c2):
                t = c.get(URL, headers=HX).text
                assert "$36,000.00" in t and "$34,900.00" not in t
            _change_price(app.state.engine, 34_900_00, ops=ops)  # and back again
            for c in (c2, client):
                t = c.get(URL, headers=HX).text
                assert "$34,900.00" in t and "$36,000.00" not in t
    finally:
        other.state.engine.dispose()


def test_with_the_production_interval_another_process_s_price_shows_once_it_has_passed(  # type: ignore[no-untyped-def]
    settings, clock, seeded, make_user
) -> None:
    ops = make_user(email="ops-frag2@example.com", role="ops")
    assert type(settings)().fragment_price_max_age_ms == 200  # the default a deployment runs
    live = settings.model_copy(update={"fragment_price_max_age_ms": 200})
    t = [1000.0]
    app_ = create_app(live, clock=clock)
    other = create_app(live, clock=clock)
    app_.state.price_version_memo = PriceVersionMemo(0.2, now=lambda: t[0])
    try:
        with TestClient(app_) as c1:
            assert "$34,900.00" in c1.get(URL, headers=HX).text
            _change_price(other.state.engine, 36_000_00, ops=ops)
            t[0] += 0.1  # within the interval: this process may still show the old price
            assert "$34,900.00" in c1.get(URL, headers=HX).text
            t[0] += 0.15  # past it: the next answer has the new price
            text = c1.get(URL, headers=HX).text
            assert "$36,000.00" in text and "$34,900.00" not in text
    finally:
        app_.state.engine.dispose()
        other.state.engine.dispose()


def test_the_price_version_is_read_at_most_once_per_interval() -> None:
    t = [0.0]
    reads: list[int] = []
    memo = PriceVersionMemo(0.2, now=lambda: t[0])

    def read() -> int:
        reads.append(1)
        return len(reads)

    assert [memo.get(read) for _ in range(5)] == [1] * 5
    t[0] = 0.25
    assert memo.get(read) == 2 and memo.get(read) == 2
    t[0] = 0.1  # a timer that went back is not trusted: read again
    assert memo.get(read) == 3
    assert PriceVersionMemo(0).get(read) == 4 and len(reads) == 4
    failing = PriceVersionMemo(0.2, now=lambda: t[0])
    assert failing.get(lambda: None) is None
    assert failing.get(read) == 5  # a failed read is not kept for the interval


def test_a_stale_version_sends_one_caller_to_read_it_and_keeps_the_rest_answering() -> None:
    t = [0.0]
    memo = PriceVersionMemo(0.2, now=lambda: t[0])
    assert memo.fresh() is None  # nothing read yet: every caller goes to the route
    assert memo.fresh() is None
    memo.get(lambda: 7)
    assert memo.fresh() == 7
    t[0] = 0.25  # past the interval
    assert memo.fresh() is None  # the first caller goes and reads
    assert [memo.fresh() for _ in range(3)] == [7, 7, 7]  # the rest keep answering meanwhile
    memo.get(lambda: 8)  # the read lands
    assert memo.fresh() == 8
    t[0] = 0.5
    assert memo.fresh() is None
    t[0] = 0.9  # that read never landed (a database blip): after one more interval, the
    assert memo.fresh() is None  # early answers stop and every caller goes to read
    assert memo.fresh() is None
    assert PriceVersionMemo(0).fresh() is None  # no interval: always read


def test_the_cache_is_bounded() -> None:
    from app.configurator.fragments import Fragment

    cache = FragmentCache(size=3)
    for i in range(5):
        cache.put((f"q{i}", "en", 1), Fragment(200, b"x"))
    assert len(cache) == 3
    assert cache.get(("q0", "en", 1)) is None and cache.get(("q4", "en", 1)) is not None
    assert cache.stats() == {"hits": 1, "misses": 1, "entries": 3}


def test_a_browser_that_accepts_gzip_gets_the_same_fragment_compressed(app, client, seeded) -> None:  # type: ignore[no-untyped-def]
    plain = client.get(URL, headers={**HX, "Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    for _ in range(2):  # rendered, then cached: compressed once, the same bytes
        packed = client.get(URL, headers={**HX, "Accept-Encoding": "gzip, deflate, br"})
        assert packed.headers["content-encoding"] == "gzip"
        assert "Accept-Encoding" in packed.headers["vary"]
        assert packed.content == plain.content  # httpx decodes it


def test_a_fragment_priced_without_the_live_prices_is_not_kept(  # type: ignore[no-untyped-def]
    app, client, seeded, make_user, monkeypatch
) -> None:
    """A failed read of the list prices (a database blip) prices that one answer from the
    engine's seed prices; it must not stay in the cache under the current price version,
    where every reader would get the old price until the next price change (hprobe)."""
    ops = make_user(email="ops-frag3@example.com", role="ops")
    _change_price(app.state.engine, 36_000_00, ops=ops)
    assert "$36,000.00" in client.get(URL, headers=HX).text

    def blip(self, engine, version=None):  # type: ignore[no-untyped-def]
        raise OSError("connection lost")

    monkeypatch.setattr(svc.PriceCache, "get", blip)
    other_query = URL + "&seq_len=8192"
    assert client.get(other_query, headers=HX).status_code == 200  # seed prices, this once
    monkeypatch.undo()
    t = client.get(other_query, headers=HX).text
    assert "$36,000.00" in t and "$34,900.00" not in t


@pytest.fixture
def live_app(settings, clock, seeded):  # type: ignore[no-untyped-def]
    """An app with the production interval and a timer the test moves."""
    t = [1000.0]
    application = create_app(
        settings.model_copy(update={"fragment_price_max_age_ms": 200}), clock=clock
    )
    application.state.price_version_memo = PriceVersionMemo(0.2, now=lambda: t[0])
    yield application, t
    application.state.engine.dispose()


def _without_request_id(headers) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {k: v for k, v in headers.items() if k != "x-request-id"}


def test_a_cached_fragment_answered_before_the_router_is_the_route_s_answer(
    live_app, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Within the price interval a cached fragment is answered by ``CachedFragments``
    (no router, no thread): the same status, bytes and headers as the route's, in each
    language, plain and gzipped, an answer with field errors too."""
    from app.configurator import routes

    app_, _t = live_app
    bad = "/size?model=llama-3.1-8b&tokens=lots&seq_len=4096"
    asks = [
        (URL, {**HX, "Accept-Encoding": "identity"}),
        (URL, {**HX, "Accept-Encoding": "identity", "Accept-Language": "zh-CN"}),
        (URL, {**HX, "Accept-Encoding": "gzip"}),
        (URL + "&params=&mfu=", {**HX, "Accept-Encoding": "identity"}),
        (bad, {**HX, "Accept-Encoding": "identity"}),
    ]
    with TestClient(app_) as c:
        routed = [c.get(u, headers=h) for u, h in asks]  # rendered (and compressed) by the route
        assert routed[-1].status_code == 422
        monkeypatch.setattr(routes, "_fragment", _not_called)
        early = [c.get(u, headers=h) for u, h in asks]
    for a, b in zip(routed, early, strict=True):
        assert (a.status_code, a.content) == (b.status_code, b.content)
        assert _without_request_id(a.headers) == _without_request_id(b.headers)
    assert early[1].headers["content-language"] == "zh-CN" and "每" in early[1].text
    assert early[2].headers["content-encoding"] == "gzip"
    assert early[0].headers["x-frame-options"] == "DENY"
    assert early[0].headers["hx-push-url"] == early[3].headers["hx-push-url"]


def _not_called(*args, **kwargs):  # type: ignore[no-untyped-def]
    raise AssertionError("the route rendered an answer the cache had")


def test_what_the_early_answer_leaves_to_the_route(live_app, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The page itself, a history restore, a boosted request, a price version past its
    interval (read by the route, in a thread) and a first gzip request all reach the route."""
    from app.configurator import routes

    app_, t = live_app
    seen: list[str] = []
    real = routes._fragment

    def counted(request, form, canonical):  # type: ignore[no-untyped-def]
        seen.append(canonical)
        return real(request, form, canonical)

    monkeypatch.setattr(routes, "_fragment", counted)
    plain = {**HX, "Accept-Encoding": "identity"}
    with TestClient(app_) as c:
        assert c.get(URL, headers=plain).status_code == 200
        assert len(seen) == 1
        assert c.get(URL, headers=plain).status_code == 200
        assert len(seen) == 1  # answered early
        page = c.get(URL, headers={"Accept-Encoding": "identity"})
        assert "<html" in page.text and 'name="csrf-token"' in page.text
        restore = c.get(URL, headers={**plain, "HX-History-Restore-Request": "true"})
        assert "<html" in restore.text
        boosted = c.get(URL, headers={**plain, "HX-Boosted": "true"})
        assert "<html" in boosted.text
        assert len(seen) == 1
        assert c.get(URL, headers={**HX, "Accept-Encoding": "gzip"}).status_code == 200
        assert len(seen) == 2  # compressed by the route, once
        assert c.get(URL, headers={**HX, "Accept-Encoding": "gzip"}).status_code == 200
        assert len(seen) == 2
        t[0] += 0.25  # the version is past its interval: the route reads it
        assert c.get(URL, headers=plain).status_code == 200
        assert len(seen) == 3
        assert c.get(URL, headers=plain).status_code == 200
        assert len(seen) == 3


def test_early_answers_are_counted_as_hits_under_the_route_s_name(live_app) -> None:  # type: ignore[no-untyped-def]
    from app.web.middleware import REQUESTS

    app_, _t = live_app
    cache = fragment_cache_of(app_.state)
    with TestClient(app_) as c:
        c.get(URL, headers=HX)
        hits, misses = cache.hits, cache.misses
        before = REQUESTS.labels("GET", "/size", "200")._value.get()
        for _ in range(3):
            assert c.get(URL, headers=HX).status_code == 200
    assert (cache.hits, cache.misses) == (hits + 3, misses)
    assert REQUESTS.labels("GET", "/size", "200")._value.get() == before + 3


def test_a_first_answer_reads_the_price_version_once(live_app, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The version in the fragment's key is the one its prices are read at: one read for a
    first answer (not one for the key and another for the prices), none within the
    interval; the prices are still those of that version."""
    from app.configurator import routes

    app_, t = live_app
    reads: list[int] = []
    read = svc.price_version_now

    def counted(engine):  # type: ignore[no-untyped-def]
        reads.append(1)
        return read(engine)

    monkeypatch.setattr(routes, "price_version_now", counted)
    monkeypatch.setattr(svc, "price_version_now", counted)
    with TestClient(app_) as c:
        assert "$34,900.00" in c.get(URL, headers=HX).text
        assert len(reads) == 1
        assert "$34,900.00" in c.get(URL + "&seq_len=8192", headers=HX).text  # another miss
        assert len(reads) == 1
        t[0] += 0.25
        assert c.get(URL + "&seq_len=2048", headers=HX).status_code == 200
        assert len(reads) == 2


def test_the_early_answer_honours_gzip_q0(live_app, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``gzip;q=0`` means "not gzip", on the early path as on the route."""
    from app.configurator import routes

    app_, _t = live_app
    with TestClient(app_) as c:
        assert c.get(URL, headers={**HX, "Accept-Encoding": "gzip"}).status_code == 200
        monkeypatch.setattr(routes, "_fragment", _not_called)
        refused = c.get(URL, headers={**HX, "Accept-Encoding": "gzip;q=0, identity"})
    assert refused.status_code == 200
    assert "content-encoding" not in refused.headers
    assert "每" not in refused.text and "hgx-b200" in refused.text.lower()
