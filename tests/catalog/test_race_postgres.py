"""Two (eight) customers racing for the last node on PostgreSQL: exactly one gets it.

Each buyer runs in its own thread with its own connection and transaction, as separate
app processes would; a barrier releases them at once. The others must see the later date
(StockChanged when they had seen the in-stock date) and nothing is held twice.
"""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import func
from sqlmodel import Session, select

from app.accounts.models import User
from app.catalog import service as svc
from app.catalog.models import IncomingBatch, Node, SkuStock, StockReservation
from app.db import make_engine
from app.main import import_models
from app.orders.models import Order
from tests.conftest import START

BUYERS = 8


def test_last_node_goes_to_exactly_one_order(pg_url: str) -> None:
    import_models()
    engine = make_engine(pg_url, pool_size=BUYERS + 2)
    try:
        with Session(engine) as s:
            s.add(SkuStock(sku_id="hgx-b300", lead_time_business_days=3, updated_at=START))
            s.add(
                Node(
                    sku_id="hgx-b300",
                    hostname="b300-001",
                    state="available",
                    mgmt_ip="10.20.4.11",
                    created_at=START,
                    updated_at=START,
                )
            )
            s.add(
                IncomingBatch(
                    sku_id="hgx-b300",
                    quantity=BUYERS,
                    expected_on=START.date() + timedelta(days=14),
                    created_at=START,
                )
            )
            u = User(email="racer@example.com", password_hash="x", created_at=START)
            s.add(u)
            s.flush()
            order_ids = []
            for i in range(BUYERS):
                o = Order(
                    user_id=u.id,
                    idempotency_key=f"race-{i}",
                    sku_id="hgx-b300",
                    quantity=1,
                    image_id="ubuntu-24.04-cuda",
                    unit_price_cents=3_990_000,
                    monthly_total_cents=3_990_000,
                    created_at=START,
                )
                s.add(o)
                s.flush()
                order_ids.append(o.id)
            seen = svc.current_promise(s, "hgx-b300", 1, START)
            s.commit()
        assert seen.in_stock

        barrier = threading.Barrier(BUYERS)
        results: dict[int, object] = {}

        def buy(order_id: int) -> None:
            with Session(engine) as s:
                barrier.wait()
                try:
                    p = svc.reserve_for_order(
                        s,
                        order_id=order_id,
                        sku_id="hgx-b300",
                        quantity=1,
                        now=START,
                        expected_date=seen.date,
                    )
                    s.commit()
                    results[order_id] = p
                except svc.StockChanged as e:
                    s.rollback()
                    results[order_id] = e
                except Exception as e:  # noqa: BLE001 — recorded and asserted below
                    s.rollback()
                    results[order_id] = e

        threads = [threading.Thread(target=buy, args=(oid,)) for oid in order_ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)

        winners = [oid for oid, r in results.items() if isinstance(r, svc.Promise)]
        changed = [r for r in results.values() if isinstance(r, svc.StockChanged)]
        assert len(results) == BUYERS
        assert len(winners) == 1, results
        assert len(changed) == BUYERS - 1, results
        assert all(c.promise.date > seen.date and not c.promise.in_stock for c in changed)
        with Session(engine) as s:
            held = s.exec(select(Node).where(Node.state == "held")).all()
            assert [n.order_id for n in held] == winners
            assert s.exec(select(func.count()).select_from(StockReservation)).one() == 1
            # the losers, told the later date, can still buy from the batch — one unit each
            for oid in order_ids:
                if oid not in winners:
                    p = svc.reserve_for_order(
                        s, order_id=oid, sku_id="hgx-b300", quantity=1, now=START
                    )
                    assert not p.in_stock
            s.commit()
            (b,) = s.exec(select(IncomingBatch)).all()
            assert b.reserved == BUYERS - 1
    finally:
        engine.dispose()
