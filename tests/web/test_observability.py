"""Logs and metrics (issue 13): configured once per process, secrets redacted, money
events logged, /metrics summed over worker processes and behind a token."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app import logs
from app.clock import FixedClock
from tests.conftest import AppClient


def _access_record(target: str) -> logging.LogRecord:
    return logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", target, "1.1", 200),
        None,
    )


@pytest.mark.parametrize(
    ("target", "shown"),
    [
        ("/password/reset/abcSECRETtoken", "/password/reset/[redacted]"),
        ("/q/SHARETOKEN123?x=1", "/q/[redacted]?x=1"),
        ("/login?next=/console", "/login?next=/console"),
        ("/verify?token=SECRET", "/verify?[redacted]"),
        ("/nodes", "/nodes"),
    ],
)
def test_uvicorn_access_log_is_redacted(target: str, shown: str) -> None:
    record = _access_record(target)
    assert logs.RedactingFilter().filter(record)
    message = record.getMessage()
    assert shown in message
    assert "SECRET" not in message and "SHARETOKEN" not in message


def test_logging_is_configured_at_process_start_not_in_create_app(
    monkeypatch: pytest.MonkeyPatch, db_url: str
) -> None:
    import app.main as main

    calls: list[str] = []
    monkeypatch.setattr(logs, "configure", lambda level="INFO": calls.append(level))
    monkeypatch.setenv("APP_DATABASE_URL", db_url)
    monkeypatch.setenv("APP_ENVIRONMENT", "test")
    created = main.create_app()
    assert calls == []
    created.state.engine.dispose()
    factory = main.asgi()
    assert len(calls) == 1
    factory.state.engine.dispose()
    monkeypatch.undo()
    before = list(logging.getLogger("uvicorn.access").filters)
    logs.configure("INFO")
    logs.configure("INFO")
    filters = [f for f in logging.getLogger("uvicorn.access").filters if f not in before]
    assert sum(isinstance(f, logs.RedactingFilter) for f in filters) <= 1
    assert any(
        isinstance(f, logs.RedactingFilter) for f in logging.getLogger("uvicorn.access").filters
    )


def test_money_events_are_logged_when_they_commit(
    engine: Engine,
    make_user,
    clock: FixedClock,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
) -> None:
    from app.ledger import service as ledger

    logs.install_money_log()
    user = make_user()
    caplog.set_level(logging.INFO, logger="app.money")
    with Session(engine) as s:
        ledger.grant_promotion(
            s,
            user_id=user.id,
            amount_cents=12_345,
            reason="t",
            now=clock.now(),
            idempotency_key="rolled-back",
        )
        s.rollback()
    assert not [r for r in caplog.records if r.name == "app.money"]
    with Session(engine) as s:
        ledger.grant_promotion(
            s,
            user_id=user.id,
            amount_cents=12_345,
            reason="t",
            now=clock.now(),
            idempotency_key="kept",
        )
        s.commit()
    lines = [r.getMessage() for r in caplog.records if r.name == "app.money"]
    assert any("ledger entry" in m and "amount_cents=12345" in m for m in lines), lines


def test_webhook_rejections_are_logged(client: AppClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="app.money")
    r = client.post(
        "/payments/webhook",
        content=b'{"type":"InvoiceSettled"}',
        headers={"btcpay-sig": "sha256=00"},
    )
    assert r.status_code >= 400
    assert any("webhook rejected" in rec.getMessage() for rec in caplog.records)


@pytest.mark.slow
def test_metrics_add_up_over_worker_processes(db_url: str, tmp_path: Path) -> None:
    """With several workers each scrape answers for the whole server, not one worker."""
    if not db_url.startswith("sqlite"):
        pytest.skip("independent of the database")
    from tests.support.servers import AppProcess, app_env, free_port

    mp = tmp_path / "prom"
    mp.mkdir()
    env = app_env(db_url, PROMETHEUS_MULTIPROC_DIR=str(mp), APP_METRICS_TOKEN="tok-123")
    p = AppProcess(free_port(), env, tmp_path / "app.log", extra_args=["--workers", "2"])
    p.start(wait=90)
    try:
        with httpx.Client(base_url=p.url, timeout=10) as c:
            for _ in range(12):
                # New connections, so both workers get some of them.
                assert httpx.get(p.url + "/lang/en", timeout=10).status_code == 303
            assert c.get("/metrics").status_code == 401
            seen = set()
            for _ in range(4):
                text = c.get("/metrics", headers={"Authorization": "Bearer tok-123"}).text
                total = sum(
                    float(m.group(1))
                    for m in re.finditer(
                        r'^http_requests_total\{[^}]*route="/lang/\{code\}"[^}]*\} (\S+)$',
                        text,
                        re.M,
                    )
                )
                seen.add(total)
            assert seen == {12.0}, seen
    finally:
        p.stop()


def test_metrics_token_setting_exists(app: FastAPI) -> None:
    assert app.state.settings.metrics_token == ""
