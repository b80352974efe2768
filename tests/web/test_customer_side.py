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
