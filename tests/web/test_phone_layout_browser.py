"""Issue 19, defect 8, in Chromium: phones (390 px) and a 1280 px laptop, both languages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.models import User
from app.accounts.security import SESSION_COOKIE, create_session
from app.clock import FixedClock
from tests.ops.helpers import seed_catalog
from tests.support.browser import requires_chromium

pytestmark = [pytest.mark.browser, requires_chromium]
SECRET = "test-secret-key-that-is-long-enough-0123456789"


def _page(browser: Any, url: str, width: int, lang: str, cookie: str | None = None) -> Any:
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    cookies = [{"name": "lang", "value": lang, "url": url}]
    if cookie:
        cookies.append({"name": SESSION_COOKIE, "value": cookie, "url": url})
    ctx.add_cookies(cookies)
    return ctx.new_page()


def _page_width(page: Any) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_phone_pages_fit_and_show_what_matters(
    live_url: str,
    browser: Any,
    engine: Engine,
    clock: FixedClock,
    make_user: Callable[..., User],
    lang: str,
) -> None:
    seed_catalog(engine, clock.now())
    staff = make_user(role="ops", email="ops-with-a-long-address@example.com")
    with Session(engine) as s:
        cookie = create_session(s, staff, clock.now(), SECRET)
        s.commit()
    page = _page(browser, live_url, 390, lang, cookie)
    for path in ("/nodes", "/deploy?sku=hgx-h100&nodes=2", "/staff/users", "/staff/nodes"):
        page.goto(live_url + path)
        assert _page_width(page) <= 390, path  # nothing pushes the page sideways

    page.goto(live_url + "/nodes")
    price = page.locator(".nodes-table tbody tr").first.locator("td.price-cell").first
    box = price.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390  # whole price
    assert "US$" in price.inner_text() or "$" in price.inner_text()

    page.goto(live_url + "/deploy?sku=hgx-h100&nodes=2")
    line = page.locator("#sum-inline .sum-inline-line")
    submit = page.locator("#deploy-form button[type=submit]").last
    assert line.is_visible()
    lb, sb = line.bounding_box(), submit.bounding_box()
    assert lb is not None and sb is not None and lb["y"] < sb["y"]  # before the button
    assert "16,900" in line.inner_text() or "33,800" in line.inner_text()
    page.context.close()


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_the_nodes_table_fits_a_laptop_screen(
    live_url: str, browser: Any, engine: Engine, clock: FixedClock, lang: str
) -> None:
    seed_catalog(engine, clock.now())
    page = _page(browser, live_url, 1280, lang)
    page.goto(live_url + "/nodes")
    sw, cw = page.evaluate(
        "[document.querySelector('.nodes-table').scrollWidth,"
        " document.querySelector('.nodes-table').clientWidth]"
    )
    assert sw <= cw  # every column, Network and egress included, without scrolling
    assert page.locator("#sum-inline").count() == 0
    page.context.close()
