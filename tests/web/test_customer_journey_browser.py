"""Issue 36, done-when: a new customer in Chromium, Chinese on a 390 px phone in UTC+8 and
English on a 1280 px laptop, with the clock moved through a delay, a delivery, a failed
renewal and the end of the lease: no stale status text, no English on the Chinese pages
outside an engineer's own (marked) words, every time labelled with the reader's zone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.accounts.models import User
from app.accounts.security import SESSION_COOKIE, create_session
from app.clock import FixedClock
from app.orders import lease_end, ops, renewals
from app.orders.models import Order
from tests.ops.helpers import paid_order, seed_catalog
from tests.support import factories
from tests.support.browser import requires_chromium
from tests.support.english import english_sentences

pytestmark = [pytest.mark.browser, requires_chromium]
SECRET = "test-secret-key-that-is-long-enough-0123456789"


def _look(page: Any, url: str, lang: str) -> tuple[str, str]:
    page.goto(url)
    page.wait_for_load_state("load")
    html = page.content()
    if lang == "zh_CN":
        assert not english_sentences(html), (url, english_sentences(html))
    # every instant on the page says which zone it is shown in
    for t in page.locator("time[datetime]:not([data-countdown])").all():
        if "T" in (t.get_attribute("datetime") or ""):
            assert t.inner_text().strip().endswith("UTC+8"), (url, t.inner_text())
    return html, page.inner_text("body")


@pytest.mark.parametrize(("width", "lang"), [(390, "zh_CN"), (1280, "en")])
def test_a_lease_from_delay_to_end_reads_true_at_every_step(
    live_url: str,
    browser: Any,
    engine: Engine,
    clock: FixedClock,
    make_user: Callable[..., User],
    width: int,
    lang: str,
) -> None:
    seed_catalog(engine, clock.now())
    customer = make_user(email=f"journey-{lang}@lab.example")
    staff = make_user(role="ops", email=f"ops-{lang}@example.com")
    with Session(engine) as s:
        u = s.get(User, customer.id)
        assert u is not None
        u.locale = lang
        s.commit()
        cookie = create_session(s, customer, clock.now(), SECRET)
        s.commit()
    order = paid_order(engine, customer, clock.now())
    oid = order.id or 0
    ctx = browser.new_context(viewport={"width": width, "height": 900}, timezone_id="Asia/Shanghai")
    ctx.add_cookies(
        [
            {"name": "lang", "value": lang, "url": live_url},
            {"name": SESSION_COOKIE, "value": cookie, "url": live_url},
        ]
    )
    page = ctx.new_page()
    order_url, console_url = f"{live_url}/console/orders/{oid}", f"{live_url}/console"

    # 1. a delay, told in the engineer's own (English) words
    with Session(engine, expire_on_commit=False) as s:
        actor = s.get(User, staff.id)
        ops.mark_delayed(
            s,
            actor=actor,
            order_id=oid,
            reason="Waiting for the replacement NIC from the vendor.",
            new_estimate=clock.now().date() + timedelta(days=10),
            now=clock.now(),
        )
        s.commit()
    html, text = _look(page, order_url, lang)
    assert 'id="delay"' in html and "Waiting for the replacement NIC" in text

    # 2. delivered a week later: the delay, the stock line and the countdown are history
    clock.advance(timedelta(days=7, hours=9))  # 18:00 UTC: the period ends on the next day in UTC+8
    factories.deliver(engine, oid, clock.now())
    html, text = _look(page, order_url, lang)
    assert 'id="delay"' not in html and 'id="promise-line"' not in html
    assert "data-countdown" not in html
    with Session(engine) as s:
        o = s.get(Order, oid)
        assert o is not None and o.period_end is not None
        period_end = o.period_end
    local_end = period_end + timedelta(hours=8)
    day = (
        f"{local_end.year}年{local_end.month}月{local_end.day}日"
        if lang == "zh_CN"
        else f"{local_end:%b} {local_end.day}, {local_end.year}"
    )
    _html, console = _look(page, console_url, lang)
    assert console.count(day) >= 2, (day, console)  # the notification and "Renews on" agree

    # 3. the renewal fails (no balance): no "Renews on" anywhere
    clock.set(period_end + timedelta(minutes=5))
    with Session(engine, expire_on_commit=False) as s:
        renewals.run_due_renewals(s, clock.now())
        s.commit()
    _html, console = _look(page, console_url, lang)
    assert ("Renews on" not in console) and ("续费\n" not in console)
    html, text = _look(page, order_url, lang)
    assert 'id="renewal-short"' in html

    # 4. ops end the lease: the page says it ended and offers nothing that no longer applies
    clock.advance(timedelta(hours=1))
    with Session(engine, expire_on_commit=False) as s:
        actor = s.exec(select(User).where(User.id == staff.id)).one()
        lease_end.end_lease(
            s, actor=actor, order_id=oid, now=clock.now(), reason="Renewal unpaid", confirm=True
        )
        s.commit()
    html, text = _look(page, order_url, lang)
    assert 'id="access-ended"' in html and 'id="renewal-short"' not in html
    assert 'id="renewal"' not in html
    ctx.close()
