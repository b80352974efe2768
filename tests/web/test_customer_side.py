"""Issue 19: what a signed-in customer sees when something goes wrong, and in which zone."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from app.accounts.models import User


@pytest.mark.parametrize(
    ("url", "status"),
    [("/orders/999999", 404), ("/staff", 403), ("/q/badtoken", 404), ("/topups/999999", 404)],
)
def test_error_pages_for_signed_in_users_keep_the_layout(
    client: TestClient,
    make_user: Callable[..., User],
    login: Callable[[TestClient, User], TestClient],
    url: str,
    status: int,
) -> None:
    user = make_user(email="someone@example.com")
    login(client, user)
    r = client.get(url)
    assert r.status_code == status
    assert "<nav" in r.text and "someone@example.com" in r.text  # navigation, still signed in
    assert 'role="alert"' in r.text  # a message, not a bare status
    client.cookies.set("lang", "zh_CN")
    r = client.get(url)
    assert r.status_code == status
    assert '<html lang="zh-CN">' in r.text
    assert "someone@example.com" in r.text
    assert ("页面不存在" in r.text) or ("无权操作" in r.text)


def test_times_carry_the_zone_they_are_shown_in() -> None:
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from app.web.i18n import set_locale
    from app.web.templating import format_datetime

    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    set_locale("en")
    assert format_datetime(at, "short", ZoneInfo("Asia/Shanghai")).endswith("5:00\u202fPM UTC+8")
    assert format_datetime(at, "short", ZoneInfo("Asia/Kolkata")).endswith("UTC+5:30")
    assert format_datetime(at, "short", None).endswith("UTC")


def test_an_url_encoded_zone_cookie_is_understood(client: TestClient) -> None:
    client.cookies.set("tz", "Asia%2FShanghai")
    assert "Asia/Shanghai (UTC+8)" in client.get("/nodes").text
    client.cookies.set("tz", "Not/AZone")
    assert "UTC (UTC)" in client.get("/nodes").text
