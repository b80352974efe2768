"""Browser journey: a sales person builds and shares a quote; a logged-out prospect
accepts it in another browser context and lands on /deploy prefilled with the quote."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.accounts.models import User
from app.accounts.security import SESSION_COOKIE, create_session
from app.clock import FixedClock
from app.quotes.models import Quote

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def live_url(app: FastAPI) -> Iterator[str]:
    import uvicorn

    port = _free_port()
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


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _session_cookie(engine: Engine, user: User, clock: FixedClock) -> str:
    with Session(engine) as s:
        cookie = create_session(s, user, clock.now(), SECRET)
        s.commit()
    return cookie


def test_sales_builds_and_shares_a_quote_that_a_prospect_accepts(
    live_url: str,
    browser: Any,
    engine: Engine,
    clock: FixedClock,
    make_user: Callable[..., User],
) -> None:
    sales = make_user(role="sales")
    staff = browser.new_context(viewport={"width": 1280, "height": 900})
    staff.add_cookies(
        [{"name": SESSION_COOKIE, "value": _session_cookie(engine, sales, clock), "url": live_url}]
    )
    page = staff.new_page()
    page.goto(f"{live_url}/staff/quotes")
    page.get_by_role("link", name="New quote").click()
    page.get_by_label("Email").fill("lin@prospect.test")
    page.get_by_label("Name", exact=True).fill("Lin Wei")
    page.get_by_label("Company").fill("Example Labs")
    page.get_by_label("Node", exact=True).select_option("hgx-b200")
    page.get_by_label("Nodes (GPUs for GB300 NVL72)").fill("2")
    page.get_by_label("Months").fill("3")
    page.get_by_label("Discount (%)").fill("10")
    page.get_by_label("Sizing link").fill(f"{live_url}/size?model=llama-3.1-8b&tokens=1T")
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_load_state()
    page.wait_for_url(re.compile(r"/staff/quotes/\d+$"))
    assert "$188,460.00" in page.content()
    page.get_by_role("button", name="Send quote").click()
    page.wait_for_load_state()
    link = page.get_by_label("Share link").input_value()
    assert "/q/" in link
    staff.close()

    prospect = browser.new_context(viewport={"width": 390, "height": 844})  # logged out, a phone
    p = prospect.new_page()
    p.goto(link)
    assert "Example Labs" in p.content()
    assert p.get_by_text("This is an estimate, not a reservation").is_visible()
    p.get_by_role("button", name="Accept and continue to deploy").click()
    p.wait_for_url("**/deploy?**")
    query = parse_qs(urlsplit(p.url).query)
    token = link.rsplit("/", 1)[-1]
    assert query["quote"] == [token]
    assert query["sku"] == ["hgx-b200"] and query["nodes"] == ["2"]
    assert query["note_token_budget"] == ["1T tokens"]
    with Session(engine) as s:
        q = s.exec(select(Quote).where(Quote.token == token)).one()
        assert q.status == "accepted"
    if p.locator("form").count() and "404" not in p.title():
        # The checkout engineer's /deploy form is there: it shows the quoted price.
        assert "31,410.00" in p.content()
    prospect.close()
