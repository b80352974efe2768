"""Reminders 7, 3 and 1 day(s) before a renewal the balance cannot cover: console banner,
email with the shortfall and a top-up link in the reader's language, the grace period and
wipe date stated; each reminder exactly once, however many worker processes run."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlmodel import Session, select

from app.accounts.models import User
from app.clock import utc
from app.db import make_engine
from app.ledger import service as ledger
from app.notifications.models import Notification, OutboxEmail
from app.orders import renewals
from app.orders.models import Order, RenewalReminder
from tests.ops.helpers import seed_catalog
from tests.ops.test_renewals import deliver, get, run

KIND = "order.renewal_reminder"


def remind(engine: Any, now: datetime) -> int:
    return renewals.send_renewal_reminders(engine, now, base_url="https://gpus.example")


def reminder_mail(engine: Any) -> list[OutboxEmail]:
    with Session(engine) as s:
        return list(s.exec(select(OutboxEmail).where(OutboxEmail.kind == KIND)).all())


def test_three_reminders_once_each_then_a_top_up_lets_the_renewal_succeed(
    engine, make_user, clock
) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    order = deliver(engine, customer, clock.now())  # the balance paid the first month only
    end = utc(order.period_end)
    monthly = order.monthly_total_cents
    assert remind(engine, end - timedelta(days=8)) == 0  # too early
    assert remind(engine, end - timedelta(days=6, hours=12)) == 1
    assert remind(engine, end - timedelta(days=6)) == 0  # the 7-day one went already
    assert remind(engine, end - timedelta(days=2, hours=12)) == 1
    assert remind(engine, end - timedelta(hours=12)) == 1
    assert remind(engine, end - timedelta(hours=1)) == 0
    mail = reminder_mail(engine)
    assert len(mail) == 3 and {m.to_addr for m in mail} == {customer.email}
    body = mail[0].body
    short = f"${monthly / 100:,.2f}"
    assert short in body  # the whole month is short
    assert f"https://gpus.example/topups/new?amount_cents={monthly}" in body
    assert "return_to=%2Fconsole%2Forders%2F" in body
    grace = end + timedelta(days=3)
    assert f"{grace:%b} {grace.day}, {grace.year}" in body  # the day the lease would end
    assert "3-day grace period" in body and "wiped" in body
    with Session(engine) as s:
        rows = s.exec(select(RenewalReminder)).all()
        assert sorted(r.days_before for r in rows) == [1, 3, 7]
        notes = s.exec(select(Notification).where(Notification.kind == KIND)).all()
        assert len(notes) == 3
    # A top-up between the reminders and the date: the renewal goes through.
    with Session(engine) as s:
        ledger.grant_promotion(
            s,
            user_id=customer.id,
            amount_cents=monthly,
            reason="top-up",
            now=end - timedelta(hours=2),
            idempotency_key="topup-before-renewal",
        )
        s.commit()
    assert run(engine, end + timedelta(minutes=1)).renewed == 1
    assert get(engine, order.id).periods_paid == 2


def test_no_reminder_when_the_balance_covers_it_or_the_lease_ends(engine, make_user, clock) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    covered = deliver(engine, make_user(), clock.now(), extra_cents=10_000_000_00, key="a")
    ending = deliver(engine, make_user(), clock.now(), key="b")
    with Session(engine) as s:
        o = s.get(Order, ending.id)
        assert o is not None
        o.cancel_at_period_end = True
        s.add(o)
        s.commit()
    assert remind(engine, utc(covered.period_end) - timedelta(days=1)) == 0
    assert reminder_mail(engine) == []


def test_reminder_in_the_readers_language_and_on_the_console(
    engine, make_user, clock, client, login
) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    with Session(engine) as s:
        u = s.get(User, customer.id)
        assert u is not None
        u.locale = "zh_CN"
        s.add(u)
        s.commit()
    order = deliver(engine, customer, clock.now())
    end = utc(order.period_end)
    assert remind(engine, end - timedelta(days=2)) == 1
    (mail,) = reminder_mail(engine)
    assert "您的余额还差" in mail.body and "宽限期" in mail.body and "擦除" in mail.body
    assert "/topups/new?amount_cents=" in mail.body
    # The console, four days before: banner and the shortfall on the order list and page.
    clock.set(end - timedelta(days=4))
    login(client, customer)
    console = client.get("/console").text
    short = f"${order.monthly_total_cents / 100:,.2f}"
    assert f'id="renewal-reminder-{order.id}"' in console and "short" in console
    assert f"{short} short" in console
    page = client.get(f"/console/orders/{order.id}").text
    assert 'id="renewal-shortfall"' in page and short in page
    assert f"/topups/new?amount_cents={order.monthly_total_cents}" in page
    client.cookies.set("lang", "zh_CN")
    zh = client.get("/console").text
    assert "您的余额还差" in zh and f"还差 US{short}" in zh


def _worker(url: str, now: datetime, barrier: Any, out: Any) -> None:
    engine = make_engine(url)
    barrier.wait()
    sent = 0
    for _ in range(3):
        sent += renewals.send_renewal_reminders(engine, now)
    out.put(sent)
    engine.dispose()


def test_worker_processes_on_postgres_send_each_reminder_once(pg_url) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(pg_url)
    now = datetime(2026, 12, 1, 9, tzinfo=UTC)
    seed_catalog(engine, now)
    from app.catalog import service as catalog  # the catalog's seam, for stock only

    with Session(engine) as s:
        for _ in range(6):
            catalog.add_node(s, sku_id="hgx-h100", now=now)
        s.commit()
    made = []
    for i in range(3):
        with Session(engine, expire_on_commit=False) as s:
            u = User(email=f"remind{i}@example.com", password_hash="x", created_at=now)
            s.add(u)
            s.commit()
        for j in range(2):
            made.append(deliver(engine, u, now, key=f"remind{i}-{j}"))
    when = utc(made[0].period_end) - timedelta(days=2)
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(pg_url, when, barrier, out)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs)
    assert sum(out.get(timeout=5) for _ in procs) == 6
    with Session(engine) as s:
        rows = s.exec(select(RenewalReminder)).all()
        assert sorted(r.order_id for r in rows) == sorted(o.id for o in made)
    mail = reminder_mail(engine)
    assert len(mail) == 6
    engine.dispose()


def _set_user(engine: Any, user_id: int, **fields: Any) -> None:
    with Session(engine) as s:
        u = s.get(User, user_id)
        assert u is not None
        for k, v in fields.items():
            setattr(u, k, v)
        s.add(u)
        s.commit()


def test_reminder_dates_are_the_readers_days_and_utc_says_so(
    engine, make_user, clock, new_client, login
) -> None:  # type: ignore[no-untyped-def]
    """A renewal at 18:00 UTC on Jan 1 is Jan 2 in Shanghai: the email and the banner of a
    customer who signed in from there say Jan 2; a customer whose zone is unknown reads
    Jan 1 labelled UTC."""
    seed_catalog(engine, clock.now())
    delivered_at = datetime(2026, 12, 1, 18, tzinfo=UTC)
    east, nowhere = make_user(), make_user()
    _set_user(engine, east.id, time_zone="Asia/Shanghai")
    _set_user(engine, nowhere.id, time_zone="")
    a = deliver(engine, east, delivered_at, key="east")
    b = deliver(engine, nowhere, delivered_at, key="nowhere")
    end = utc(a.period_end)
    assert end == datetime(2027, 1, 1, 18, tzinfo=UTC) == utc(b.period_end)
    assert remind(engine, end - timedelta(days=2)) == 2
    mail = {m.to_addr: m.body for m in reminder_mail(engine)}
    # the renewal and the grace end (3 days later), in the reader's zone
    assert "renews on Jan 2, 2027" in mail[east.email] and "on Jan 5, 2027" in mail[east.email]
    assert "(UTC)" not in mail[east.email]
    assert "renews on Jan 1, 2027 (UTC)" in mail[nowhere.email]
    assert "on Jan 4, 2027 (UTC)" in mail[nowhere.email]
    clock.set(end - timedelta(days=2))
    # the console without a browser zone cookie: the zone the customer signed in with
    c_east = login(new_client(), east)
    _set_user(engine, east.id, time_zone="Asia/Shanghai")  # as signed in from Shanghai
    c_east.cookies.delete("tz")
    banner = c_east.get("/console").text
    assert "renews on Jan 2, 2027 and your balance" in banner
    assert "on Jan 5, 2027, and its disks" in banner
    page = c_east.get(f"/console/orders/{a.id}").text
    assert "Jan 2, 2027" in page and "Jan 1, 2027 (UTC)" not in page
    c_none = login(new_client(), nowhere)
    _set_user(engine, nowhere.id, time_zone="")
    c_none.cookies.delete("tz")
    assert "renews on Jan 1, 2027 (UTC) and your balance" in c_none.get("/console").text
    # the browser's zone, once known, decides the page (Los Angeles: still Jan 1, 10:00)
    c_none.cookies.set("tz", "America/Los_Angeles")
    text = c_none.get("/console").text
    assert "renews on Jan 1, 2027 and your balance" in text
    # in Chinese, the same days
    c_east.cookies.set("lang", "zh_CN")
    assert "2027年1月2日" in c_east.get("/console").text
