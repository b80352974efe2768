"""Stock services: prices with history, reserve/release, batches arriving, node states."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from sqlmodel import Session, select

from app.accounts.audit import AuditEvent
from app.catalog import service as svc
from app.catalog.models import IncomingBatch, Node, NodeState, PriceChange, SkuStock
from app.catalog.seed import seed
from app.errors import InvalidInput
from app.orders.models import Order
from tests.conftest import START


def make_order(
    session: Session, user_id: int, sku: str = "hgx-b200", qty: int = 1, key: str = "k"
) -> Order:
    o = Order(
        user_id=user_id,
        idempotency_key=key,
        sku_id=sku,
        quantity=qty,
        image_id="ubuntu-24.04-cuda",
        unit_price_cents=3_490_000,
        monthly_total_cents=3_490_000 * qty,
        created_at=START,
    )
    session.add(o)
    session.flush()
    assert o.id is not None
    return o


def only_stock(
    session: Session, sku: str, available: int, batches: list[tuple[int, int]] = ()
) -> None:  # type: ignore[assignment]
    session.add(SkuStock(sku_id=sku, lead_time_business_days=2, updated_at=START))
    for i in range(available):
        svc.add_node(session, sku_id=sku, now=START)
    for days, qty in batches:
        session.add(
            IncomingBatch(
                sku_id=sku,
                quantity=qty,
                expected_on=START.date() + timedelta(days=days),
                created_at=START,
            )
        )
    session.flush()


def test_seed_is_idempotent(session: Session) -> None:
    assert seed(session, START)
    n = len(session.exec(select(Node)).all())
    assert seed(session, START) == []
    assert len(session.exec(select(Node)).all()) == n
    ips = [x.mgmt_ip for x in session.exec(select(Node)).all()]
    assert all(ip.startswith("10.") for ip in ips) and len(set(ips)) == len(ips)
    assert svc.list_price_cents(session, "hgx-b200") == 3_490_000


def test_price_change_keeps_history_and_audit(session: Session, make_user) -> None:  # type: ignore[no-untyped-def]
    ops = make_user("ops")
    seed(session, START)
    svc.set_list_price(
        session, sku_id="hgx-h100", cents=1_790_000, reason="new market", actor=ops, now=START
    )
    assert svc.list_price_cents(session, "hgx-h100") == 1_790_000
    (h,) = svc.price_history(session, "hgx-h100")
    assert (h.old_cents, h.new_cents, h.actor_email, h.reason) == (
        1_690_000,
        1_790_000,
        ops.email,
        "new market",
    )
    assert session.exec(
        select(AuditEvent).where(AuditEvent.action == "catalog.price_changed")
    ).first()
    with pytest.raises(InvalidInput) as e:
        svc.set_list_price(session, sku_id="hgx-h100", cents=0, reason="", actor=ops, now=START)
    assert set(e.value.errors) == {"cents", "reason"}
    assert len(session.exec(select(PriceChange)).all()) == 1


def test_reserve_holds_nodes_then_batches_and_release_gives_back(
    session: Session, make_user
) -> None:  # type: ignore[no-untyped-def]
    u = make_user()
    only_stock(session, "hgx-b200", 1, [(10, 2)])
    o1, o2 = make_order(session, u.id, key="a"), make_order(session, u.id, key="b", qty=2)
    p1 = svc.reserve_for_order(session, order_id=o1.id, sku_id="hgx-b200", quantity=1, now=START)
    assert p1.in_stock
    assert [n.state for n in svc.nodes_for_order(session, o1.id)] == [NodeState.held.value]
    # idempotent
    assert (
        svc.reserve_for_order(
            session, order_id=o1.id, sku_id="hgx-b200", quantity=1, now=START
        ).date
        == p1.date
    )
    assert svc.current_promise(session, "hgx-b200", 1, START).in_stock is False
    # the customer saw the in-stock date: stock changed
    with pytest.raises(svc.StockChanged) as e:
        svc.reserve_for_order(
            session, order_id=o2.id, sku_id="hgx-b200", quantity=2, now=START, expected_date=p1.date
        )
    assert e.value.code == "stock_changed" and e.value.promise.date > p1.date
    p2 = svc.reserve_for_order(session, order_id=o2.id, sku_id="hgx-b200", quantity=2, now=START)
    assert not p2.in_stock and svc.waiting_units(session, o2.id) == 2
    assert not svc.current_promise(
        session, "hgx-b200", 1, START
    ).available  # nothing left to promise
    with pytest.raises(svc.TalkToSales):
        o3 = make_order(session, u.id, key="c")
        svc.reserve_for_order(session, order_id=o3.id, sku_id="hgx-b200", quantity=1, now=START)
    # cancel o1: its node is available again
    assert svc.release_for_order(session, o1.id, START) == 1
    assert svc.current_promise(session, "hgx-b200", 1, START).in_stock
    assert svc.frozen_promise(session, o1.id) is None
    # batch arrives: o2's two units become nodes held for o2
    (batch,) = svc.open_batches(session, "hgx-b200")
    nodes = svc.mark_batch_arrived(session, batch.id, now=START + timedelta(days=10))
    assert len(nodes) == 2
    assert {n.order_id for n in nodes} == {o2.id} and {n.state for n in nodes} == {"held"}
    assert svc.waiting_units(session, o2.id) == 0
    assert svc.frozen_promise(session, o2.id).date == p2.date  # the frozen date does not move
    # ops provision, lease, wipe, free
    for st in ("provisioning", "leased", "wiping"):
        svc.mark_nodes(session, o2.id, st, START)
        assert {n.state for n in svc.nodes_for_order(session, o2.id)} == {st}
    svc.mark_nodes(session, o2.id, "available", START)
    assert svc.nodes_for_order(session, o2.id) == []
    assert svc.available_count(session, "hgx-b200") == 3


def test_release_of_batch_units_frees_them(session: Session, make_user) -> None:  # type: ignore[no-untyped-def]
    u = make_user()
    only_stock(session, "hgx-h200", 0, [(5, 1)])
    o = make_order(session, u.id, sku="hgx-h200")
    svc.reserve_for_order(session, order_id=o.id, sku_id="hgx-h200", quantity=1, now=START)
    assert not svc.current_promise(session, "hgx-h200", 1, START).available
    svc.release_for_order(session, o.id, START)
    assert svc.current_promise(session, "hgx-h200", 1, START).available


def test_ops_node_rules(session: Session, make_user) -> None:  # type: ignore[no-untyped-def]
    ops = make_user("ops")
    only_stock(session, "hgx-h100", 1)
    n = session.exec(select(Node)).one()
    pool = svc.free_ip_pool(session, "hgx-h100", 3)
    assert len(pool) == 3 and n.mgmt_ip not in pool
    svc.update_node(session, n.id, now=START, actor=ops, state="maintenance", mgmt_ip=pool[0])
    assert n.state == "maintenance" and n.mgmt_ip == pool[0]
    assert svc.current_promise(session, "hgx-h100", 1, START).available is False
    with pytest.raises(InvalidInput):
        svc.update_node(session, n.id, now=START, actor=ops, mgmt_ip="10.0.0.300")
    with pytest.raises(InvalidInput):
        svc.update_node(session, n.id, now=START, actor=ops, state="leased")
    with pytest.raises(InvalidInput):
        svc.add_node(session, sku_id="gb300-nvl72", now=START)
    with pytest.raises(InvalidInput):
        svc.add_batch(
            session, sku_id="hgx-h100", quantity=0, expected_on=date(2020, 1, 1), now=START
        )


def test_unknown_sku_is_not_found(session: Session) -> None:
    with pytest.raises(svc.UnknownSku):
        svc.list_price_cents(session, "nope")


def test_swap_nodes_takes_free_ones_and_gives_back_the_rest(session: Session, make_user) -> None:  # type: ignore[no-untyped-def]
    from app.errors import Conflict

    u = make_user()
    only_stock(session, "hgx-b200", 4)
    mine = make_order(session, u.id, qty=2, key="mine")
    other = make_order(session, u.id, qty=1, key="other")
    svc.reserve_for_order(session, order_id=mine.id, sku_id="hgx-b200", quantity=2, now=START)
    svc.reserve_for_order(session, order_id=other.id, sku_id="hgx-b200", quantity=1, now=START)
    held = [n.id for n in svc.nodes_for_order(session, mine.id)]
    taken = svc.nodes_for_order(session, other.id)[0].id
    (free,) = [n.id for n in svc.free_nodes(session, "hgx-b200")]
    svc.mark_nodes(session, mine.id, NodeState.provisioning.value, START)
    session.commit()

    # A node another order holds cannot be swapped in; nothing changes.
    with pytest.raises(Conflict):
        svc.swap_nodes(
            session, order_id=mine.id, wanted=[held[0], taken], provisioning=True, now=START
        )
    session.rollback()
    assert {n.id for n in svc.nodes_for_order(session, mine.id)} == set(held)

    chosen = svc.swap_nodes(
        session, order_id=mine.id, wanted=[held[0], free], provisioning=True, now=START
    )
    assert [n.id for n in chosen] == [held[0], free]
    assert {n.id for n in svc.nodes_for_order(session, mine.id)} == {held[0], free}
    gone = session.get(Node, held[1])
    assert gone is not None and gone.order_id is None
    assert gone.state == NodeState.wiping.value  # set-up had started: wipe before reuse
    assert session.get(Node, free).state == NodeState.provisioning.value  # type: ignore[union-attr]
