"""Staff pages (audit log, users) and the ``users`` CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.accounts import service
from app.accounts.audit import AuditEvent
from app.accounts.models import User
from app.clock import FixedClock
from tests.accounts.helpers import STRONG


def test_audit_log_records_who_what_when_where_and_filters(
    client: TestClient,
    make_user: Callable[..., User],
    login: Any,
    engine: Engine,
    clock: FixedClock,
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    client.post("/login", data={"email": "ann@example.com", "password": "not the password"})
    with Session(engine) as s:
        for i in range(60):
            service.audit(s, "test.bulk", clock.now(), target=f"thing:{i}", ip="10.1.1.1")
        s.commit()
    ops = make_user(role="ops", email="ops@example.com")
    login(client, ops)
    r = client.get("/staff/audit", params={"action": "login."})
    assert r.status_code == 200 and "login.failed" in r.text and "test.bulk" not in r.text
    assert "testclient" in r.text  # from where
    r = client.get("/staff/audit", params={"action": "test.bulk"})
    assert "Events: 60" in r.text and "Page 1 of 2" in r.text
    assert (
        "Page 2 of 2" in client.get("/staff/audit", params={"action": "test.bulk", "page": 2}).text
    )
    r = client.get("/staff/audit", params={"target": "thing:7"})
    assert "thing:7" in r.text and "thing:8<" not in r.text
    r = client.get("/staff/audit", params={"since": "2030-01-01"})
    assert "No events match." in r.text
    assert client.get("/staff/audit", params={"since": "garbage"}).status_code == 200


def test_staff_users_search_and_ops_disable_is_audited(
    client: TestClient,
    new_client: Callable[[], Any],
    make_user: Callable[..., User],
    login: Any,
    engine: Engine,
) -> None:
    ann = make_user(email="ann@example.com")
    sales = make_user(role="sales", email="sales@example.com")
    ops = make_user(role="ops", email="ops@example.com")
    sc = login(new_client(), sales)
    r = sc.get("/staff/users", params={"q": "ANN"})
    assert r.status_code == 200 and "ann@example.com" in r.text and "/disable" not in r.text
    assert sc.post(f"/staff/users/{ann.id}/disable").status_code == 403
    login(client, ops)
    r = client.get("/staff/users", params={"q": "%"})  # LIKE wildcards are literal
    assert "ann@example.com" not in r.text
    assert client.post(f"/staff/users/{ann.id}/disable").status_code == 303
    assert client.post(f"/staff/users/{ops.id}/disable").status_code == 409  # not yourself
    assert client.post("/staff/users/99999/disable").status_code == 404
    with Session(engine) as s:
        assert s.get(User, ann.id).is_active is False  # type: ignore[union-attr]
        ev = s.exec(select(AuditEvent).where(AuditEvent.action == "user.disabled")).one()
        assert ev.actor_email == "ops@example.com" and ev.target == f"user:{ann.id}" and ev.ip
    assert client.post(f"/staff/users/{ann.id}/enable").status_code == 303


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, db_url: str, app: Any) -> str:
    monkeypatch.setenv("APP_DATABASE_URL", db_url)
    monkeypatch.setenv("APP_SIMULATION", "false")
    return db_url


def test_cli_creates_staff_and_fails_clearly(
    cli_env: str,
    engine: Engine,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.__main__ import main

    assert (
        main(
            [
                "users",
                "create",
                "--role",
                "ops",
                "--email",
                "Boss@Example.com",
                "--password",
                STRONG,
            ]
        )
        == 0
    )
    assert "created ops account boss@example.com" in capsys.readouterr().out
    with Session(engine) as s:
        u = s.exec(select(User)).one()
        assert u.role == "ops" and u.password_hash.startswith("$argon2id$")
    assert (
        main(
            [
                "users",
                "create",
                "--role",
                "ops",
                "--email",
                "boss@example.com",
                "--password",
                STRONG,
            ]
        )
        == 1
    )
    assert "can't be used for a new account" in capsys.readouterr().err
    assert (
        main(
            ["users", "create", "--role", "admin", "--email", "x@example.com", "--password", STRONG]
        )
        == 2
    )
    assert "unknown role 'admin'" in capsys.readouterr().err
    assert (
        main(
            [
                "users",
                "create",
                "--role",
                "sales",
                "--email",
                "x@example.com",
                "--password",
                "short",
            ]
        )
        == 1
    )
    assert "at least 10" in capsys.readouterr().err
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(STRONG + "\n"))
    assert (
        main(["users", "create", "--role", "sales", "--email", "s@example.com", "--password-stdin"])
        == 0
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a tty, no password: refuse
    assert main(["users", "create", "--role", "sales", "--email", "t@example.com"]) == 2
    assert "no password given" in capsys.readouterr().err
    assert main(["users", "disable", "--email", "s@example.com"]) == 0
    with Session(engine) as s:
        assert s.exec(select(User).where(User.email == "s@example.com")).one().is_active is False
        details = [json.loads(e.details) for e in s.exec(select(AuditEvent)).all()]
        assert all(STRONG not in json.dumps(d) for d in details)
