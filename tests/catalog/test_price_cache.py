"""List prices cached per process, keyed by the price version: two app instances on one
database (as two uvicorn processes would be) both show a price change on their next page."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlmodel import Session

from app.catalog import service as svc
from app.main import create_app
from tests.conftest import START


def _change_price(engine, cents: int, *, ops) -> None:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        svc.set_list_price(s, sku_id="hgx-b200", cents=cents, reason="market", actor=ops, now=START)
        s.commit()


def test_two_instances_show_a_price_change_made_through_either(  # type: ignore[no-untyped-def]
    app, client, settings, clock, seeded, make_user
) -> None:
    ops = make_user(email="ops@example.com", role="ops")
    other = create_app(settings, clock=clock)
    try:
        with TestClient(other) as c2:
            for c in (client, c2):  # both caches filled with the seeded price
                assert "$34,900.00" in c.get("/nodes").text
            _change_price(other.state.engine, 36_000_00, ops=ops)
            for c in (client, c2):
                t = c.get("/nodes").text
                assert "$36,000.00" in t and "$34,900.00" not in t
            _change_price(app.state.engine, 33_000_00, ops=ops)
            for c in (c2, client):
                t = c.get("/nodes").text
                assert "$33,000.00" in t and "$36,000.00" not in t
            # an unchanged version is served from the cache: the prices were read once per change
            before = other.state.price_cache.reads
            for _ in range(3):
                c2.get("/nodes")
            assert other.state.price_cache.reads == before
    finally:
        other.state.engine.dispose()


def test_the_live_sizing_fragment_prices_with_the_changed_list_price(  # type: ignore[no-untyped-def]
    app, client, settings, clock, seeded, make_user
) -> None:
    ops = make_user(email="ops3@example.com", role="ops")
    other = create_app(settings, clock=clock)
    url = "/size?model=llama-3.1-8b&tokens=100B&seq_len=4096&sku=hgx-b200"
    hx = {"HX-Request": "true"}
    try:
        with TestClient(other) as c2:
            for c in (client, c2):  # engine answer and prices cached in both
                assert "$34,900.00" in c.get(url, headers=hx).text
            _change_price(other.state.engine, 36_000_00, ops=ops)
            for c in (client, c2):
                t = c.get(url, headers=hx).text
                assert "$36,000.00" in t and "$34,900.00" not in t
    finally:
        other.state.engine.dispose()


def test_every_price_change_moves_the_version_in_its_transaction(  # type: ignore[no-untyped-def]
    engine, seeded, make_user
) -> None:
    ops = make_user(email="ops2@example.com", role="ops")
    with Session(engine) as s:
        v0 = svc.price_version(s)
    assert v0 >= 1  # the seed wrote prices
    with Session(engine) as s:
        svc.set_list_price(s, sku_id="hgx-h100", cents=1_234_00, reason="x", actor=ops, now=START)
        s.rollback()  # a change that is not committed does not move it either
    with Session(engine) as s:
        assert svc.price_version(s) == v0
    _change_price(engine, 40_000_00, ops=ops)
    with Session(engine) as s:
        assert svc.price_version(s) == v0 + 1
        # setting the same price again is no change
        assert (
            svc.set_list_price(
                s, sku_id="hgx-b200", cents=40_000_00, reason="same", actor=ops, now=START
            )
            is None
        )
        s.commit()
    with Session(engine) as s:
        assert svc.price_version(s) == v0 + 1
