"""Issue 19, defect 5: ops end a lease early — they confirm and give a reason the customer
reads; the unused whole days of the paid month go back to the balance, pro rata, rounded
down to the cent, as one ledger entry named for the order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlmodel import Session, select

from app.clock import utc
from app.ledger.models import JournalEntry
from app.ledger.postings import LedgerRuleError, unused_days_credit
from app.notifications.models import Notification, OutboxEmail
from app.orders.models import Order
from tests.ops.helpers import fingerprint, paid_order, seed_catalog


def test_unused_whole_days_pro_rata_rounded_down() -> None:
    start = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    end = datetime(2027, 1, 1, 9, 0, tzinfo=UTC)  # a 31-day month
    # Two minutes after the charge: 30 whole days left of 31.
    assert unused_days_credit(3_380_000, start, end, start + timedelta(minutes=2)) == (
        30,
        3_380_000 * 30 // 31,
    )
    assert unused_days_credit(100, start, end, start + timedelta(minutes=2)) == (30, 96)  # 96.77
    assert unused_days_credit(3_100, start, end, end - timedelta(hours=23)) == (0, 0)
    assert unused_days_credit(3_100, start, end, end + timedelta(days=3)) == (0, 0)
    assert unused_days_credit(3_100, start, end, start - timedelta(days=1)) == (31, 3_100)
    with pytest.raises(LedgerRuleError):
        unused_days_credit(100, end, start, start)


def _creds(order_id: int) -> dict[str, Any]:
    return {
        "count": "1",
        "ssh_user": "ubuntu",
        "ssh_port": "22",
        "ip_0": "192.0.2.50",
        "fp_0": fingerprint(f"{order_id}"),
    }


def _delivered(client, engine, customer, clock):  # type: ignore[no-untyped-def]
    order = paid_order(engine, customer, clock.now(), key="early")
    client.post(f"/staff/ops/orders/{order.id}/credentials", data=_creds(order.id))
    assert client.post(f"/staff/ops/orders/{order.id}/deliver", data={}).status_code == 303
    with Session(engine) as s:
        o = s.get(Order, order.id)
        assert o is not None and o.status == "delivered"
        return o


def _available(engine, user_id: int) -> int:  # type: ignore[no-untyped-def]
    from app.ledger import service as ledger

    with Session(engine) as s:
        return ledger.available_cents(s, user_id)


def _credits(engine, order_id: int) -> list[JournalEntry]:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        return list(
            s.exec(
                select(JournalEntry).where(
                    JournalEntry.kind == "lease_credit", JournalEntry.order_id == order_id
                )
            ).all()
        )


def _ledger_clean(engine) -> None:  # type: ignore[no-untyped-def]
    from app.reconcile import run_checks

    with Session(engine) as s:
        assert run_checks(s) == []


def test_ops_must_confirm_and_give_a_reason_and_nothing_changes_until_they_do(
    client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    login(client, make_user(role="ops"))
    order = _delivered(client, engine, customer, clock)
    before = _available(engine, customer.id)
    for data in ({}, {"reason": "capacity"[:3], "confirm": "true"}, {"reason": "hardware fault"}):
        r = client.post(f"/staff/ops/orders/{order.id}/end", data=data)
        assert r.status_code == 422
        assert 'role="alert"' in r.text
    with Session(engine) as s:
        o = s.get(Order, order.id)
        assert o is not None and o.status == "delivered"
    assert _available(engine, customer.id) == before and _credits(engine, order.id) == []


def test_early_end_credits_the_unused_days_and_tells_the_customer_why(
    client, new_client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    login(client, make_user(role="ops"))
    order = _delivered(client, engine, customer, clock)
    page = client.get(f"/staff/ops/orders/{order.id}").text
    assert 'id="end-credit"' in page and 'name="confirm"' in page
    before = _available(engine, customer.id)
    clock.advance(timedelta(minutes=2))
    r = client.post(
        f"/staff/ops/orders/{order.id}/end",
        data={
            "reason": "A power supply failed and cannot be replaced this month.",
            "confirm": "true",
        },
    )
    assert r.status_code == 303
    assert order.period_start is not None and order.period_end is not None
    days, cents = unused_days_credit(
        order.monthly_total_cents, utc(order.period_start), utc(order.period_end), clock.now()
    )
    assert days >= 27 and cents > 0
    assert _available(engine, customer.id) == before + cents
    [entry] = _credits(engine, order.id)
    assert entry.amount_cents == cents and entry.user_id == customer.id
    assert f"order #{order.id}" in entry.reason
    _ledger_clean(engine)
    with Session(engine) as s:
        n = s.exec(select(Notification).where(Notification.kind == "order.ended")).one()
        assert "power supply failed" in n.message
        mail = s.exec(select(OutboxEmail).where(OutboxEmail.kind == "order.ended")).one()
        assert "power supply failed" in mail.body
    buyer = new_client()
    login(buyer, customer)
    page = buyer.get(f"/console/orders/{order.id}").text
    assert 'id="end-reason"' in page and "power supply failed" in page
    # A second submit (double click, back button) changes nothing.
    r = client.post(
        f"/staff/ops/orders/{order.id}/end",
        data={
            "reason": "A power supply failed and cannot be replaced this month.",
            "confirm": "true",
        },
    )
    assert r.status_code == 303
    assert len(_credits(engine, order.id)) == 1
    assert _available(engine, customer.id) == before + cents


def test_the_credit_is_once_per_order_on_replay(engine, make_user, clock) -> None:  # type: ignore[no-untyped-def]
    from app.ledger import service as ledger
    from app.ledger.service import IdempotencyConflict

    seed_catalog(engine, clock.now())
    customer = make_user()
    order = paid_order(engine, customer, clock.now(), key="replay")
    with Session(engine) as s:
        a = ledger.credit_unused_days(
            s, user_id=customer.id, order_id=order.id, amount_cents=500, days=5, now=clock.now()
        )
        b = ledger.credit_unused_days(
            s, user_id=customer.id, order_id=order.id, amount_cents=500, days=5, now=clock.now()
        )
        assert a.id == b.id
        with pytest.raises(IdempotencyConflict):
            ledger.credit_unused_days(
                s, user_id=customer.id, order_id=order.id, amount_cents=700, days=7, now=clock.now()
            )
        s.commit()
    assert len(_credits(engine, order.id)) == 1
    _ledger_clean(engine)


def test_a_failure_halfway_keeps_neither_credit_nor_end(
    client, engine, make_user, login, clock, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from app.catalog import service as catalog

    seed_catalog(engine, clock.now())
    customer = make_user()
    login(client, make_user(role="ops"))
    order = _delivered(client, engine, customer, clock)
    before = _available(engine, customer.id)

    def broken(*_a: Any, **_k: Any) -> None:
        raise RuntimeError("inventory database went away")

    monkeypatch.setattr(catalog, "mark_nodes", broken)  # after the credit, before the end
    with pytest.raises(RuntimeError):  # the server answers 500; the test client re-raises
        client.post(
            f"/staff/ops/orders/{order.id}/end",
            data={"reason": "Hardware fault on the node.", "confirm": "true"},
        )
    assert _available(engine, customer.id) == before and _credits(engine, order.id) == []
    with Session(engine) as s:
        o = s.get(Order, order.id)
        assert o is not None and o.status == "delivered"
    _ledger_clean(engine)
