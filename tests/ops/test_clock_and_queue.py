"""The simulation clock page, and the ops queue: order, filters, search, pagination."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from sqlmodel import Session, select

from app.accounts.audit import AuditEvent
from app.accounts.models import User
from app.orders.models import Order
from tests.ops.helpers import paid_order, seed_catalog


def test_ops_move_the_simulated_clock_and_it_is_audited(
    client, make_user, login, clock, engine
) -> None:  # type: ignore[no-untyped-def]
    start = clock.now()
    login(client, make_user(role="ops"))
    page = client.get("/staff/clock")
    assert page.status_code == 200 and "2026" in page.text
    r = client.post("/staff/clock", data={"amount": "3", "unit": "days"})
    assert r.status_code == 303
    assert clock.now() == start + timedelta(days=3)
    r = client.post("/staff/clock", data={"amount": "5", "unit": "hours"})
    assert clock.now() == start + timedelta(days=3, hours=5)
    with Session(engine) as s:
        rows = s.exec(select(AuditEvent).where(AuditEvent.action == "clock.advanced")).all()
    assert [r.details.count('"hours": 72') for r in rows][0] == 1 and len(rows) == 2


def test_clock_refuses_bad_input_and_backwards(client, make_user, login, clock) -> None:  # type: ignore[no-untyped-def]
    start = clock.now()
    login(client, make_user(role="ops"))
    for amount, unit in (
        ("-1", "days"),
        ("0", "hours"),
        ("abc", "days"),
        ("1", "weeks"),
        ("401", "days"),
    ):
        r = client.post("/staff/clock", data={"amount": amount, "unit": unit})
        assert r.status_code == 422, (amount, unit)
    assert clock.now() == start
    assert (
        "only moves forward"
        in client.post("/staff/clock", data={"amount": "-2", "unit": "days"}).text
    )


def test_sales_see_the_clock_but_cannot_move_it(client, make_user, login, clock) -> None:  # type: ignore[no-untyped-def]
    start = clock.now()
    login(client, make_user(role="sales"))
    page = client.get("/staff/clock")
    assert page.status_code == 200 and "Only operations staff" in page.text
    assert client.post("/staff/clock", data={"amount": "1", "unit": "days"}).status_code == 403
    assert clock.now() == start


def test_simulated_clock_moves_every_process(engine) -> None:  # type: ignore[no-untyped-def]
    from app.clock import SimulatedClock

    a, b = SimulatedClock(engine), SimulatedClock(engine)
    with Session(engine) as s:
        a.advance(s, timedelta(days=2))
        s.commit()
    assert b.offset() == timedelta(days=2)


def _row(user_id: int, n: int, promised: date | None, status: str = "paid", **kw) -> Order:  # type: ignore[no-untyped-def]
    now = datetime(2026, 12, 1, 9, tzinfo=UTC)
    return Order(
        user_id=user_id,
        idempotency_key=f"bulk-{user_id}-{n}",
        status=status,
        sku_id=kw.pop("sku_id", "hgx-h100"),
        quantity=kw.pop("quantity", 1),
        image_id=kw.pop("image_id", "ubuntu-24.04-cuda"),
        unit_price_cents=1_690_000,
        monthly_total_cents=1_690_000,
        promised_date=promised,
        created_at=now,
        paid_at=now,
        **kw,
    )


def test_queue_sorts_at_risk_first_filters_searches_and_pages(
    client, make_user, login, clock, engine
) -> None:  # type: ignore[no-untyped-def]
    # The read side only: many rows are arranged directly (building 120 paid orders through
    # checkout would test checkout, not the desk).
    alice = make_user(email="alice@lab.example")
    bob = make_user(email="bob@lab.example")
    today = clock.now().date()  # Tuesday 2026-12-01
    with Session(engine) as s:
        far = [_row(bob.id, i, today + timedelta(days=10 + i % 20)) for i in range(110)]
        s.add_all(far)
        late = _row(alice.id, 1, today - timedelta(days=2))
        due_tomorrow = _row(alice.id, 2, today + timedelta(days=1), status="provisioning")
        rocm = _row(
            alice.id,
            3,
            today + timedelta(days=6),
            sku_id="mi355x",
            image_id="ubuntu-24.04-rocm",
            note_private_network=True,
            note_comm_pattern="all-to-all MoE experts",
            quantity=2,
        )
        net2 = _row(
            alice.id,
            4,
            today + timedelta(days=8),
            note_private_network=True,
            quantity=2,
            note_comm_pattern="DP all-reduce",
        )
        done = _row(bob.id, 999, today, status="delivered")
        s.add_all([late, due_tomorrow, rocm, net2, done])
        s.commit()
        ids = {
            k: o.id
            for k, o in (
                ("late", late),
                ("due", due_tomorrow),
                ("rocm", rocm),
                ("net2", net2),
                ("done", done),
            )
        }
    login(client, make_user(role="ops"))
    page = client.get("/staff/ops")
    assert page.status_code == 200
    text = page.text
    assert "114 orders" in text and "page 1 of 3" in text
    assert "1 late" in text and "1 due within a business day" in text
    # At risk first: late, then due within one business day.
    assert (
        text.index(f"#{ids['late']}<")
        < text.index(f"#{ids['due']}<")
        < text.index(f"#{ids['rocm']}<")
    )
    assert "late by 2 days" in text and "1 day left" in text
    assert f"#{ids['done']}<" not in text  # delivered orders are not in the queue
    assert "ROCm" in text
    # Private-network requests grouped per customer.
    assert "Private-network requests by customer" in text and "4 nodes in total" in text

    assert "2 orders" in client.get("/staff/ops?at_risk=1").text
    assert "2 orders" in client.get("/staff/ops?private=1").text
    assert "1 order" in client.get("/staff/ops?sku=mi355x").text
    assert "4 orders" in client.get("/staff/ops?q=alice@").text
    by_id = client.get(f"/staff/ops?q=%23{ids['rocm']}").text
    assert "1 order" in by_id and f"#{ids['rocm']}<" in by_id
    assert "1 order" in client.get("/staff/ops?view=leases").text
    third = client.get("/staff/ops?page=3").text
    assert "page 3 of 3" in third and third.count("/staff/ops/orders/") >= 14
    # Nonsense parameters are ignored, not errors.
    assert client.get("/staff/ops?page=abc&view=zzz&status=nope").status_code == 200


def test_order_page_shows_structured_notes(client, make_user, login, clock, engine) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    order = paid_order(
        engine,
        customer,
        clock.now(),
        nodes=2,
        private=True,
        model_size="70B",
        token_budget="100B tokens",
        comm="TP inside the node, PP across",
        free_text="Need IB tests",
    )
    login(client, make_user(role="ops"))
    page = client.get(f"/staff/ops/orders/{order.id}").text
    for text in (
        "70B",
        "100B tokens",
        "TP inside the node, PP across",
        "Need IB tests",
        customer.email,
    ):
        assert text in page
    with Session(engine) as s:
        assert s.exec(select(User).where(User.id == customer.id)).one()


def test_clock_page_only_in_simulation_mode(app, client, make_user, login, clock) -> None:  # type: ignore[no-untyped-def]
    start = clock.now()
    app.state.settings.simulation = False
    login(client, make_user(role="ops"))
    assert client.get("/staff/clock").status_code == 404
    assert client.post("/staff/clock", data={"amount": "1", "unit": "days"}).status_code == 404
    assert clock.now() == start
