"""A receipt (invoice) and a credit note as a customer sees them in Chromium: a 1280 px
laptop in English and a 390 px phone in Chinese. Everything that makes them acceptable to a
finance team is on screen and nothing overflows the page. ``INVOICE_SCREENSHOTS``: a folder
to save the screenshots in, for a person to look at."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.models import User
from app.accounts.security import SESSION_COOKIE, create_session
from app.clock import FixedClock
from app.ledger.models import CreditNote, Receipt
from app.orders.lease_end import end_lease
from tests.ledger.test_invoices import _deliver, _quoted_order, _rows, _stock
from tests.support.browser import requires_chromium

pytestmark = [pytest.mark.browser, requires_chromium]
SECRET = "test-secret-key-that-is-long-enough-0123456789"
SHOTS = os.environ.get("INVOICE_SCREENSHOTS")


def _documents(engine: Engine, clock: FixedClock, make_user: Callable[..., User]) -> Any:
    now = clock.now()
    _stock(engine, now)
    u = make_user(email="finance-team@deepseek-example.com")
    with Session(engine) as s:
        user = s.get(User, u.id)
        assert user is not None
        user.company = "北京深度求索人工智能基础技术研究有限公司"
        user.billing_address = "北京市海淀区中关村大街 8 号\n100080"
        user.tax_id = "91110108MA01XXXXXX"
        s.add(user)
        s.commit()
    order = _quoted_order(engine, make_user, u, now, discount_bp=500)
    _deliver(engine, order.id or 0, now)
    ops = make_user(role="ops")
    with Session(engine) as s:
        staff = s.get(User, ops.id)
        assert staff is not None
        end_lease(s, actor=staff, order_id=order.id or 0, now=now + timedelta(days=10, hours=3),
                  reason="hardware fault on the node", confirm=True)  # fmt: skip
        s.commit()
        cookie = create_session(s, u, now, SECRET)
        s.commit()
    (receipt,) = _rows(engine, Receipt, order_id=order.id)
    (note,) = _rows(engine, CreditNote, order_id=order.id)
    return cookie, receipt, note


@pytest.mark.parametrize(("width", "lang"), [(1280, "en"), (390, "zh_CN")])
def test_receipt_and_credit_note_read_whole_on_laptop_and_phone(
    live_url: str,
    browser: Any,
    engine: Engine,
    clock: FixedClock,
    make_user: Callable[..., User],
    width: int,
    lang: str,
) -> None:
    cookie, receipt, note = _documents(engine, clock, make_user)
    ctx = browser.new_context(viewport={"width": width, "height": 900}, timezone_id="Asia/Shanghai")
    ctx.add_cookies(
        [
            {"name": "lang", "value": lang, "url": live_url},
            {"name": "tz", "value": "Asia/Shanghai", "url": live_url},
            {"name": SESSION_COOKIE, "value": cookie, "url": live_url},
        ]
    )
    page = ctx.new_page()
    zh = lang == "zh_CN"
    for name, path, must in (
        (
            "receipt",
            f"/receipts/{receipt.number}",
            ["HGX H100", "BR 7612 3456", "北京深度求索", note.number,
             "单价（每节点每月）" if zh else "Unit price per node-month",
             "服务期" if zh else "Service period"],
        ),
        (
            "credit-note",
            f"/credit-notes/{note.number}",
            ["HGX H100", "BR 7612 3456", receipt.number,
             "贷项通知单" if zh else "Credit note",
             "按比例：31天中的20天" if zh else "pro rata: 20 of 31 days"],
        ),
    ):  # fmt: skip
        page.goto(f"{live_url}{path}")
        body = page.inner_text("main") if page.locator("main").count() else page.inner_text("body")
        for text in must:
            assert text in body, (name, text)
        assert int(page.evaluate("document.documentElement.scrollWidth")) <= width, name
        # the seller and the buyer are both visible blocks, side by side or stacked
        parties = page.locator(".doc-party")
        assert parties.count() == 2 and all(parties.nth(i).is_visible() for i in range(2))
        amount = page.locator("#receipt-amount, #credit-note-amount").first
        assert amount.is_visible()
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(SHOTS) / f"{name}-{width}-{lang}.png"), full_page=True)
    # the balance page lists both: every column of its tables on screen (on a phone one
    # card per row), none cut off at the table's edge
    page.goto(f"{live_url}/balance")
    assert page.locator("table.receipts").count() == 2
    cut = page.evaluate(
        """() => [...document.querySelectorAll('.table-wrap')]
            .filter(w => w.scrollWidth > w.clientWidth + 1)
            .map(w => w.querySelector('table').className)"""
    )
    assert cut == [], cut
    pdf = page.locator("table.credit-notes a[href$='lang=zh_CN']").first.bounding_box()
    assert pdf is not None and pdf["x"] + pdf["width"] <= width
    ctx.close()
