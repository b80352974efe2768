"""The console's launch files for an order: the ordered layout (its SKU and node count),
the delivered nodes in the hostfile and rendezvous, and only for the order's owner."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from app.orders.models import Order
from tests.support.factories import deliver, make_order

SIZING = "model=llama-3.1-8b&tokens=1e10&precision=bf16&method=full&recompute=auto&par=auto"


def _order(
    engine: Any, clock: Any, make_user: Any, stock: Any, sizing: str = SIZING
) -> tuple[Any, int]:
    stock("hgx-h100", 1)
    user = make_user()
    order = make_order(engine, user, clock.now(), sku="hgx-h100", nodes=1)
    assert order.id is not None
    with Session(engine) as s:  # the /size query the deploy form carried
        row = s.get(Order, order.id)
        assert row is not None
        row.sizing_query = sizing
        s.commit()
    return user, order.id


def test_before_delivery_placeholders_after_delivery_the_nodes(
    client: Any, engine: Any, clock: Any, make_user: Any, login: Any, stock: Any
) -> None:
    user, oid = _order(engine, clock, make_user, stock)
    login(client, user)
    r = client.get(f"/console/orders/{oid}/launch?framework=deepspeed")
    assert r.status_code == 200, r.text
    assert "node-1 slots=8" in r.text
    assert (
        f'href="/console/orders/{oid}/launch/file?framework=deepspeed&amp;name=hostfile"' in r.text
    )
    deliver(engine, oid, clock.now(), ip="203.0.113.77")
    hostfile = client.get(f"/console/orders/{oid}/launch/file?framework=deepspeed&name=hostfile")
    assert hostfile.status_code == 200
    assert hostfile.text == "203.0.113.77 slots=8\n"
    page = client.get(f"/console/orders/{oid}/launch?framework=torchtitan").text
    assert "launch_job.py" in page and "HGX H100" in page
    assert f'href="/console/orders/{oid}/launch"' in client.get(f"/console/orders/{oid}").text


def test_another_customer_gets_404_and_never_the_hosts(
    client: Any, engine: Any, clock: Any, make_user: Any, login: Any, stock: Any
) -> None:
    _user, oid = _order(engine, clock, make_user, stock)
    deliver(engine, oid, clock.now(), ip="203.0.113.78")
    login(client, make_user())
    for path in (
        f"/console/orders/{oid}/launch",
        f"/console/orders/{oid}/launch/file?framework=deepspeed&name=hostfile",
    ):
        r = client.get(path)
        assert r.status_code == 404
        assert "203.0.113.78" not in r.text


def test_order_without_sizing_says_so(
    client: Any, engine: Any, clock: Any, make_user: Any, login: Any, stock: Any
) -> None:
    user, oid = _order(engine, clock, make_user, stock, sizing="")
    login(client, user)
    r = client.get(f"/console/orders/{oid}/launch")
    assert r.status_code == 200
    assert "without a sizing answer" in r.text
    assert client.get(f"/console/orders/{oid}/launch/file?name=hostfile").status_code == 422
