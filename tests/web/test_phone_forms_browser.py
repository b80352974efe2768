"""Issue 36 in Chromium: what a customer sees on a 390 px phone in Chinese (and a 1280 px
laptop in English) — table columns wide enough to read, labels that do not run into each
other, inputs wide enough to type in, code not clipped, a rejected form that names and
links the fields, and the zone the page's times are in."""

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
from app.payments import service as payments
from tests.ops.helpers import paid_order, seed_catalog
from tests.support import factories
from tests.support.browser import requires_chromium

pytestmark = [pytest.mark.browser, requires_chromium]
SECRET = "test-secret-key-that-is-long-enough-0123456789"
SHOTS = os.environ.get("SHOT_DIR")  # a folder: keep a screenshot of each page looked at


def _context(browser: Any, url: str, width: int, lang: str, cookie: str | None, tz: str) -> Any:
    ctx = browser.new_context(viewport={"width": width, "height": 900}, timezone_id=tz)
    cookies = [{"name": "lang", "value": lang, "url": url}]
    if cookie:
        cookies.append({"name": SESSION_COOKIE, "value": cookie, "url": url})
    ctx.add_cookies(cookies)
    return ctx


def _shot(page: Any, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


@pytest.fixture
def customer_with_order(
    engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> tuple[str, int]:
    seed_catalog(engine, clock.now())
    customer = make_user(email="phone@lab.example")
    order = paid_order(engine, customer, clock.now(), nodes=1)
    factories.deliver(engine, order.id or 0, clock.now())
    with Session(engine) as s:
        payments.create_topup(
            s, user_id=customer.id or 0, amount_cents=250_000, currency="USDT", now=clock.now()
        )
        s.commit()
        cookie = create_session(s, customer, clock.now(), SECRET)
        s.commit()
    clock.advance(timedelta(hours=2))
    return cookie, order.id or 0


def _fits(page: Any, selector: str, width: int) -> None:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (selector, box)


@pytest.mark.parametrize(("width", "lang"), [(390, "zh_CN"), (1280, "en")])
def test_what_a_customer_sees_on_a_phone_and_a_laptop(
    live_url: str, browser: Any, customer_with_order: tuple[str, int], width: int, lang: str
) -> None:
    cookie, order_id = customer_with_order
    ctx = _context(browser, live_url, width, lang, cookie, "Asia/Shanghai")
    page = ctx.new_page()
    tag = f"{lang}-{width}"

    page.goto(live_url + "/balance")
    _shot(page, f"balance-{tag}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # the top-up's status reads on one line ("等待付款"), never a character per line
    status = page.locator("td.status-cell").first
    lines = status.evaluate(
        "e => { const r = document.createRange(); r.selectNodeContents(e);"
        " return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; }"
    )
    assert lines == 1, (lines, status.inner_text())
    assert "原因： " not in page.inner_text("body")  # a full-width colon carries its own space

    page.goto(live_url + f"/console/orders/{order_id}")
    _shot(page, f"order-{tag}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for pre in page.locator(".checklist pre, .copy-row pre").all():
        # a long command wraps inside its box: nothing is cut off at the right edge
        sw, cw = pre.evaluate("e => [e.scrollWidth, e.clientWidth]")
        assert sw <= cw, (pre.inner_text(), sw, cw)
    page.locator("summary", has_text="重装" if lang == "zh_CN" else "Reinstall").first.click()
    confirm = page.locator("#controls label.check:visible", has=page.locator("input[name=confirm]"))
    note = page.locator("#controls label[for=ctl-note-reinstall]")
    cb, nb = confirm.bounding_box(), note.bounding_box()
    assert cb is not None and nb is not None
    assert cb["y"] + cb["height"] <= nb["y"] + 1, (cb, nb)  # the next label starts below
    page.locator("summary", has_text="SSH").first.click()
    key_name = page.locator("#ctl-key-name").bounding_box()
    assert key_name is not None and key_name["width"] >= min(300, width - 100), key_name
    assert key_name["height"] >= 36, key_name  # a finger-sized field, like the others
    _shot(page, f"order-open-{tag}")

    page.goto(live_url + "/account")
    _shot(page, f"account-{tag}")
    key_name = page.locator("#f-name")
    box = key_name.bounding_box()
    assert box is not None and box["width"] >= min(200, width - 80), box  # room to type a name
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    ctx.close()


def test_a_rejected_form_names_the_fields_and_links_to_them(
    live_url: str, browser: Any, customer_with_order: tuple[str, int]
) -> None:
    cookie, _order_id = customer_with_order
    ctx = _context(browser, live_url, 390, "zh_CN", cookie, "Asia/Shanghai")
    page = ctx.new_page()
    page.goto(live_url + "/deploy?sku=hgx-h100&nodes=1")
    page.fill("#f-nodes", "40")
    page.fill("#f-note_free_text", "x" * 10)
    page.evaluate("document.getElementById('f-nodes').removeAttribute('max')")
    page.locator("#deploy-form button[type=submit]").last.click()
    page.wait_for_selector("#error-summary")
    _shot(page, "deploy-errors-zh_CN-390")
    summary = page.locator("#error-summary")
    assert summary.is_visible()
    link = summary.locator('a[href="#f-nodes"]')
    assert link.count() == 1 and "节点数量" in link.inner_text()
    assert page.locator("#f-nodes").get_attribute("aria-invalid") == "true"
    link.click()
    box = page.locator("#f-nodes").bounding_box()
    assert box is not None and -1 <= box["y"] <= 900  # the field is on screen
    ctx.close()


def test_the_first_visit_shows_times_in_the_browsers_zone(live_url: str, browser: Any) -> None:
    """An anonymous visitor's first page: tz.js sets the cookie and the page is drawn again
    in the browser's zone, without a click."""
    ctx = browser.new_context(viewport={"width": 390, "height": 900}, timezone_id="Asia/Shanghai")
    page = ctx.new_page()
    page.goto(live_url + "/nodes")
    page.wait_for_load_state("load")
    note = page.locator("#zone-note").inner_text()
    assert "Asia/Shanghai" in note and "UTC+8" in note
    assert any(c["name"] == "tz" and c["value"] == "Asia/Shanghai" for c in ctx.cookies())
    ctx.close()
