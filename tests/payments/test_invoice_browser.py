"""Browser: the invoice page counts down and updates its status by itself (htmx polling)
when the provider's signed notification arrives, with no reload and no CSP errors."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.security import SESSION_COOKIE, create_session
from app.clock import FixedClock
from app.payments import service as payments
from app.payments.models import Invoice

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SECRET = "test-secret-key-that-is-long-enough-0123456789"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium not installed"),
]


@pytest.fixture
def live_url(app: FastAPI, db_url: str) -> Iterator[str]:
    if not db_url.startswith("sqlite"):
        pytest.skip("one backend is enough for the browser check")
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


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
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
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
