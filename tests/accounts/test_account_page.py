"""The account page: SSH keys, API tokens, sessions, password and email changes — and
customer A can never read or change customer B's keys, tokens or sessions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.accounts.models import ApiToken, SshKey, User, UserSession
from app.accounts.security import SESSION_COOKIE
from app.notifications.models import OutboxEmail
from tests.accounts.helpers import STRONG, web_login
from tests.accounts.keys import DSA_PUB, private_openssh, public_line
from tests.conftest import AppClient


@pytest.fixture
def two(
    make_user: Callable[..., User],
    login: Any,
    client: AppClient,
    new_client: Callable[[], AppClient],
):  # type: ignore[no-untyped-def]
    a = make_user(email="a@example.com", password=STRONG)
    b = make_user(email="b@example.com", password=STRONG)
    ca = login(client, a)
    cb = login(new_client(), b)
    return a, b, ca, cb


@pytest.mark.parametrize(
    ("text", "status", "message"),
    [
        (public_line("ed25519"), 303, None),
        (public_line("ecdsa256"), 303, None),
        (public_line("ecdsa384"), 303, None),
        (public_line("ecdsa521"), 303, None),
        (public_line("rsa2048"), 303, None),
        ("ssh-ed25519 garbage!!", 422, "not valid base64"),
        (DSA_PUB, 422, "DSA keys are no longer secure"),
        (public_line("rsa1024"), 422, "only 1024 bits"),
        (private_openssh(), 422, "PRIVATE key"),
    ],
    # fixed ids: a generated key in the id would differ between xdist workers
    ids=[
        "ed25519",
        "ecdsa256",
        "ecdsa384",
        "ecdsa521",
        "rsa2048",
        "garbage",
        "dsa",
        "rsa1024",
        "private",
    ],
)
def test_key_table_through_the_page(
    client: TestClient,
    make_user: Callable[..., User],
    login: Any,
    engine: Engine,
    text: str,
    status: int,
    message: str | None,
) -> None:
    login(client, make_user())
    r = client.post("/account/ssh-keys", data={"name": "laptop", "public_key": text})
    assert r.status_code == status
    with Session(engine) as s:
        rows = s.exec(select(SshKey)).all()
    if status == 303:
        assert len(rows) == 1 and rows[0].name == "laptop"
        page = client.get("/account").text
        assert rows[0].fingerprint in page
    else:
        assert rows == [] and message in r.text
        assert 'id="e-public_key"' in r.text  # next to the field
        if "PRIVATE" in text:
            body = "".join(text.splitlines()[1:-1])
            assert body[:30] not in r.text  # not echoed back into the textarea


def test_keys_default_name_duplicates_rename_delete(
    client: TestClient, make_user: Callable[..., User], login: Any, engine: Engine
) -> None:
    login(client, make_user())
    line = public_line("ed25519", "ann@laptop")
    assert client.post("/account/ssh-keys", data={"public_key": line}).status_code == 303
    r = client.post("/account/ssh-keys", data={"public_key": line})
    assert r.status_code == 422 and "already saved" in r.text
    with Session(engine) as s:
        key = s.exec(select(SshKey)).one()
    assert key.name == "ann@laptop"
    assert (
        client.post(f"/account/ssh-keys/{key.id}/rename", data={"name": "  work  box "}).status_code
        == 303
    )
    with Session(engine) as s:
        assert s.get(SshKey, key.id).name == "work box"  # type: ignore[union-attr]
    assert client.post(f"/account/ssh-keys/{key.id}/delete").status_code == 303
    with Session(engine) as s:
        assert s.exec(select(SshKey)).all() == []


def test_customer_a_cannot_touch_b_keys_tokens_or_sessions(two, engine: Engine) -> None:  # type: ignore[no-untyped-def]
    a, b, ca, cb = two
    assert (
        cb.post(
            "/account/ssh-keys", data={"name": "b-key", "public_key": public_line("ed25519")}
        ).status_code
        == 303
    )
    assert cb.post("/account/api-tokens", data={"token_name": "b-token"}).status_code == 201
    with Session(engine) as s:
        key = s.exec(select(SshKey)).one()
        tok = s.exec(select(ApiToken)).one()
        b_session = s.exec(select(UserSession).where(UserSession.user_id == b.id)).one()
    page = ca.get("/account").text
    assert "b-key" not in page and "b-token" not in page and key.fingerprint not in page
    for url in (
        f"/account/ssh-keys/{key.id}/delete",
        f"/account/ssh-keys/{key.id}/rename",
        f"/account/api-tokens/{tok.id}/revoke",
        f"/account/sessions/{b_session.id}/revoke",
    ):
        assert ca.post(url, data={"name": "pwned"}).status_code == 404, url
    for guess in range(1, 6):  # id guessing reveals nothing either
        assert ca.post(f"/account/ssh-keys/{key.id + guess}/delete").status_code == 404
    assert ca.get("/api/v1/ssh-keys").json() == []
    assert ca.delete(f"/api/v1/ssh-keys/{key.id}").status_code == 404
    with Session(engine) as s:
        assert s.get(SshKey, key.id).name == "b-key"  # type: ignore[union-attr]
        assert s.get(ApiToken, tok.id).revoked_at is None  # type: ignore[union-attr]
        assert s.get(UserSession, b_session.id).revoked_at is None  # type: ignore[union-attr]
    assert cb.get("/account").status_code == 200


def test_api_token_shown_once_hashed_bearer_and_revocable(
    client: TestClient,
    raw_client: TestClient,
    make_user: Callable[..., User],
    login: Any,
    engine: Engine,
) -> None:
    user = make_user(email="ann@example.com")
    login(client, user)
    r = client.post("/account/api-tokens", data={"token_name": "ci runner"})
    assert r.status_code == 201 and r.headers["cache-control"] == "no-store"
    import re

    secret = re.search(r'id="new-token-value">(gpn_[^<]+)<', r.text).group(1)  # type: ignore[union-attr]
    assert secret not in client.get("/account").text  # shown once
    with Session(engine) as s:
        row = s.exec(select(ApiToken)).one()
        assert secret not in (row.token_hash, row.prefix) and row.prefix == secret[:12]
    auth = {"Authorization": f"Bearer {secret}"}
    assert raw_client.get("/api/v1/me", headers=auth).json()["email"] == "ann@example.com"
    # Bearer calls need no CSRF token (no ambient credentials) and act only as the owner.
    r = raw_client.post(
        "/api/v1/ssh-keys", headers=auth, json={"name": "k", "public_key": public_line("ecdsa256")}
    )
    assert r.status_code == 201 and r.json()["fingerprint"].startswith("SHA256:")
    assert client.post(f"/account/api-tokens/{row.id}/revoke").status_code == 303
    r = raw_client.get("/api/v1/me", headers=auth)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"


def test_sessions_list_and_revoke_other_browser(
    client: TestClient,
    new_client: Callable[[], AppClient],
    make_user: Callable[..., User],
    engine: Engine,
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    web_login(client, "ann@example.com")
    other = new_client()
    web_login(other, "ann@example.com")
    page = client.get("/account").text
    assert page.count('/revoke"') >= 2 and "this browser" in page
    with Session(engine) as s:
        rows = s.exec(select(UserSession).order_by(UserSession.id)).all()  # type: ignore[arg-type]
    assert client.post(f"/account/sessions/{rows[1].id}/revoke").status_code == 303
    assert other.get("/account").status_code == 303  # signed out over there
    assert client.get("/account").status_code == 200


def test_change_password_signs_out_other_sessions(
    client: TestClient,
    new_client: Callable[[], AppClient],
    make_user: Callable[..., User],
    engine: Engine,
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    web_login(client, "ann@example.com")
    other = new_client()
    web_login(other, "ann@example.com")
    r = client.post(
        "/account/password",
        data={"current_password": "wrong one!!", "new_password": "another fine phrase"},
    )
    assert r.status_code == 422 and "current password is not right" in r.text
    r = client.post("/account/password", data={"current_password": STRONG, "new_password": "short"})
    assert r.status_code == 422 and 'id="e-new_password"' in r.text
    r = client.post(
        "/account/password",
        data={"current_password": STRONG, "new_password": "another fine phrase"},
    )
    assert r.status_code == 303
    assert client.get("/account").status_code == 200
    assert other.get("/account").status_code == 303
    with Session(engine) as s:
        assert s.exec(select(OutboxEmail).where(OutboxEmail.to_addr == "ann@example.com")).first()


def test_change_email_needs_password_and_tells_the_old_address(
    client: TestClient, make_user: Callable[..., User], login: Any, engine: Engine
) -> None:
    user = make_user(email="ann@example.com", password=STRONG)
    make_user(email="taken@example.com")
    login(client, user)
    r = client.post(
        "/account/email", data={"new_email": "new@example.com", "email_password": "nope nope nope"}
    )
    assert r.status_code == 422 and 'value="new@example.com"' in r.text
    r = client.post(
        "/account/email", data={"new_email": "taken@example.com", "email_password": STRONG}
    )
    assert r.status_code == 422
    r = client.post(
        "/account/email", data={"new_email": " New@Example.com", "email_password": STRONG}
    )
    assert r.status_code == 303
    with Session(engine) as s:
        assert s.get(User, user.id).email == "new@example.com"  # type: ignore[union-attr]
        assert s.exec(select(OutboxEmail).where(OutboxEmail.to_addr == "ann@example.com")).first()


def test_session_cookie_tampering_is_ignored(
    client: TestClient, make_user: Callable[..., User], login: Any
) -> None:
    login(client, make_user())
    good = client.cookies.get(SESSION_COOKIE)
    client.cookies.set(SESSION_COOKIE, good[:-2] + ("AA" if not good.endswith("AA") else "BB"))
    assert client.get("/account").status_code == 303
