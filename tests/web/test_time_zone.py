"""Issue 36: one time-zone rule on every page, email and PDF — the browser's zone from the
first visit (the ``tz`` cookie set by static/tz.js), UTC only when it is unknown and then
labelled; the staff clock names the zone it shows."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from sqlmodel import Session, select

from app.accounts.models import User
from app.notifications.models import OutboxEmail
from tests.ops.helpers import paid_order, seed_catalog
from tests.support import factories

# Delivered at 18:00 UTC: the period ends 2027-01-01 18:00 UTC, which is Jan 2 in UTC+8.
DELIVERED = datetime(2026, 12, 1, 18, 0, tzinfo=UTC)


def _sign_in(client, make_user, email: str, zone: str | None) -> User:  # type: ignore[no-untyped-def]
    user = make_user(email=email, password="correct horse battery")
    if zone:
        client.cookies.set("tz", zone)
    r = client.post("/login", data={"email": email, "password": "correct horse battery"})
    assert r.status_code == 303
    return user  # type: ignore[no-any-return]


def _delivered_email(engine, email: str) -> str:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        rows = s.exec(select(OutboxEmail).where(OutboxEmail.to_addr == email)).all()
    bodies = [r.body for r in rows if r.kind == "order.delivered"]
    assert len(bodies) == 1
    return bodies[0]


def test_the_delivered_email_and_the_console_agree_in_the_readers_zone(
    client, engine, make_user, clock
) -> None:  # type: ignore[no-untyped-def]
    clock.set(DELIVERED)
    seed_catalog(engine, clock.now())
    user = _sign_in(client, make_user, "east@example.com", "Asia/Shanghai")
    with Session(engine) as s:
        stored = s.get(User, user.id)
        assert stored is not None and stored.time_zone == "Asia/Shanghai"  # remembered at sign-in
    order = paid_order(engine, user, clock.now())
    factories.deliver(engine, order.id, clock.now())
    body = _delivered_email(engine, "east@example.com")
    assert "runs until Jan 2, 2027" in body
    console = client.get("/console").text
    assert "runs until Jan 2, 2027" in console  # the notification
    assert "Renews on Jan 2, 2027" in console  # the order list
    page = client.get(f"/console/orders/{order.id}").text
    assert re.search(r'id="renewal">Jan 2, 2027', page)


def test_an_unknown_zone_is_utc_and_says_so(client, engine, make_user, clock) -> None:  # type: ignore[no-untyped-def]
    clock.set(DELIVERED)
    seed_catalog(engine, clock.now())
    user = _sign_in(client, make_user, "nozone@example.com", None)
    order = paid_order(engine, user, clock.now())
    factories.deliver(engine, order.id, clock.now())
    assert "runs until Jan 1, 2027 (UTC)" in _delivered_email(engine, "nozone@example.com")
    console = client.get("/console").text
    assert "runs until Jan 1, 2027 (UTC)" in console
    client.cookies.set("lang", "zh_CN")
    assert "2027年1月1日（UTC）" in client.get("/console").text


def test_the_first_visit_asks_the_browser_for_its_zone(client) -> None:  # type: ignore[no-untyped-def]
    first = client.get("/nodes").text
    assert re.search(r'<script src="/static/tz.js" data-reload="1"></script>', first)
    # tz.js sits in <head> before anything that draws: the reload happens before a paint
    assert first.index("tz.js") < first.index("<body")
    client.cookies.set("tz", "Asia/Shanghai")
    again = client.get("/nodes").text
    assert '<script src="/static/tz.js"></script>' in again  # known: no second load
    assert "Asia/Shanghai (UTC+8)" in again


def test_a_zone_west_of_utc_is_named_with_its_offset(client) -> None:  # type: ignore[no-untyped-def]
    client.cookies.set("tz", "America/New_York")
    assert "America/New_York (UTC-5)" in client.get("/nodes").text


def test_the_staff_clock_names_the_zone_it_shows(client, make_user, login) -> None:  # type: ignore[no-untyped-def]
    staff = make_user(role="ops")
    login(client, staff)
    client.cookies.set("tz", "America/New_York")
    page = client.get("/staff/clock").text
    label = re.search(r'<p class="muted">(Simulated now[^<]*)</p>', page)
    assert label is not None and "America/New_York, UTC-5" in label.group(1)
    assert "(UTC)" not in label.group(1)
    shown = re.search(r'class="clock-now"><time[^>]*>([^<]*)</time>', page)
    assert shown is not None and shown.group(1).endswith("UTC-5")  # 4:00 AM in New York
    assert "4:00:00" in shown.group(1)


def test_document_dates_carry_the_zone_not_a_bare_offset() -> None:
    from app.messages import format_instant

    at = datetime(2026, 12, 1, 22, 20, 54, tzinfo=UTC)
    zh = format_instant(at, "zh_CN", "Asia/Shanghai")
    assert zh == "2026年12月2日 06:20:54 UTC+8"
    assert "+0800" not in zh
    assert format_instant(at, "en", "").endswith("10:20:54\u202fPM UTC")


def test_a_receipts_long_date_is_the_medium_one_with_the_zone() -> None:
    """The receipt PDF asks for "long": Babel's Chinese long pattern puts "+0800" between
    the date and the time; documents show the medium date and time and the zone label."""
    from starlette.requests import Request

    from app.web.templating import pdf_datetime_formatter

    scope = {"type": "http", "headers": [(b"cookie", b"tz=Asia/Shanghai")], "method": "GET"}
    fmt = pdf_datetime_formatter(Request(scope), "zh_CN")
    shown = fmt(datetime(2026, 12, 1, 22, 20, 54, tzinfo=UTC), "long")
    assert shown == "2026年12月2日 06:20:54 UTC+8"
