"""CSRF on account forms, secrets never stored or logged in clear, security headers."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.accounts.models import SshKey, User, UserSession
from app.clock import FixedClock
from app.main import create_app
from app.settings import Settings
from tests.accounts.helpers import STRONG, page_csrf
from tests.accounts.keys import private_openssh, private_pem


def test_missing_or_forged_csrf_is_refused_and_changes_nothing(
    raw_client: TestClient, make_user: Callable[..., User], login: Any, engine: Engine
) -> None:
    user = make_user(email="ann@example.com", password=STRONG)
    login(raw_client, user)
    with Session(engine) as s:
        key = SshKey(
            user_id=user.id,
            name="k",
            key_type="ssh-ed25519",
            bits=256,
            public_key="x",
            fingerprint="SHA256:x",
            created_at=user.created_at,
        )  # type: ignore[arg-type]
        s.add(key)
        s.commit()
        s.refresh(key)
    attempts = [
        ("/account/password", {"current_password": STRONG, "new_password": "another fine phrase"}),
        ("/account/email", {"new_email": "evil@example.com", "email_password": STRONG}),
        (f"/account/ssh-keys/{key.id}/delete", {}),
        ("/account/api-tokens", {"token_name": "evil"}),
        ("/account/sessions/revoke-others", {}),
        ("/logout", {}),
        ("/signup", {"email": "csrf@example.com", "password": STRONG}),
        ("/login", {"email": "ann@example.com", "password": STRONG}),
    ]
    for url, data in attempts:
        for extra in ({}, {"csrf_token": "forged"}):
            r = raw_client.post(url, data={**data, **extra})
            assert r.status_code == 403, url
        r = raw_client.post(url, data=data, headers={"X-CSRF-Token": "forged"})
        assert r.status_code == 403, url
    with Session(engine) as s:
        u = s.get(User, user.id)
        assert u is not None and u.email == "ann@example.com"
        assert s.get(SshKey, key.id) is not None
        assert len(s.exec(select(User)).all()) == 1
        assert all(r.revoked_at is None for r in s.exec(select(UserSession)).all())
        assert s.exec(text("select count(*) from api_tokens")).one()[0] == 0  # type: ignore[call-overload]
    # The real page's token works (forms carry it, htmx sends it as a header).
    token = page_csrf(raw_client.get("/account").text)
    assert f'name="csrf_token" value="{token}"' in raw_client.get("/account").text
    assert (
        raw_client.post(
            "/account/api-tokens", data={"token_name": "ok", "csrf_token": token}
        ).status_code
        == 201
    )


def _all_text(engine: Engine) -> str:
    """Every value of every row of every table, as one string."""
    from app.db import metadata

    out = []
    with engine.connect() as conn:
        for table in metadata.sorted_tables:
            for row in conn.execute(table.select()):
                out.append(" ".join(str(v) for v in row))
    return "\n".join(out)


def test_passwords_and_private_keys_never_stored_or_logged(
    client: TestClient,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
    make_user: Callable[..., User],
) -> None:
    from tests.accounts.helpers import reset_csrf

    caplog.set_level(logging.DEBUG)
    pw = "Sekrit-Passphrase-4242"
    wrong = "Wrong-Passphrase-9898"
    new_pw = "Brand-New-Passphrase-7373"
    priv = private_openssh()
    pem = private_pem()
    r = client.post("/signup", data={"email": "ann@example.com", "password": pw})
    assert r.status_code == 303
    reset_csrf(client)
    client.post("/account/ssh-keys", data={"name": "k", "public_key": priv})
    client.post("/account/ssh-keys", data={"name": "k", "public_key": pem})
    client.post("/api/v1/ssh-keys", json={"name": "k", "public_key": priv})
    client.post("/logout")
    reset_csrf(client)
    client.post("/login", data={"email": "ann@example.com", "password": wrong})
    client.post("/login", data={"email": wrong, "password": wrong})  # password typed as email
    client.post("/login", data={"email": "ann@example.com", "password": pw})
    reset_csrf(client)
    client.post("/password/forgot", data={"email": "ann@example.com"})
    body = _all_text(engine)
    link = re.search(r"/password/reset/([A-Za-z0-9_\-]+)", body).group(1)  # type: ignore[union-attr]
    client.post(f"/password/reset/{link}", data={"password": new_pw})
    # Everything the server logged (the test client's own httpx log lines excluded).
    server = [r for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    logs = "\n".join(r.getMessage() + str(r.__dict__) for r in server)
    stored = _all_text(engine).replace(link, "")  # the link lives only in the outbox email
    secrets = [pw, wrong, new_pw, *priv.splitlines()[1:-1], *pem.splitlines()[1:-1]]
    for secret in secrets:
        assert secret not in logs, "secret in logs"
        assert secret not in stored, "secret stored in the database"
    assert link not in logs  # reset links are redacted from request logs
    assert "/password/reset/[redacted]" in logs


def test_security_headers_and_hsts_only_over_https(
    client: TestClient, db_url: str, clock: FixedClock
) -> None:
    for path in ("/login", "/signup", "/password/forgot"):
        r = client.get(path)
        csp = r.headers["content-security-policy"]
        assert (
            "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
        )
        assert "frame-ancestors 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "strict-origin-when-cross-origin"
        assert "strict-transport-security" not in r.headers
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", r.text) and "onclick" not in r.text
        assert " style=" not in r.text
    https = Settings(
        environment="test",
        database_url=db_url,
        secret_key="test-secret-0123456789-abcdefghijklmnopq",
        base_url="https://gpu.example",
    )
    app = create_app(https, clock=clock)
    with TestClient(app, base_url="https://testserver") as c:
        r = c.get("/login")
        assert r.headers["strict-transport-security"].startswith("max-age=")
    app.state.engine.dispose()
