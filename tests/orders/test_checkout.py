"""Checkout end to end over HTTP: deploy → review → pay, top-up, late refund, cancels."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from babel.dates import format_date
from sqlmodel import Session, col, select

from app.accounts.models import User
from app.catalog.models import Node
from app.ledger.models import Hold
from app.notifications.models import Notification, OutboxEmail
from app.orders import renewals, service
from app.orders.models import Order, OrderEvent
from tests.orders.conftest import deploy_form, form_value, new_public_key
from tests.support import factories

B200 = 3_490_000  # list price of one HGX B200 node a month, in cents


def place(client: Any, **over: Any) -> int:
    r = client.post("/deploy", data=deploy_form(client, **over))
    assert r.status_code == 303, r.text
    m = re.fullmatch(r"/orders/(\d+)/review", r.headers["location"])
    assert m
    return int(m.group(1))


def pay_form(client: Any, order_id: int) -> dict[str, str]:
    r = client.get(f"/orders/{order_id}/review")
    assert r.status_code == 200, r.text
    return {
        "idempotency_key": form_value(r.text, "idempotency_key"),
        "promise_date": form_value(r.text, "promise_date"),
    }


def order_of(engine: Any, order_id: int) -> Order:
    with Session(engine) as s:
        o = s.get(Order, order_id)
        assert o is not None
        return o


def holds_of(engine: Any, order_id: int) -> list[Hold]:
    with Session(engine) as s:
        return list(s.exec(select(Hold).where(Hold.order_id == order_id)).all())


def deliver(engine: Any, clock: Any, make_user: Any, order_id: int, ip: str = "10.20.0.5") -> None:
    """Ops hands over: credentials, then delivered (posts the hold)."""
    factories.deliver(engine, order_id, clock.now(), actor=make_user(role="ops"), ip=ip)


def running_lease(client, engine, clock, make_user, login, stock, fund) -> tuple[Any, int]:
    """A customer with two months of balance whose order was paid and delivered."""
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, 2 * B200)
    login(client, u)
    oid = place(client)
    client.post(f"/orders/{oid}/pay", data=pay_form(client, oid))
    deliver(engine, clock, make_user, oid)
    return u, oid


def test_paid_on_time_and_delivered(
    client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    stock("hgx-b200", 2)
    u = make_user()
    fund(u, 5_000_000)
    login(client, u)
    oid = place(client, note_model_size="70B", note_private_network="", note_free_text="hi")
    r = client.get(f"/orders/{oid}/review")
    assert "HGX B200" in r.text and "70B" in r.text
    assert "$34,900.00" in r.text and "$50,000.00" in r.text  # price and balance
    promised = form_value(r.text, "promise_date")

    r = client.post(f"/orders/{oid}/pay", data=pay_form(client, oid))
    assert r.status_code == 303 and r.headers["location"] == f"/console/orders/{oid}"
    o = order_of(engine, oid)
    assert o.status == "paid" and o.promised_date.isoformat() == promised
    assert o.first_hold_id is not None
    assert balances(u) == (5_000_000 - B200, B200)
    with Session(engine) as s:
        assert s.exec(select(Node).where(Node.order_id == oid)).all()  # a node is held
        assert s.exec(select(Notification).where(Notification.user_id == u.id)).all()
        assert s.exec(select(OutboxEmail).where(OutboxEmail.to_addr == u.email)).all()
    page = client.get(f"/console/orders/{oid}").text
    assert "data-countdown" in page and "nvidia-smi topo -m" in page and "830 GB/s" in page
    assert "Cancel and get a full refund" not in page  # not late: no refund button
    console = client.get("/console").text
    assert "Paid" in console and 'class="unread"' in console and f"Order #{oid} is paid" in console
    assert 'class="unread"' not in client.get("/console").text  # seen once
    ledger_ok()

    deliver(engine, clock, make_user, oid)
    o = order_of(engine, oid)
    assert o.status == "delivered" and o.period_end is not None
    assert balances(u) == (5_000_000 - B200, 0)
    page = client.get(f"/console/orders/{oid}").text
    assert "ssh ubuntu@10.20.0.5" in page and 'data-copy="#ssh-' in page
    assert "SHA256:" in page and "Next renewal" in page
    ledger_ok()


def test_credentials_show_before_delivery(
    client, engine, clock, make_user, login, stock, fund
) -> None:
    from app.orders import ops

    stock("hgx-b200", 1)
    u = make_user()
    fund(u, B200)
    login(client, u)
    oid = place(client)
    client.post(f"/orders/{oid}/pay", data=pay_form(client, oid))
    ops_user = make_user(role="ops")
    with Session(engine, expire_on_commit=False) as s:
        ops.set_credentials(
            s,
            actor=ops_user,
            order_id=oid,
            data=ops.CredentialsInput(
                ssh_user="root",
                hosts=[
                    ops.HostInput(
                        ip="10.1.2.3", fingerprints="256 SHA256:" + "B" * 43 + " h (ED25519)"
                    )
                ],
            ),
            now=clock.now(),
        )
        s.commit()
    page = client.get(f"/console/orders/{oid}").text
    assert "ssh root@10.1.2.3" in page  # early hand-over: visible while still "paid"
    assert order_of(engine, oid).status == "paid"


def test_shortfall_topup_then_pay_with_one_click(
    client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    from app.payments.models import Invoice

    stock("hgx-b200", 1)
    u = make_user()
    fund(u, 1_000_000)
    login(client, u)
    oid = place(client)
    r = client.get(f"/orders/{oid}/review")
    assert "$24,900.00" in r.text  # the shortfall
    assert form_value(r.text, "amount") == "24900.00"

    # Paying anyway is refused with the shortfall; nothing is held.
    r = client.post(f"/orders/{oid}/pay", data=pay_form(client, oid))
    assert r.status_code == 402 and "$24,900.00" in r.text
    assert holds_of(engine, oid) == [] and order_of(engine, oid).status == "awaiting_payment"
    with Session(engine) as s:
        assert s.exec(select(Node).where(Node.order_id == oid)).all() == []

    # Less than the shortfall is refused; the shortfall itself makes an invoice.
    r = client.post(f"/orders/{oid}/topup", data={"amount": "100", "currency": "USDT"})
    assert r.status_code == 422 and "at least the shortfall" in r.text
    r = client.post(f"/orders/{oid}/topup", data={"amount": "24900.00", "currency": "USDT"})
    assert r.status_code == 303
    invoice_page = r.headers["location"]
    with Session(engine, expire_on_commit=False) as s:
        inv = s.exec(select(Invoice).where(Invoice.user_id == u.id)).one()
        assert inv.amount_cents == 2_490_000 and inv.return_to == f"/orders/{oid}/review"
    assert invoice_page == f"/topups/{inv.id}"
    assert f'href="{invoice_page}"' in client.get(f"/orders/{oid}/review").text  # still open
    # The simulated provider is paid in full; its signed webhook settles the invoice.
    r = client.post(f"{invoice_page}/simulate", data={"action": "pay_full"})
    assert r.status_code == 303
    page = client.get(invoice_page).text
    assert f'href="/orders/{oid}/review"' in page  # the way back to the same review
    assert balances(u) == (B200, 0)

    # Back on the same review: one click pays, nothing retyped.
    r = client.get(f"/orders/{oid}/review")
    assert "None" in r.text and "disabled" not in r.text.split('action="/orders/')[1][:600]
    r = client.post(f"/orders/{oid}/pay", data=pay_form(client, oid))
    assert r.status_code == 303
    assert order_of(engine, oid).status == "paid"
    assert balances(u) == (0, B200)
    ledger_ok()


def test_late_cancel_refunds_in_full(
    client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, 4_000_000)
    login(client, u)
    oid = place(client)
    client.post(f"/orders/{oid}/pay", data=pay_form(client, oid))
    o = order_of(engine, oid)

    clock.advance(timedelta(days=(o.promised_date - clock.now().date()).days + 1))
    page = client.get(f"/console/orders/{oid}").text
    assert "Cancel and get a full refund" in page and "Late" in page
    assert "Late" in client.get("/console").text
    # The button leads to the confirmation step; only the confirmed POST cancels.
    r = client.post(f"/orders/{oid}/cancel")
    assert r.status_code == 303 and r.headers["location"] == f"/orders/{oid}/cancel"
    assert order_of(engine, oid).status == "paid"
    confirm = client.get(f"/orders/{oid}/cancel")
    assert confirm.status_code == 200 and "We missed the promised date" in confirm.text
    r = client.post(f"/orders/{oid}/cancel", data={"confirm": "yes"})
    assert r.status_code == 303
    o = order_of(engine, oid)
    assert o.status == "cancelled" and o.cancelled_at is not None
    assert balances(u) == (4_000_000, 0)  # exactly what it was
    with Session(engine) as s:
        assert s.exec(select(Node).where(Node.order_id == oid)).all() == []  # released
        kinds = [e.kind for e in s.exec(select(OrderEvent).where(OrderEvent.order_id == oid))]
        assert "cancelled" in kinds
    # A second click changes nothing.
    client.post(f"/orders/{oid}/cancel", data={"confirm": "yes"})
    assert balances(u) == (4_000_000, 0)
    ledger_ok()


def test_cancel_before_delivery_is_self_serve_with_a_confirmation(
    client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, 4_000_000)
    login(client, u)
    oid = place(client)
    client.post(f"/orders/{oid}/pay", data=pay_form(client, oid))
    assert balances(u) == (4_000_000 - B200, B200)
    page = client.get(f"/console/orders/{oid}").text
    assert "Cancel this order" in page and "write to our operations team" not in page
    confirm = client.get(f"/orders/{oid}/cancel")
    assert confirm.status_code == 200
    assert "goes back to your balance in full" in confirm.text and 'name="confirm"' in confirm.text
    assert order_of(engine, oid).status == "paid"  # looking at the confirmation changes nothing
    r = client.post(f"/orders/{oid}/cancel", data={"confirm": "yes"})
    assert r.status_code == 303 and r.headers["location"] == f"/console/orders/{oid}"
    assert order_of(engine, oid).status == "cancelled"
    assert balances(u) == (4_000_000, 0)
    with Session(engine) as s:
        assert s.exec(select(Node).where(Node.order_id == oid)).all() == []
        assert s.exec(select(Node).where(Node.state == "available")).first() is not None
    assert "before delivery" in client.get(f"/console/orders/{oid}").text
    # Replays and the confirmation page after the fact change nothing.
    client.post(f"/orders/{oid}/cancel", data={"confirm": "yes"})
    assert client.get(f"/orders/{oid}/cancel").status_code in (200, 303)
    assert balances(u) == (4_000_000, 0)
    ledger_ok()


def test_cancel_after_delivery_is_no_refund(
    client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, B200)
    login(client, u)
    oid = place(client)
    client.post(f"/orders/{oid}/pay", data=pay_form(client, oid))
    deliver(engine, clock, make_user, oid)
    # The confirmation page of a refund-cancel is not offered for a delivered order.
    r = client.get(f"/orders/{oid}/cancel")
    assert r.status_code == 303 and r.headers["location"] == f"/console/orders/{oid}"
    assert balances(u) == (0, 0)
    ledger_ok()


def test_late_then_delivered_anyway(
    client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, B200)
    login(client, u)
    oid = place(client)
    client.post(f"/orders/{oid}/pay", data=pay_form(client, oid))
    clock.advance(timedelta(days=10))
    assert "Cancel and get a full refund" in client.get(f"/console/orders/{oid}").text
    deliver(engine, clock, make_user, oid)
    o = order_of(engine, oid)
    assert o.status == "delivered"
    assert balances(u) == (0, 0)
    page = client.get(f"/console/orders/{oid}").text
    assert "Cancel and get a full refund" not in page and "Cancel at the end of this month" in page
    ledger_ok()


def test_cancel_mid_month_costs_nothing_and_stops_renewal(
    client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    u, oid = running_lease(client, engine, clock, make_user, login, stock, fund)
    clock.advance(timedelta(days=12))
    r = client.post(f"/orders/{oid}/cancel")
    assert r.status_code == 303
    o = order_of(engine, oid)
    assert o.status == "ending" and o.cancel_at_period_end
    assert balances(u) == (B200, 0)  # no refund, no fee
    page = client.get(f"/console/orders/{oid}").text
    assert "Lease ends" in page
    # The renewal job does not charge the next month.
    clock.advance(timedelta(days=40))
    with Session(engine, expire_on_commit=False) as s:
        renewals.run_due_renewals(s, clock.now())
        s.commit()
    assert balances(u) == (B200, 0)
    assert order_of(engine, oid).status in ("ended", "ending")
    ledger_ok()


def test_a_cancel_at_the_period_end_can_be_taken_back_until_the_month_runs_out(
    client, new_client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    u, oid = running_lease(client, engine, clock, make_user, login, stock, fund)
    clock.advance(timedelta(days=12))
    client.post(f"/orders/{oid}/cancel")
    page = client.get(f"/console/orders/{oid}").text
    assert "Keep renewing" in page and "Cancel at the end of this month" not in page
    # someone else's order: not theirs to keep
    assert login(new_client(), make_user()).post(f"/orders/{oid}/keep").status_code == 404
    for _ in range(2):  # the same click twice: one change, one event
        r = client.post(f"/orders/{oid}/keep")
        assert r.status_code == 303
    o = order_of(engine, oid)
    assert o.status == "delivered" and not o.cancel_at_period_end
    with Session(engine) as s:  # the cancel said nothing more would be charged: this says it will
        kinds = [n.kind for n in s.exec(select(Notification).where(Notification.user_id == u.id))]
    assert kinds.count("order_renews") == 1 and kinds.count("order_ending") == 1
    page = client.get(f"/console/orders/{oid}").text
    assert "Next renewal" in page and "Cancel at the end of this month" in page
    assert page.count("Renewal kept") == 1
    # the renewal at the period end charges the next month again
    clock.advance(timedelta(days=20))
    with Session(engine, expire_on_commit=False) as s:
        renewals.run_due_renewals(s, clock.now())
        s.commit()
    assert balances(u) == (0, 0) and order_of(engine, oid).status == "delivered"
    ledger_ok()


def test_a_cancel_cannot_be_taken_back_once_the_paid_month_is_over(
    client, engine, clock, make_user, login, stock, fund, balances
) -> None:
    u, oid = running_lease(client, engine, clock, make_user, login, stock, fund)
    client.post(f"/orders/{oid}/cancel")
    clock.advance(timedelta(days=40))  # past the period end, before the worker ran
    r = client.post(f"/orders/{oid}/keep", follow_redirects=True)
    assert "Only a lease you cancelled at the end of its month can be kept" in r.text
    assert order_of(engine, oid).status == "ending" and balances(u) == (B200, 0)
    client.cookies.set("lang", "zh_CN")
    r = client.post(f"/orders/{oid}/keep", follow_redirects=True)
    assert "只有您设为月末取消的租用才能保留" in r.text


def test_a_pay_form_on_an_order_with_nothing_to_pay_goes_to_its_page(
    client, engine, clock, make_user, login, stock, fund
) -> None:
    """A replayed or tampered pay form on an order that is not waiting for payment shows
    the order, not a review page with a Pay button, and never says 'Paid' of a cancelled one."""
    u, oid = running_lease(client, engine, clock, make_user, login, stock, fund)
    r = client.post(f"/orders/{oid}/pay", data={"promise_date": "2026-02-30"})
    assert r.status_code == 303 and r.headers["location"] == f"/console/orders/{oid}"
    stock("hgx-b200", 1)
    other = place(client)
    client.post(f"/orders/{other}/pay", data=pay_form(client, other))
    client.post(f"/orders/{other}/cancel", data={"confirm": "yes"})
    assert order_of(engine, other).status == "cancelled"
    r = client.post(f"/orders/{other}/pay", data={}, follow_redirects=True)
    assert "Paid. Your order is confirmed" not in r.text
    assert order_of(engine, other).status == "cancelled"


def test_double_submit_makes_one_order_and_pays_once(
    client, engine, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    stock("hgx-b200", 2)
    u = make_user()
    fund(u, 10_000_000)
    login(client, u)
    data = deploy_form(client)
    r1 = client.post("/deploy", data=data)
    r2 = client.post("/deploy", data=data)
    assert r1.headers["location"] == r2.headers["location"]
    with Session(engine) as s:
        assert len(s.exec(select(Order).where(Order.user_id == u.id)).all()) == 1
    oid = int(r1.headers["location"].split("/")[2])
    form = pay_form(client, oid)
    assert client.post(f"/orders/{oid}/pay", data=form).status_code == 303
    assert client.post(f"/orders/{oid}/pay", data=form).status_code == 303
    assert len(holds_of(engine, oid)) == 1
    assert balances(u) == (10_000_000 - B200, B200)
    # The same form key with other choices is not silently a second order.
    r = client.post("/deploy", data={**data, "nodes": "2"})
    assert r.status_code == 409 and f"order #{oid}" in r.text
    ledger_ok()


def test_promise_changed_between_review_and_pay(
    client, engine, clock, make_user, login, stock, fund, balances
) -> None:
    stock("hgx-b200", 1)
    a, b = make_user(), make_user()
    fund(a, B200)
    fund(b, B200)
    login(client, a)
    oid = place(client)
    form = pay_form(client, oid)  # A sees "in stock" on the review

    from app.catalog import service as catalog

    with Session(engine, expire_on_commit=False) as s:  # B takes the last node meanwhile
        catalog.add_batch(
            s,
            sku_id="hgx-b200",
            quantity=4,
            expected_on=clock.now().date() + timedelta(days=10),
            now=clock.now(),
        )
        other = Order(
            user_id=b.id,
            idempotency_key="other",
            sku_id="hgx-b200",
            quantity=1,
            image_id="ubuntu-24.04-cuda",
            unit_price_cents=B200,
            monthly_total_cents=B200,
            created_at=clock.now(),
        )
        s.add(other)
        s.flush()
        catalog.reserve_for_order(
            s, order_id=other.id, sku_id="hgx-b200", quantity=1, now=clock.now()
        )
        s.commit()

    r = client.post(f"/orders/{oid}/pay", data=form)
    assert r.status_code == 409
    assert "The delivery date changed to" in r.text and "check it and pay again" in r.text
    new = form_value(r.text, "promise_date")
    assert new > form["promise_date"]
    assert holds_of(engine, oid) == [] and order_of(engine, oid).status == "awaiting_payment"
    assert balances(a) == (B200, 0)
    # The new date is on the page; paying again with it works.
    r = client.post(f"/orders/{oid}/pay", data={**form, "promise_date": new})
    assert r.status_code == 303
    assert order_of(engine, oid).promised_date.isoformat() == new


@pytest.mark.parametrize("where", ["hold", "stock"])
def test_failure_halfway_leaves_nothing(
    engine, clock, make_user, stock, fund, balances, ledger_ok, monkeypatch, where
) -> None:
    """The ledger's hold fails, or everything up to the SKU lock (the hold, the paid order,
    its messages: on PostgreSQL one statement) is written and then the reservation fails:
    nothing of the payment stays, even if the caller commits."""
    from app.catalog import service as catalog
    from app.ledger import service as ledger

    stock("hgx-b200", 1)
    u = make_user()
    fund(u, B200)
    draft, errors = service.parse_draft(
        {
            "sku": "hgx-b200",
            "nodes": 1,
            "image": "ubuntu-24.04-cuda",
            "new_key_name": "k",
            "new_key_text": new_public_key(),
        }
    )
    assert errors == {}
    with Session(engine, expire_on_commit=False) as s:
        order, _ = service.create_order(
            s, user=u, draft=draft, idempotency_key="k1", now=clock.now()
        )
        s.commit()

    def boom(*a: Any, **k: Any) -> None:
        raise RuntimeError("disk full")

    if where == "hold":
        monkeypatch.setattr(ledger, "place_hold_id", boom)
        monkeypatch.setattr(ledger, "hold_in_one_params", boom)
    else:
        monkeypatch.setattr(catalog, "reserve_for_order", boom)
    with Session(engine, expire_on_commit=False) as s:
        with pytest.raises(RuntimeError):
            service.pay_order(s, user=u, order_id=order.id, idempotency_key="k1", now=clock.now())
        s.commit()  # even if the caller commits, nothing of the payment stays
    monkeypatch.undo()
    assert order_of(engine, order.id).status == "awaiting_payment"
    assert order_of(engine, order.id).first_hold_id is None
    assert holds_of(engine, order.id) == []
    with Session(engine) as s:
        kinds = [e.kind for e in s.exec(select(OrderEvent).where(OrderEvent.order_id == order.id))]
        assert kinds == ["created"]
        assert s.exec(select(Notification).where(Notification.user_id == u.id)).all() == []
        assert s.exec(select(OutboxEmail).where(OutboxEmail.to_addr == u.email)).all() == []
    with Session(engine) as s:
        assert s.exec(select(Node).where(Node.order_id == order.id)).all() == []
        from app.catalog.models import StockReservation

        assert (
            s.exec(
                select(StockReservation).where(
                    StockReservation.order_id == order.id,
                    col(StockReservation.released_at).is_(None),
                )
            ).all()
            == []
        )
    assert balances(u) == (B200, 0)
    ledger_ok()
    # And it pays normally afterwards.
    with Session(engine, expire_on_commit=False) as s:
        service.pay_order(s, user=u, order_id=order.id, idempotency_key="k1", now=clock.now())
        s.commit()
    assert balances(u) == (0, B200)
    ledger_ok()


def test_date_moved_before_the_stock_lock_pays_once_with_the_real_date(
    engine, clock, make_user, stock, fund, balances, ledger_ok, monkeypatch
) -> None:
    """The messages are written with the date read just before the SKU lock; when another
    order moves it in between, everything of that try is rolled back and the payment goes
    through once, every message carrying the date actually promised."""
    import dataclasses

    from app.catalog import service as catalog

    stock("hgx-b200", 1)
    u = make_user()
    fund(u, B200)
    draft, errors = service.parse_draft(
        {
            "sku": "hgx-b200",
            "nodes": 1,
            "image": "ubuntu-24.04-cuda",
            "new_key_name": "k",
            "new_key_text": new_public_key(),
        }
    )
    assert errors == {}
    with Session(engine, expire_on_commit=False) as s:
        order, _ = service.create_order(
            s, user=u, draft=draft, idempotency_key="k1", now=clock.now()
        )
        s.commit()
    real = catalog.current_promise
    seen: list[Any] = []

    def stale(*a: Any, **k: Any) -> Any:
        p = real(*a, **k)
        moved = dataclasses.replace(p, date=p.date + timedelta(days=7))
        seen.append(moved.date)
        return moved

    monkeypatch.setattr(catalog, "current_promise", stale)
    with Session(engine, expire_on_commit=False) as s:
        service.pay_order(s, user=u, order_id=order.id, idempotency_key="k1", now=clock.now())
        s.commit()
    monkeypatch.undo()
    assert len(seen) == 1  # read once before the lock, not again on the retry
    paid = order_of(engine, order.id)
    assert paid.status == "paid" and paid.promised_date is not None
    assert paid.promised_date != seen[0]
    day = paid.promised_date.isoformat()
    with Session(engine) as s:
        events = s.exec(
            select(OrderEvent).where(OrderEvent.order_id == order.id, OrderEvent.kind == "paid")
        ).all()
        notes = s.exec(select(Notification).where(Notification.user_id == u.id)).all()
        mails = s.exec(select(OutboxEmail).where(OutboxEmail.to_addr == u.email)).all()
    # Events and notifications are stored as codes: the date is a typed parameter.
    assert len(events) == 1 and day in events[0].params
    assert [n for n in notes if n.kind == "order_paid"] and all(
        seen[0].isoformat() not in (n.params or "") for n in notes
    )
    assert len([n for n in notes if n.kind == "order_paid"]) == 1
    assert len([m for m in mails if m.kind == "order_paid"]) == 1
    assert all(format_date(seen[0], "medium", locale="en_US") not in m.body for m in mails)
    assert len(holds_of(engine, order.id)) == 1
    assert balances(u) == (0, B200)
    ledger_ok()


def test_customer_b_cannot_see_or_touch_a_orders(
    client, new_client, engine, make_user, login, stock, fund
) -> None:
    stock("hgx-b200", 1)
    a, b = make_user(), make_user()
    fund(a, B200)
    login(client, a)
    oid = place(client)
    other = login(new_client(), b)
    assert other.get(f"/orders/{oid}/review").status_code == 404
    assert other.get(f"/console/orders/{oid}").status_code == 404
    assert other.post(f"/orders/{oid}/pay", data={"promise_date": ""}).status_code == 404
    assert other.post(f"/orders/{oid}/cancel").status_code == 404
    assert other.post(f"/orders/{oid}/topup", data={"amount": "1"}).status_code == 404
    assert f"Order #{oid}" not in other.get("/console").text
    assert order_of(engine, oid).status == "awaiting_payment"


def test_discard_unpaid_order(client, engine, make_user, login, stock) -> None:
    stock("hgx-b200", 1)
    u = make_user()
    login(client, u)
    oid = place(client)
    r = client.post(f"/orders/{oid}/cancel")
    assert r.status_code == 303 and r.headers["location"] == "/console"
    assert order_of(engine, oid).status == "abandoned"


def _user(engine: Any, email: str) -> User:
    with Session(engine) as s:
        u = s.exec(select(User).where(User.email == email)).one()
        return u


@pytest.mark.parametrize("sent", ["garbage", "2026-13-45", "x" * 200])
def test_a_payment_without_a_readable_delivery_date_is_refused_and_charges_nothing(
    client, engine, make_user, login, stock, fund, balances, sent: str
) -> None:
    """The review page sends the date it showed; a payment whose date cannot be read must
    not pay blind to whatever date stands now. (One that sends no date at all is a script
    paying as the API does, against the date standing now.)"""
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, B200)
    login(client, u)
    oid = place(client)
    form = {**pay_form(client, oid), "promise_date": sent}
    r = client.post(f"/orders/{oid}/pay", data=form)
    assert r.status_code == 422
    assert "could not read the delivery date" in r.text
    assert order_of(engine, oid).status == "awaiting_payment"
    assert holds_of(engine, oid) == [] and balances(u) == (B200, 0)
    client.cookies.set("lang", "zh_CN")
    r = client.post(f"/orders/{oid}/pay", data=form)
    assert r.status_code == 422 and "无法读取这次付款所附的交付日期" in r.text
