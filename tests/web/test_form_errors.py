"""Issue 36: a rejected form says which fields and links to them; every rejected field is
marked ``aria-invalid``; a limit is written as a person reads it."""

from __future__ import annotations

import re
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.accounts.models import User
from app.clock import FixedClock
from tests.ops.helpers import seed_catalog


def test_a_huge_token_count_is_refused_with_the_limit_grouped(client: TestClient) -> None:
    r = client.get("/size", params={"preset": "llama-3.1-8b", "tokens": "1e40"})
    assert r.status_code == 422
    assert "Enter at most 1,000,000,000,000,000." in r.text
    assert "1000000000000000" not in r.text
    field = re.search(r'<input id="f-tokens"[^>]*>', r.text)
    assert field is not None and 'aria-invalid="true"' in field.group(0)
    client.cookies.set("lang", "zh_CN")
    r = client.get("/size", params={"preset": "llama-3.1-8b", "tokens": "1e40"})
    assert "1,000,000,000,000,000" in r.text


def test_the_deploy_banner_names_and_links_each_rejected_field(
    client: TestClient,
    engine: Engine,
    clock: FixedClock,
    make_user: Callable[..., User],
    login: Callable[[TestClient, User], TestClient],
) -> None:
    seed_catalog(engine, clock.now())
    login(client, make_user())
    form = {
        "sku": "hgx-h100",
        "nodes": "1",
        "image": "ubuntu-24.04-cuda",
        "idempotency_key": "form-errors-1",
        "new_key_name": "laptop",
        "new_key_text": "not a key",
        "note_comm_pattern": "x" * 400,
    }
    r = client.post("/deploy", data=form)
    assert r.status_code == 422
    summary = re.search(
        r'<div class="flash flash-error error-summary"[^>]*>(.*?)</div>', r.text, re.S
    )
    assert summary is not None
    links = dict(re.findall(r'<a href="#(f-[a-z_]+)">([^<]+)</a>', summary.group(1)))
    assert {"f-new_key_text", "f-note_comm_pattern"} <= set(links)
    assert links["f-new_key_text"] == "Public key"
    for anchor in links:
        control = re.search(
            rf'<(?:input|textarea|select|fieldset|p)[^>]*id="{anchor}"[^>]*>', r.text
        )
        assert control is not None, anchor  # the link lands on the field
        if not control.group(0).startswith("<p"):
            assert 'aria-invalid="true"' in control.group(0), control.group(0)
