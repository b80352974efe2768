"""Self-serve cancel before delivery racing ops delivering the same order: one wins.

Each side runs in its own thread with its own session and transaction, as two app
processes would; a barrier releases them together. Whichever commits first decides: a
cancelled order is never delivered (and its hold never posted), a delivered order is never
refunded; the ledger invariants hold either way. Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlmodel import Session, select

from app.catalog.models import Node
from app.ledger.models import Hold
from app.orders import ops, service
from app.orders.models import Order
from tests.orders.test_checkout import B200, pay_form, place

ROUNDS = 4


def test_cancel_and_delivery_race_one_wins(
    client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    stock("hgx-b200", ROUNDS)
    u = make_user()
    fund(u, ROUNDS * B200)
    login(client, u)
    ops_user = make_user(role="ops")
    fp = "256 SHA256:" + "A" * 43 + " root@node (ED25519)"
    order_ids = []
    for i in range(ROUNDS):
        oid = place(client)
        assert client.post(f"/orders/{oid}/pay", data=pay_form(client, oid)).status_code == 303
        with Session(engine, expire_on_commit=False) as s:
            ops.set_credentials(
                s,
                actor=ops_user,
                order_id=oid,
                data=ops.CredentialsInput(
                    ssh_user="ubuntu", hosts=[ops.HostInput(ip=f"10.20.0.{i + 5}", fingerprints=fp)]
                ),
                now=clock.now(),
            )
            s.commit()
        order_ids.append(oid)

    outcomes: dict[int, dict[str, Any]] = {}
    for oid in order_ids:
        barrier = threading.Barrier(2)
        result: dict[str, Any] = {}

        def customer(oid: int = oid, barrier: threading.Barrier = barrier, result=result) -> None:
            with Session(engine, expire_on_commit=False) as s:
                barrier.wait()
                try:
                    service.cancel_order(
                        s, user=u, order_id=oid, now=clock.now(), expected_action="refund"
                    )
                    s.commit()
                    result["cancel"] = "ok"
                except service.OrderChangedMeanwhile:
                    s.rollback()
                    result["cancel"] = "changed"

        def operator(oid: int = oid, barrier: threading.Barrier = barrier, result=result) -> None:
            with Session(engine, expire_on_commit=False) as s:
                barrier.wait()
                try:
                    ops.mark_delivered(s, actor=ops_user, order_id=oid, now=clock.now())
                    s.commit()
                    result["deliver"] = "ok"
                except ops.OrderStateConflict:
                    s.rollback()
                    result["deliver"] = "conflict"

        threads = [threading.Thread(target=customer), threading.Thread(target=operator)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads), "a side never finished (deadlock?)"
        outcomes[oid] = result

    with Session(engine) as s:
        for oid, result in outcomes.items():
            order = s.get(Order, oid)
            assert order is not None
            hold = s.exec(select(Hold).where(Hold.order_id == oid)).one()
            if order.status == "cancelled":
                assert result == {"cancel": "ok", "deliver": "conflict"}
                assert hold.status == "voided"
                assert s.exec(select(Node).where(Node.order_id == oid)).all() == []
            else:
                assert order.status == "delivered"
                assert result == {"cancel": "changed", "deliver": "ok"}
                assert hold.status == "posted"
    won_by_cancel = sum(1 for r in outcomes.values() if r.get("cancel") == "ok")
    assert balances(u) == (won_by_cancel * B200, 0)
    ledger_ok()
