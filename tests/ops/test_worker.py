"""The worker runs every due job in its own transaction and sends the outbox over SMTP."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from aiosmtpd.controller import Controller
from sqlmodel import Session, select

from app.notifications.models import OutboxEmail
from app.orders.models import Order
from app.worker import run_once
from tests.ops.helpers import paid_order, seed_catalog


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], str]] = []

    async def handle_DATA(self, server, session, envelope):  # type: ignore[no-untyped-def]
        self.messages.append(
            (
                envelope.mail_from,
                list(envelope.rcpt_tos),
                envelope.content.decode("utf-8", "replace"),
            )
        )
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def smtp():  # type: ignore[no-untyped-def]
    inbox = Inbox()
    port = _free_port()
    ctl = Controller(inbox, hostname="127.0.0.1", port=port)
    ctl.start()
    yield inbox, port
    ctl.stop()


def test_worker_sends_late_notice_by_smtp_once(
    app, engine, make_user, clock, settings, smtp
) -> None:  # type: ignore[no-untyped-def]
    inbox, port = smtp
    settings.smtp_port = port
    seed_catalog(engine, clock.now())
    customer = make_user()
    order = paid_order(engine, customer, clock.now())
    assert order.promised_date is not None
    clock.set(clock.now() + timedelta(days=(order.promised_date - clock.now().date()).days + 1))
    first = run_once(engine, clock, settings)
    assert first["late_notices"] == 1 and first["outbox"] >= 1
    assert all(not str(v).startswith("error") for v in first.values()), first
    second = run_once(engine, clock, settings)
    assert second["late_notices"] == 0 and second["outbox"] == 0
    late_mail = [m for m in inbox.messages if "missed its promised delivery date" in m[2]]
    assert len(late_mail) == 1 and late_mail[0][1] == [customer.email]
    with Session(engine) as s:
        assert all(e.sent_at is not None for e in s.exec(select(OutboxEmail)).all())
        assert s.get(Order, order.id).late_notified_at is not None  # type: ignore[union-attr]


def test_a_failing_job_does_not_stop_the_others(engine, clock, settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import app.orders.renewals as renewals

    def boom(engine, now):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(renewals, "run_due_renewals_each", boom)
    settings.smtp_port = _free_port()  # nobody listens: the outbox just retries later
    results = run_once(engine, clock, settings)
    assert results["renewals"] == "error: RuntimeError"
    assert results["late_notices"] == 0 and results["invoice_expiry"] == 0


def test_worker_command_once(db_url, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from app.__main__ import main

    monkeypatch.setenv("APP_DATABASE_URL", db_url)
    monkeypatch.setenv("APP_SMTP_PORT", str(_free_port()))
    assert main(["worker", "--once"]) == 0
    out = capsys.readouterr().out
    assert "renewals: 0" in out and "outbox: 0" in out
