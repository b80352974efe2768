"""Issue 19 in a real browser: the customer's time zone (cookie written by static/app.js)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import requires_chromium

pytestmark = [pytest.mark.browser, requires_chromium]


def test_the_browser_time_zone_reaches_the_server_and_is_named(live_url: str, browser: Any) -> None:
    ctx = browser.new_context(timezone_id="Asia/Shanghai", viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    page.goto(f"{live_url}/nodes")  # the first visit writes the cookie
    cookie = {c["name"]: c["value"] for c in ctx.cookies()}["tz"]
    assert cookie == "Asia/Shanghai"
    page.goto(f"{live_url}/nodes")
    note = page.locator("p.small", has_text="time zone").inner_text()
    assert "Asia/Shanghai (UTC+8)" in note
    ctx.close()


def test_an_old_url_encoded_cookie_is_replaced_and_still_understood(
    live_url: str, browser: Any
) -> None:
    ctx = browser.new_context(timezone_id="America/New_York")
    ctx.add_cookies([{"name": "tz", "value": "Asia%2FShanghai", "url": live_url}])
    page = ctx.new_page()
    page.goto(f"{live_url}/nodes")
    # The server understood the old encoded value ...
    assert "Asia/Shanghai (UTC+8)" in page.content()
    # ... and the page replaced it with the browser's current zone.
    assert {c["name"]: c["value"] for c in ctx.cookies()}["tz"] == "America/New_York"
    page.goto(f"{live_url}/nodes")
    assert "America/New_York (UTC-5)" in page.content()
    ctx.close()
