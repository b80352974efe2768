"""Issue 36: the order's status lines come from its current state, never from text that once
applied (a delay after delivery, a batch due in the past, a stock line on a late or
cancelled order, "Renews on" after a failed renewal, a network "Ready" after the end)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from sqlmodel import Session

from app.accounts.models import User
from app.orders import controls, lease_end, ops, renewals, status_text
from app.orders import service as orders
from tests.ops.helpers import paid_order, seed_catalog
from tests.support import factories

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _ops_user(engine, now) -> User:  # type: ignore[no-untyped-def]
    with Session(engine, expire_on_commit=False) as s:
        u = User(email="ops-st@example.com", password_hash="x", role="ops", created_at=now)
        s.add(u)
        s.commit()
        return u


def _page(client, order_id: int) -> str:  # type: ignore[no-untyped-def]
    r = client.get(f"/console/orders/{order_id}")
    assert r.status_code == 200
    return str(r.text)


# ------------------------------------------------------------------ the pure rules


def test_the_batch_line_goes_once_its_arrival_day_has_passed() -> None:
    line = "Next batch arrives Dec 13, 2026, ready Dec 16, 2026"
    kw = {"status": "paid", "promised": date(2026, 12, 16), "promise_text": line}
    before = status_text.describe(
        now=datetime(2026, 12, 12, tzinfo=UTC), arrival=date(2026, 12, 13), **kw
    )  # type: ignore[arg-type]
    assert before.promise_line == line
    after = status_text.describe(
        now=datetime(2026, 12, 14, tzinfo=UTC), arrival=date(2026, 12, 13), **kw
    )  # type: ignore[arg-type]
    assert after.promise_line == ""
    # the promised day passed too: the order is late and says nothing about stock
    late = status_text.describe(now=datetime(2026, 12, 17, 1, tzinfo=UTC), arrival=None, **kw)  # type: ignore[arg-type]
    assert late.promise_line == ""


def test_each_state_keeps_only_the_lines_that_apply() -> None:
    end = datetime(2027, 1, 1, tzinfo=UTC)
    running = status_text.describe(
        status="delivered", now=NOW, period_end=end, delay_reason="NIC late"
    )
    assert (running.renewal, running.delay_reason) == ("renews", "")
    unpaid = status_text.describe(
        status="delivered", now=NOW, period_end=end, grace_until=end + timedelta(days=3)
    )
    assert unpaid.renewal == "unpaid"
    assert status_text.describe(status="suspended", now=NOW, period_end=end).renewal == "suspended"
    assert status_text.describe(status="ending", now=NOW, period_end=end).renewal == "ends"
    assert status_text.describe(status="ended", now=NOW, period_end=end).renewal == ""
    assert status_text.describe(status="ended", now=NOW, network="ready").network == "ended"
    assert status_text.describe(status="cancelled", now=NOW, network="requested").network == ""
    assert status_text.describe(status="delivered", now=NOW, network="ready").network == "ready"
    cancelled = status_text.describe(
        status="cancelled",
        now=NOW,
        promise_text="3 in stock, ready in 2 business days",
        delay_reason="waiting for parts",
    )
    assert (cancelled.promise_line, cancelled.delay_reason) == ("", "")


# ------------------------------------------------------------------ the pages, clock moved


def test_delay_notice_leaves_the_order_once_it_is_delivered(
    client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    login(client, customer)
    order = paid_order(engine, customer, clock.now())
    staff = _ops_user(engine, clock.now())
    with Session(engine, expire_on_commit=False) as s:
        ops.mark_delayed(
            s,
            actor=staff,
            order_id=order.id,
            reason="The NICs are late from the vendor",
            new_estimate=clock.now().date() + timedelta(days=20),
            now=clock.now(),
        )
        s.commit()
    page = _page(client, order.id)
    assert 'id="delay"' in page and "The NICs are late from the vendor" in page
    clock.advance(timedelta(days=10))
    factories.deliver(engine, order.id, clock.now())
    page = _page(client, order.id)
    assert 'id="delay"' not in page and "new estimate" not in page
    assert 'id="promise-line"' not in page  # the stock line is history too
    assert 'id="renewal"' in page  # what applies now: the next renewal


def test_a_late_order_and_a_cancelled_one_show_no_stock_line(
    client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    login(client, customer)
    order = paid_order(engine, customer, clock.now())
    page = _page(client, order.id)
    assert 'id="promise-line"' in page and "in stock" in page  # while it applies
    clock.advance(timedelta(days=15))  # past the promised day: late
    page = _page(client, order.id)
    assert "We missed the promised date." in page
    assert 'id="promise-line"' not in page and "in stock, ready in" not in page
    with Session(engine, expire_on_commit=False) as s:
        u = s.get(User, customer.id)
        orders.cancel_order(s, user=u, order_id=order.id, now=clock.now())
        s.commit()
    page = _page(client, order.id)
    assert "in stock, ready in" not in page and 'id="promise-line"' not in page


def test_no_renews_on_after_a_failed_renewal(client, engine, make_user, login, clock) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    login(client, customer)
    order = factories.deliver(engine, paid_order(engine, customer, clock.now()).id, clock.now())
    console = client.get("/console").text
    assert "Renews on" in console
    clock.set(order.period_end + timedelta(hours=1))  # type: ignore[operator]
    with Session(engine, expire_on_commit=False) as s:
        renewals.run_due_renewals(s, clock.now())  # the balance is empty: short
        s.commit()
    console = client.get("/console").text
    row = re.search(rf'id="renewal-{order.id}">([^<]*)<', console)
    assert row is not None
    assert "Renews on" not in console and "not yet paid" in row.group(1)
    page = _page(client, order.id)
    assert "Next renewal" not in page and "Renewal due since" in page


def test_private_network_is_not_ready_after_the_lease_ended(
    client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    login(client, customer)
    order = paid_order(engine, customer, clock.now(), nodes=2, private=True)
    staff = _ops_user(engine, clock.now())
    with Session(engine, expire_on_commit=False) as s:
        hosts = [
            ops.HostInput(ip=f"203.0.113.{i}", fingerprints=factories.host_fingerprint(str(i)))
            for i in (1, 2)
        ]
        data = ops.CredentialsInput(ssh_user="ubuntu", hosts=hosts)
        ops.set_credentials(s, actor=staff, order_id=order.id, data=data, now=clock.now())
        ops.mark_delivered(s, actor=staff, order_id=order.id, now=clock.now())
        s.commit()
    with Session(engine, expire_on_commit=False) as s:
        controls.set_network(
            s,
            actor=staff,
            order_id=order.id,
            status="ready",
            subnet="10.20.0.0/24",
            now=clock.now(),
        )
        s.commit()
    page = _page(client, order.id)
    status = re.search(r'id="network-status">(.*?)</p>', page, re.S)
    assert status is not None and "Ready" in status.group(1) and "10.20.0.0/24" in status.group(1)
    clock.advance(timedelta(days=3))
    with Session(engine, expire_on_commit=False) as s:
        lease_end.end_lease(
            s,
            actor=staff,
            order_id=order.id,
            now=clock.now(),
            reason="Hardware fault on the rack",
            confirm=True,
        )
        s.commit()
    page = _page(client, order.id)
    status = re.search(r'id="network-status">(.*?)</p>', page, re.S)
    assert status is not None
    assert "Ready" not in status.group(1) and "Taken down with the lease" in status.group(1)
    assert "10.20.0.0/24" not in status.group(1)
