"""Staff stock desk: customers are refused, sales may look, ops may change."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from app.accounts.audit import AuditEvent
from app.catalog import service as svc
from app.catalog.models import IncomingBatch, Node, PriceChange

POSTS = [
    ("/staff/nodes/add", {"sku_id": "hgx-h100"}),
    ("/staff/nodes/1", {"state": "maintenance"}),
    ("/staff/batches/add", {"sku_id": "hgx-h100", "quantity": "2", "expected_on": "2027-01-10"}),
    ("/staff/batches/1", {"quantity": "5", "expected_on": "2027-01-10"}),
    ("/staff/batches/1/arrived", {}),
    ("/staff/prices/hgx-h100", {"price": "1", "reason": "x"}),
    ("/staff/lead-times/hgx-h100", {"days": "4"}),
]


def _snapshot(engine) -> tuple:  # type: ignore[no-untyped-def,type-arg]
    with Session(engine) as s:
        return (
            sorted((n.id, n.state, n.mgmt_ip) for n in s.exec(select(Node)).all()),
            sorted((b.id, b.quantity, b.status) for b in s.exec(select(IncomingBatch)).all()),
            len(s.exec(select(PriceChange)).all()),
            svc.lead_time_days(s, "hgx-h100"),
        )


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_customer_and_anonymous_are_refused(client, seeded, make_user, login, engine, lang) -> None:  # type: ignore[no-untyped-def]
    client.cookies.set("lang", lang)
    assert client.get("/staff/nodes").status_code == 303  # to the login page
    login(client, make_user())
    before = _snapshot(engine)
    assert client.get("/staff/nodes").status_code == 403
    for path, data in POSTS:
        assert client.post(path, data=data).status_code == 403, path
    assert _snapshot(engine) == before


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_sales_can_look_but_not_change(client, seeded, make_user, login, engine, lang) -> None:  # type: ignore[no-untyped-def]
    client.cookies.set("lang", lang)
    login(client, make_user("sales"))
    before = _snapshot(engine)
    r = client.get("/staff/nodes")
    assert r.status_code == 200 and "b200-001" in r.text and 'action="/staff/prices/' not in r.text
    for path, data in POSTS:
        assert client.post(path, data=data).status_code == 403, path
    assert _snapshot(engine) == before


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_ops_manage_stock_and_prices(client, seeded, make_user, login, engine, lang) -> None:  # type: ignore[no-untyped-def]
    client.cookies.set("lang", lang)
    ops = make_user("ops")
    login(client, ops)
    page = client.get("/staff/nodes")
    assert page.status_code == 200 and 'action="/staff/prices/hgx-b200"' in page.text
    # add a node: gets the next host name and a free 10.x address
    assert (
        client.post(
            "/staff/nodes/add", data={"sku_id": "hgx-b300", "state": "available"}
        ).status_code
        == 303
    )
    with Session(engine) as s:
        n = s.exec(select(Node).where(Node.hostname == "b300-004")).one()
        assert n.mgmt_ip.startswith("10.20.4.")
        node_id = n.id
    # change state and IP
    r = client.post(
        f"/staff/nodes/{node_id}", data={"state": "maintenance", "mgmt_ip": "10.20.4.200"}
    )
    assert r.status_code == 303
    # a bad IP re-renders with the message and changes nothing
    r = client.post(
        f"/staff/nodes/{node_id}", data={"state": "available", "mgmt_ip": "10.20.4.999"}
    )
    assert r.status_code == 422 and 'value="10.20.4.999"' in r.text
    with Session(engine) as s:
        n = s.get(Node, node_id)
        assert (n.state, n.mgmt_ip) == ("maintenance", "10.20.4.200")
    # batches: add, edit, arrive → nodes
    assert (
        client.post(
            "/staff/batches/add",
            data={"sku_id": "hgx-b300", "quantity": "3", "expected_on": "2026-12-20"},
        ).status_code
        == 303
    )
    bad = client.post(
        "/staff/batches/add",
        data={"sku_id": "hgx-b300", "quantity": "0", "expected_on": "2020-01-01"},
    )
    assert bad.status_code == 422 and 'value="2020-01-01"' in bad.text
    with Session(engine) as s:
        b = s.exec(select(IncomingBatch).where(IncomingBatch.quantity == 3)).one()
        bid = b.id
    assert (
        client.post(
            f"/staff/batches/{bid}", data={"quantity": "2", "expected_on": "2026-12-22"}
        ).status_code
        == 303
    )
    assert client.post(f"/staff/batches/{bid}/arrived").status_code == 303
    two = "Batch arrived: 2 nodes added to stock." if lang == "en" else "2 台节点已加入库存"
    assert two in client.get("/staff/nodes").text
    assert client.post(f"/staff/batches/{bid}/arrived").status_code == 409  # only once
    one = client.post(
        "/staff/batches/add",
        data={"sku_id": "hgx-b300", "quantity": "1", "expected_on": "2026-12-20"},
    )
    assert one.status_code == 303
    with Session(engine) as s:
        single = s.exec(select(IncomingBatch).where(IncomingBatch.quantity == 1)).one().id
    assert client.post(f"/staff/batches/{single}/arrived").status_code == 303
    one_node = "Batch arrived: 1 node added to stock." if lang == "en" else "1 台节点已加入库存"
    assert one_node in client.get("/staff/nodes").text
    with Session(engine) as s:
        assert len(s.exec(select(Node).where(Node.batch_id == bid)).all()) == 2
    # prices: change with a reason, history shown, audited
    assert (
        client.post("/staff/prices/hgx-h100", data={"price": "17,500", "reason": ""}).status_code
        == 422
    )
    assert (
        client.post("/staff/prices/hgx-h100", data={"price": "abc", "reason": "x"}).status_code
        == 422
    )
    r = client.post(
        "/staff/prices/hgx-h100", data={"price": "17,500", "reason": "supplier price rise"}
    )
    assert r.status_code == 303
    page = client.get("/staff/nodes").text
    assert "supplier price rise" in page and ops.email in page
    # lead time
    assert client.post("/staff/lead-times/hgx-h100", data={"days": "0"}).status_code == 422
    assert client.post("/staff/lead-times/hgx-h100", data={"days": "4"}).status_code == 303
    with Session(engine) as s:
        assert svc.list_price_cents(s, "hgx-h100") == 1_750_000
        assert svc.lead_time_days(s, "hgx-h100") == 4
        actions = {e.action for e in s.exec(select(AuditEvent)).all()}
    assert {
        "catalog.node_added",
        "catalog.node_changed",
        "catalog.batch_added",
        "catalog.batch_arrived",
        "catalog.price_changed",
        "catalog.lead_time_changed",
    } <= actions


def test_a_node_of_an_order_cannot_be_freed_by_hand(
    client, seeded, make_user, login, engine
) -> None:  # type: ignore[no-untyped-def]
    from tests.catalog.test_service import make_order
    from tests.conftest import START

    u = make_user()
    with Session(engine) as s:
        o = make_order(s, u.id)
        svc.reserve_for_order(s, order_id=o.id, sku_id="hgx-b200", quantity=1, now=START)
        (n,) = svc.nodes_for_order(s, o.id)
        node_id = n.id
        s.commit()
    login(client, make_user("ops"))
    assert client.post(f"/staff/nodes/{node_id}", data={"state": "available"}).status_code == 409


def test_staff_numbers_follow_the_one_number_rule(client, seeded, make_user, login, engine) -> None:  # type: ignore[no-untyped-def]
    """Full-width digits (a Chinese input method) are accepted; superscripts, signs and
    decimals are refused with the field's message, and nothing changes."""
    login(client, make_user("ops"))
    for days in ("²", "-3", "4.5", "1_0", "四"):
        before = _snapshot(engine)
        r = client.post("/staff/lead-times/hgx-h100", data={"days": days})
        assert r.status_code == 422, days
        assert "Enter a whole number of business days." in r.text
        assert _snapshot(engine) == before
    for qty in ("³", "+2", "2.0"):
        before = _snapshot(engine)
        r = client.post(
            "/staff/batches/add",
            data={"sku_id": "hgx-b300", "quantity": qty, "expected_on": "2026-12-20"},
        )
        assert r.status_code == 422 and "Enter a whole number of nodes." in r.text, qty
        assert _snapshot(engine) == before
    assert client.post("/staff/lead-times/hgx-h100", data={"days": "６"}).status_code == 303
    with Session(engine) as s:
        assert svc.lead_time_days(s, "hgx-h100") == 6
