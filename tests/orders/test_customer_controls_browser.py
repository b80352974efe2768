"""Browser journey (issue 20): a customer turns on two-factor sign-in and signs in with a
code, cancels an undelivered order through its confirmation step, asks ops for a reboot
of a running order, and opens the receipt of its first month (page and PDF)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyotp
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.accounts.models import User
from app.clock import FixedClock
from app.orders.models import Order, OrderTask
from tests.accounts.helpers import STRONG
from tests.ops.helpers import paid_order, seed_catalog
from tests.support.browser import requires_chromium
from tests.support.factories import deliver

SHOTS = os.environ.get("CUSTOMER_SCREENSHOTS")  # a folder: save screenshots there for review

pytestmark = [pytest.mark.browser, requires_chromium]


def _shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def test_two_factor_cancel_controls_and_receipts(
    live_url: str, browser: Any, engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    seed_catalog(engine, clock.now())
    customer = make_user(email="mei@lab.example", password=STRONG)
    running = paid_order(engine, customer, clock.now(), key="run")
    undelivered = paid_order(engine, customer, clock.now(), key="wait")
    deliver(engine, running.id or 0, clock.now(), actor=make_user(role="ops"), ip="10.20.0.7")

    ctx = browser.new_context(viewport={"width": 390, "height": 860})
    page = ctx.new_page()
    page.goto(f"{live_url}/login?next=/account")
    page.get_by_label("Email").fill(customer.email)
    page.get_by_label("Password").fill(STRONG)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/account$"))

    # Two-factor: set up, confirm with the app's code, keep the recovery codes.
    page.get_by_role("link", name="Manage two-factor sign-in").click()
    page.get_by_role("button", name="Set up two-factor sign-in").click()
    page.wait_for_url(re.compile(r"/account/2fa$"))
    _shot(page, "2fa-setup-390")
    secret = re.sub(r"\s", "", page.locator("#totp-secret").inner_text())
    page.get_by_role("textbox", name="Code").fill(pyotp.TOTP(secret).now())
    page.get_by_role("button", name="Turn on").click()
    assert page.locator("#recovery-codes li").count() == 10
    page.get_by_role("button", name="Log out").click()

    # Signing in now takes the password, then a code.
    page.goto(f"{live_url}/login?next=/console")
    page.get_by_label("Email").fill(customer.email)
    page.get_by_label("Password").fill(STRONG)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/login/2fa"))
    page.get_by_role("textbox", name="Code").fill(pyotp.TOTP(secret).at(time.time() + 30))
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/console$"))

    # Cancel the undelivered order, through its confirmation step.
    page.goto(f"{live_url}/console/orders/{undelivered.id}")
    page.get_by_role("link", name="Cancel this order").click()
    page.wait_for_url(re.compile(rf"/orders/{undelivered.id}/cancel$"))
    _shot(page, "cancel-confirm-390")
    page.get_by_role("button", name=re.compile("Yes, cancel and refund")).click()
    page.wait_for_url(re.compile(rf"/console/orders/{undelivered.id}$"))
    assert page.get_by_text("The first month is back in your balance in full.").is_visible()

    # Ask ops for a reboot of the running order.
    page.goto(f"{live_url}/console/orders/{running.id}")
    page.locator("summary", has_text="Reboot").click()
    page.get_by_role("button", name="Send the request").first.click()
    page.wait_for_url(re.compile(rf"/console/orders/{running.id}"))
    assert page.locator("#tasks").get_by_text("Requested").is_visible()
    _shot(page, "controls-390")

    # The first month was charged at delivery: its receipt is on the balance page.
    page.goto(f"{live_url}/balance")
    link = page.locator("table.receipts a", has_text=re.compile(r"^R-2026-\d{6}$")).first
    number = link.inner_text()
    link.click()
    page.wait_for_url(re.compile(rf"/receipts/{number}$"))
    _shot(page, "receipt-390")
    assert page.locator("#receipt-number").inner_text() == number
    pdf = page.request.get(f"{live_url}/receipts/{number}/pdf?lang=zh_CN")
    assert pdf.status == 200 and pdf.headers["content-type"] == "application/pdf"
    ctx.close()

    with Session(engine) as s:
        assert s.get(Order, undelivered.id).status == "cancelled"  # type: ignore[union-attr]
        assert (
            s.exec(select(OrderTask).where(OrderTask.order_id == running.id)).one().kind == "reboot"
        )
