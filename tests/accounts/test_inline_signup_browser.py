"""Browser journey (Debian's Chromium): a new visitor on /deploy creates an account inside
the deploy form and continues to the order review with every choice intact; an existing
customer logs in inside the same form."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session

from app.accounts.models import User
from app.accounts.security import hash_password
from tests.orders.conftest import new_public_key
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.servers import AppProcess, app_env, free_port

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs /usr/bin/chromium"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from app.catalog import seed as catalog_seed
    from app.clock import wall_now
    from app.db import make_engine
    from app.main import import_models
    from app.migrate import upgrade

    tmp: Path = tmp_path_factory.mktemp("inline-auth")
    import_models()
    url = f"sqlite:///{tmp / 'app.db'}"
    upgrade(url)
    engine = make_engine(url)
    now = wall_now()
    with Session(engine) as s:
        catalog_seed.seed(s, now)
        s.add(
            User(
                email="known@journey.test",
                password_hash=hash_password("known pass 12345"),
                created_at=now,
            )
        )
        s.commit()
    engine.dispose()
    proc = AppProcess(port=free_port(), env=app_env(url), log_path=tmp / "app.log").start()
    try:
        yield proc.url
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _choices(page: object) -> None:
    page.select_option("#f-sku", "hgx-h200")  # type: ignore[attr-defined]
    page.fill("#f-nodes", "2")  # type: ignore[attr-defined]
    page.fill("#f-new_key_name", "laptop")  # type: ignore[attr-defined]
    page.fill("#f-new_key_text", new_public_key("ann@laptop"))  # type: ignore[attr-defined]
    page.fill("#f-note_model_size", "70B")  # type: ignore[attr-defined]


def test_new_visitor_signs_up_inside_the_deploy_form(server: str, browser: object) -> None:
    from playwright.sync_api import expect

    ctx = browser.new_context()  # type: ignore[attr-defined]
    page = ctx.new_page()
    page.goto(server + "/deploy")
    _choices(page)
    expect(page.locator("input[name=account_mode][value=signup]")).to_be_checked()
    page.fill("#acct-email", "New.Customer@Journey.test")
    page.fill("#acct-password", "short")
    page.get_by_role("button", name="Review the order").click()
    # Refused next to the field; every choice is still there.
    expect(page.locator("#acct-password-err")).to_contain_text("at least 10 characters")
    expect(page.locator("#f-sku")).to_have_value("hgx-h200")
    expect(page.locator("#f-nodes")).to_have_value("2")
    expect(page.locator("#f-note_model_size")).to_have_value("70B")
    expect(page.locator("#f-new_key_name")).to_have_value("laptop")
    expect(page.locator("#acct-email")).to_have_value("New.Customer@Journey.test")
    expect(page.locator("#acct-password")).to_have_value("")
    page.fill("#acct-password", "a good long passphrase")
    page.get_by_role("button", name="Review the order").click()
    page.wait_for_url(re.compile(r"/orders/\d+/review"))
    body = page.locator("main").inner_text()
    assert "H200" in body  # the chosen node type
    expect(page.locator(".nav-end .who")).to_have_text("new.customer@journey.test")
    cookies = {c["name"]: c for c in ctx.cookies()}
    assert cookies["session"]["httpOnly"] and cookies["session"]["sameSite"] == "Lax"
    # The order carries the two nodes chosen before signing up.
    assert re.search(r"\b2\b", body)
    ctx.close()


def test_existing_customer_logs_in_inside_the_form(server: str, browser: object) -> None:
    from playwright.sync_api import expect

    ctx = browser.new_context()  # type: ignore[attr-defined]
    page = ctx.new_page()
    page.goto(server + "/deploy")
    _choices(page)
    page.check("input[name=account_mode][value=login]")
    page.fill("#acct-email", "known@journey.test")
    page.fill("#acct-password", "not the password")
    page.get_by_role("button", name="Review the order").click()
    expect(page.locator("#acct-password-err")).to_contain_text("do not match an account")
    expect(page.locator("input[name=account_mode][value=login]")).to_be_checked()
    expect(page.locator("#f-sku")).to_have_value("hgx-h200")
    page.fill("#acct-password", "known pass 12345")
    page.get_by_role("button", name="Review the order").click()
    page.wait_for_url(re.compile(r"/orders/\d+/review"))
    expect(page.locator(".nav-end .who")).to_have_text("known@journey.test")
    ctx.close()
