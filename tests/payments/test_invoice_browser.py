"""Browser: the invoice page counts down and updates its status by itself (htmx polling)
when the provider's signed notification arrives, with no reload and no CSP errors."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.security import SESSION_COOKIE, create_session
from app.clock import FixedClock
from app.payments import service as payments
from app.payments.models import Invoice
from tests.support.browser import launch, requires_chromium

SECRET = "test-secret-key-that-is-long-enough-0123456789"

pytestmark = [
    pytest.mark.browser,
    requires_chromium,
]


@pytest.fixture(autouse=True)
def _one_backend(db_url: str) -> None:
    if not db_url.startswith("sqlite"):
        pytest.skip("one backend is enough for the browser check")


def test_invoice_updates_itself(
    live_url: str, engine: Engine, clock: FixedClock, make_user: Callable[..., Any], settings: Any
) -> None:
    from playwright.sync_api import sync_playwright

    user = make_user()
    with Session(engine, expire_on_commit=False) as s:
        inv = payments.create_topup(
            s, user_id=user.id, amount_cents=50_000, currency="USDC", now=clock.now()
        )
        cookie = create_session(s, user, clock.now(), SECRET)
        s.commit()
    with sync_playwright() as p:
        browser = launch(p)
        try:
            ctx = browser.new_context()
            ctx.add_cookies([{"name": SESSION_COOKIE, "value": cookie, "url": live_url}])
            page = ctx.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{live_url}/topups/{inv.id}")
            assert "Waiting for payment" in page.inner_text("#invoice-status")
            page.wait_for_function(
                "document.querySelector('time[data-countdown]').textContent.match(/^1[0-4]:[0-5][0-9]$/)"
            )
            # The provider sees the payment and notifies us; the page is not reloaded.
            with Session(engine) as s:
                row = s.get(Invoice, inv.id)
                assert row is not None
                payments.record_chain_payment(
                    s, row, int(row.due_units), now=clock.now(), confirmed=True
                )
                s.commit()
                body = payments.event_body(row, "InvoiceSettled", clock.now())
            r = httpx.post(
                f"{live_url}/payments/webhook",
                content=body,
                headers={"BTCPay-Sig": payments.sign(body, settings.webhook_secret)},
            )
            assert r.status_code == 200
            page.wait_for_selector("#invoice-status .badge.ok", timeout=10_000)
            assert re.search(r"Paid", page.inner_text("#invoice-status"))
            assert not [e for e in errors if "Content Security Policy" in e]
        finally:
            browser.close()
