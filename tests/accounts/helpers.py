"""Helpers for account tests."""

from __future__ import annotations

import re
from typing import Any

from itsdangerous import URLSafeSerializer

from tests.conftest import CSRF_TOKEN, TEST_SECRET

STRONG = "a good long passphrase"


def reset_csrf(client: Any) -> None:
    """Logging in rotates the CSRF token; put the test token back so ``client`` keeps
    sending a matching header (a real page would carry the new token)."""
    client.cookies.delete("csrftoken")
    client.cookies.set("csrftoken", URLSafeSerializer(TEST_SECRET, salt="csrf").dumps(CSRF_TOKEN))


def signup(client: Any, email: str, password: str = STRONG, next: str = "/account") -> Any:
    r = client.post("/signup", data={"email": email, "password": password, "next": next})
    reset_csrf(client)
    return r


def web_login(client: Any, email: str, password: str = STRONG, next: str = "/account") -> Any:
    r = client.post("/login", data={"email": email, "password": password, "next": next})
    reset_csrf(client)
    return r


def page_csrf(html: str) -> str:
    m = re.search(r'name="csrf-token" content="([^"]+)"', html)
    assert m, "page without a CSRF meta tag"
    return m.group(1)


def web_logout(client: Any) -> Any:
    r = client.post("/logout")
    reset_csrf(client)
    return r
