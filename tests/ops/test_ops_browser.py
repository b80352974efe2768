"""Browser journey: an ops person works a paid order from the queue to delivered, and the
customer sees the IP and ssh command in the console."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.models import User
from app.accounts.security import SESSION_COOKIE, create_session
from app.clock import FixedClock
from app.orders.models import Order
from tests.ops.helpers import fingerprint, paid_order, seed_catalog
from tests.support.browser import requires_chromium

SECRET = "test-secret-key-that-is-long-enough-0123456789"
SHOTS = os.environ.get("OPS_SCREENSHOTS")  # a folder: save screenshots there for review

pytestmark = [
    pytest.mark.browser,
    requires_chromium,
]


def _context(
    browser: Any, engine: Engine, user: User, clock: FixedClock, url: str, width: int
) -> Any:
    with Session(engine) as s:
        cookie = create_session(s, user, clock.now(), SECRET)
        s.commit()
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    ctx.add_cookies([{"name": SESSION_COOKIE, "value": cookie, "url": url}])
    return ctx


def _shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def test_ops_work_an_order_from_the_queue_to_delivered(
    live_url: str,
    browser: Any,
    engine: Engine,
    clock: FixedClock,
    make_user: Callable[..., User],
) -> None:
    seed_catalog(engine, clock.now())
    customer = make_user(email="lin@lab.example")
    order = paid_order(
        engine,
        customer,
        clock.now(),
        sku="hgx-h100",
        nodes=1,
        model_size="32B",
        token_budget="50B tokens",
        free_text="We will run nccl-tests first.",
    )
    ops = make_user(role="ops")
    staff = _context(browser, engine, ops, clock, live_url, 1280)
    page = staff.new_page()
    page.goto(f"{live_url}/staff/ops")
    _shot(page, "queue-1280")
    page.get_by_role("link", name=f"#{order.id}", exact=True).click()
    page.wait_for_url(re.compile(rf"/staff/ops/orders/{order.id}$"))
    assert "We will run nccl-tests first." in page.content()

    page.get_by_role("button", name="Acknowledge").click()
    page.wait_for_load_state()
    assert page.get_by_text("Acknowledged. The customer was told.").is_visible()
    page.get_by_role("button", name="Start provisioning").click()
    page.wait_for_load_state()
    page.get_by_role("button", name="Assign nodes").click()  # the held node is pre-picked
    page.wait_for_load_state()
    assert page.get_by_text("Nodes assigned.").is_visible()

    ip_box = page.get_by_label("IP address")
    assert ip_box.input_value().startswith("10.20.1.")  # from the node's address
    ip_box.fill("203.0.113.77")
    fp = fingerprint("browser-host")
    page.get_by_label("Host-key fingerprints (one per line)").fill(
        f"256 {fp} root@h100-001 (ED25519)"
    )
    page.get_by_role("button", name="Save login details").click()
    page.wait_for_load_state()
    assert page.get_by_text("Login details saved; the customer sees them now.").is_visible()
    _shot(page, "order-1280")

    page.get_by_role("button", name="Mark delivered").click()
    page.wait_for_load_state()
    assert page.get_by_text("Delivered. The first month is charged; the lease runs.").is_visible()
    assert "delivered, lease active" in page.content()
    staff.close()
    if SHOTS:  # narrow screens, for a person to look at
        narrow = _context(browser, engine, ops, clock, live_url, 360)
        q = narrow.new_page()
        for path, name in (
            ("/staff/ops?view=all", "queue-360"),
            (f"/staff/ops/orders/{order.id}", "order-360"),
            ("/staff/clock", "clock-360"),
        ):
            q.goto(live_url + path)
            _shot(q, name)
        narrow.close()

    with Session(engine) as s:
        o = s.get(Order, order.id)
        assert o is not None and o.status == "delivered" and o.periods_paid == 1

    buyer = _context(browser, engine, customer, clock, live_url, 360)
    p = buyer.new_page()
    p.goto(f"{live_url}/console/orders/{order.id}")
    html = p.content()
    assert "203.0.113.77" in html and fp in html
    assert re.search(r"ssh\s+(-p\s+\d+\s+)?ubuntu@203\.0\.113\.77", html)
    buyer.close()
