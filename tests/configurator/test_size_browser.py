"""/size in Debian's Chromium: live updates, keyboard-only hand-off to /deploy, no-JS submit."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.servers import AppProcess, app_env, free_port

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs /usr/bin/chromium"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from app.migrate import upgrade

    tmp: Path = tmp_path_factory.mktemp("size-browser")
    url = f"sqlite:///{tmp / 'app.db'}"
    upgrade(url)
    proc = AppProcess(
        port=free_port(), env=app_env(url, APP_SIMULATION="false"), log_path=tmp / "app.log"
    )
    proc.start()
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


def test_typing_updates_the_results_and_the_url(server: str, browser: object) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(server + "/size")
    before = page.locator(".rec-why").inner_text()
    page.evaluate(
        "() => { window.__shift = 0; new PerformanceObserver((l) => {"
        " for (const e of l.getEntries()) window.__shift += e.value; })"
        ".observe({type: 'layout-shift'}); }"
    )
    tokens = page.locator("#f-tokens")
    tokens.fill("")
    with page.expect_response(lambda r: "/size?" in r.url and "tokens=15T" in r.url):
        tokens.type("15T")
    page.wait_for_function(
        "(b) => document.querySelector('.rec-why') && "
        "document.querySelector('.rec-why').innerText !== b",
        arg=before,
    )
    assert page.locator(".rec-why").inner_text() != before
    page.wait_for_url("**/size?*tokens=15T*")
    # No layout shift when the results swap in (the region and the cards keep their size).
    assert page.evaluate("window.__shift") < 0.005
    # The page is still one page (the fragment went into #results, not a nested layout).
    assert page.locator("header.site").count() == 1
    assert page.locator("#results h2#results-h").count() == 1
    page.close()


def test_a_typo_is_announced_next_to_its_field(server: str, browser: object) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(server + "/size")
    tokens = page.locator("#f-tokens")
    tokens.fill("")
    with page.expect_response(lambda r: "/size?" in r.url and r.status == 422):
        tokens.type("lots")
    err = page.locator("#err-tokens [role=alert]")
    err.wait_for()
    assert "1.5e12" in err.inner_text()
    assert tokens.input_value() == "lots"  # what was typed stays
    assert "err-tokens" in (tokens.get_attribute("aria-describedby") or "")
    page.close()


def test_keyboard_only_from_size_to_deploy(server: str, browser: object) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(server + "/size?model=llama-3.1-70b&tokens=1T")
    seen_focus_ring = False
    for _ in range(120):
        page.keyboard.press("Tab")
        info = page.evaluate(
            "() => { const e = document.activeElement;"
            " const s = getComputedStyle(e);"
            " return {tag: e.tagName, href: e.getAttribute('href') || '',"
            " text: e.innerText || '', outline: s.outlineStyle}; }"
        )
        if info["tag"] == "INPUT" and info["outline"] != "none":
            seen_focus_ring = True
        if info["tag"] == "A" and info["href"].startswith("/deploy?"):
            break
    else:
        pytest.fail("Tab never reached a 'Use this' link")
    assert seen_focus_ring, "focused inputs show a visible outline"
    page.keyboard.press("Enter")
    page.wait_for_url("**/deploy?*")
    q = parse_qs(urlsplit(page.url).query)
    assert q["sku"] and q["nodes"] and q["note_node_count"] == q["nodes"]
    assert q["note_model_size"] == ["70.6B parameters"]
    assert q["note_token_budget"] == ["1T tokens"]
    assert parse_qs(q["sizing"][0])["model"] == ["llama-3.1-70b"]
    # The deploy form picks the notes up (the checkout engineer's side of the contract).
    assert "70.6B parameters" in page.content()
    page.close()


def test_form_works_with_javascript_off(server: str, browser: object) -> None:
    ctx = browser.new_context(java_script_enabled=False)  # type: ignore[attr-defined]
    page = ctx.new_page()
    page.goto(server + "/size")
    page.fill("#f-tokens", "300B")
    page.select_option("#f-model", "llama-3.1-70b")
    page.get_by_role("button", name="Show results").click()
    page.wait_for_url("**/size?*tokens=300B*")
    assert page.locator("#f-tokens").input_value() == "300B"
    assert page.locator(".rec-why").count() == 1
    assert page.locator("article.sku-card").count() == 6
    assert page.locator("a[href^='/cluster-request?sku=gb300-nvl72']").count() >= 1
    # Errors also work without JS: a full page with the message at the field.
    page.fill("#f-tokens", "many")
    page.get_by_role("button", name="Show results").click()
    page.wait_for_url("**/size?*tokens=many*")
    assert page.locator("#f-tokens").get_attribute("aria-invalid") == "true"
    assert page.locator("#e-tokens").is_visible()
    ctx.close()


def test_back_button_keeps_the_form_in_step_with_the_url(server: str, browser: object) -> None:
    """Issue 19, defect 10: after typing twice and going back, the tokens field, the
    address and the results all show the earlier budget; the pushed address is short."""
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(server + "/size")
    tokens = page.locator("#f-tokens")
    tokens.fill("15T")
    page.wait_for_url("**/size?*tokens=15T*")
    first_why = page.locator(".rec-why").inner_text()
    assert "=&" not in page.url  # htmx pushed the canonical address, no empty fields
    tokens.fill("300B")
    page.wait_for_url("**/size?*tokens=300B*")
    page.wait_for_function(
        "(b) => document.querySelector('.rec-why').innerText !== b", arg=first_why
    )
    page.go_back()
    page.wait_for_url("**/size?*tokens=15T*")
    page.wait_for_function("() => document.querySelector('#f-tokens').value === '15T'")
    assert page.locator("#f-tokens").input_value() == "15T"
    assert page.locator(".rec-why").inner_text() == first_why
    assert page.locator("header.site").count() == 1
    page.close()


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_phone_keeps_the_recommendation_next_to_the_tokens_field(
    server: str, browser: object, lang: str
) -> None:
    """Issue 19, defect 8: on a 390 px phone the results start far below the form; a sticky
    one-line summary shows the recommendation while typing and follows every update."""
    ctx = browser.new_context(viewport={"width": 390, "height": 844})  # type: ignore[attr-defined]
    ctx.add_cookies([{"name": "lang", "value": lang, "url": server}])
    page = ctx.new_page()
    page.goto(server + "/size?model=llama-3.1-8b&tokens=1T")
    tokens = page.locator("#f-tokens")
    tokens.scroll_into_view_if_needed()
    tokens.click()
    summary = page.locator("#size-summary")
    box, field = summary.bounding_box(), tokens.bounding_box()
    assert box is not None and field is not None
    assert box["y"] >= 0 and box["y"] + box["height"] <= 844  # in sight while typing
    assert abs(field["y"] - box["y"]) < 844 / 2  # near the field, not 1,450 px away
    results = page.locator("#results-h").bounding_box()
    assert results is not None and results["y"] > 844  # the full results are off screen
    before = summary.inner_text()
    assert "×" in before
    tokens.fill("200T")
    page.wait_for_function(
        "(b) => document.querySelector('#size-summary').innerText !== b", arg=before
    )
    assert page.locator("#size-summary").count() == 1  # replaced, not nested
    assert summary.inner_text() != before
    assert int(page.evaluate("document.documentElement.scrollWidth")) <= 390
    out = Path(os.environ.get("SCREENSHOT_DIR", "/tmp"))
    page.screenshot(path=str(out / f"size-phone-summary-{lang}.png"))
    ctx.close()
    wide = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    wide.add_cookies([{"name": "lang", "value": lang, "url": server}])
    page = wide.new_page()
    page.goto(server + "/size?model=llama-3.1-8b&tokens=1T")
    assert not page.locator("#size-summary").is_visible()  # results sit beside the form
    page.screenshot(path=str(out / f"size-wide-{lang}.png"))
    wide.close()
