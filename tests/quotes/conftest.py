from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.accounts.models import User

BASE_FORM = {
    "prospect_name": "Lin Wei",
    "prospect_email": "lin@prospect.test",
    "prospect_company": "Example Labs",
    "sku": "hgx-b200",
    "quantity": "2",
    "months": "3",
    "discount": "10",
    "valid_days": "7",
    "sizing": "",
    "sizing_notes": "",
    "notes": "Thanks for the call.",
}


@pytest.fixture
def sales(make_user: Callable[..., User]) -> User:
    return make_user(role="sales")


@pytest.fixture
def ops(make_user: Callable[..., User]) -> User:
    return make_user(role="ops")


@pytest.fixture
def sales_client(client: TestClient, login: Any, sales: User) -> TestClient:
    return login(client, sales)  # type: ignore[no-any-return]


@pytest.fixture
def build_quote(sales_client: TestClient) -> Callable[..., int]:
    """Create a draft through the builder; returns its id."""

    def _build(**overrides: str) -> int:
        form = {**BASE_FORM, **overrides}
        r = sales_client.post("/staff/quotes/new", data=form)
        assert r.status_code == 303, r.text[:2000]
        m = re.match(r"/staff/quotes/(\d+)$", r.headers["location"])
        assert m
        return int(m.group(1))

    return _build
