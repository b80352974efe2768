"""The outbox sends mail outside any transaction; one bad message never poisons the batch."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.clock import FixedClock
from app.notifications import service as mail
from app.notifications.models import OutboxEmail
from app.worker import run_once
from tests.ops.test_worker import smtp  # noqa: F401 - the SMTP fixture


def _add(engine: Engine, now, **kw) -> int:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        row = OutboxEmail(
            to_addr=kw.pop("to", "c@example.com"),
            subject=kw.pop("subject", "hello"),
            body=kw.pop("body", "body"),
            created_at=now,
        )
        s.add(row)
        s.commit()
        assert row.id is not None
        return row.id


def test_one_malformed_email_is_marked_failed_and_the_rest_sent_exactly_once(
    engine: Engine,
    clock: FixedClock,
    settings,  # type: ignore[no-untyped-def]
    smtp,  # noqa: F811
) -> None:
    inbox, port = smtp
    settings.smtp_port = port
    now = clock.now()
    good = [_add(engine, now, to=f"c{i}@example.com", subject=f"Order {i}") for i in range(8)]
    # Written before subjects were single-line by construction (or by hand): still sent,
    # on one line.
    crlf = _add(engine, now, subject="Delayed\r\nBcc: victim@example.com", to="d@example.com")
    bad = _add(engine, now, to="x@example.com\r\nBcc: victim@example.com")
    first = run_once(engine, clock, settings, only={"outbox"})
    assert first["outbox"] == 9
    for _ in range(3):  # later rounds send nothing again
        clock.set(clock.now() + timedelta(minutes=10))
        assert run_once(engine, clock, settings, only={"outbox"})["outbox"] == 0
    assert len(inbox.messages) == 9
    rcpts = sorted(r for m in inbox.messages for r in m[1])
    assert rcpts == sorted([f"c{i}@example.com" for i in range(8)] + ["d@example.com"])
    assert all("victim" not in r for r in rcpts)
    crlf_mail = next(m for m in inbox.messages if m[1] == ["d@example.com"])
    assert "Subject: Delayed Bcc: victim@example.com" in crlf_mail[2]
    with Session(engine) as s:
        rows = {r.id: r for r in s.exec(select(OutboxEmail)).all()}
    assert all(rows[i].sent_at is not None for i in [*good, crlf])
    assert rows[bad].sent_at is None and rows[bad].failed_at is not None
    assert rows[bad].last_error.startswith("malformed")


def test_subjects_are_single_line_by_construction(engine: Engine, clock: FixedClock) -> None:
    with Session(engine) as s:
        row = mail.enqueue_email(
            s,
            to="a@example.com",
            subject="Late:\r\nBcc: x@example.com\n  again",
            body="b",
            now=clock.now(),
        )
        s.commit()
        assert row.subject == "Late: Bcc: x@example.com again"


def test_no_lock_is_held_while_sending(
    engine: Engine,
    clock: FixedClock,
    settings,  # type: ignore[no-untyped-def]
    smtp,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a message is being sent, another writer gets the database at once."""
    inbox, port = smtp
    settings.smtp_port = port
    _add(engine, clock.now())
    seen: list[bool] = []
    real = mail.smtplib.SMTP.send_message

    def send_and_write(self, msg, *a, **kw):  # type: ignore[no-untyped-def]
        from app.db import transaction

        with transaction(engine) as s:  # would wait (and fail) if the outbox held the lock
            s.add(
                OutboxEmail(to_addr="z@example.com", subject="s", body="b", created_at=clock.now())
            )
        seen.append(True)
        return real(self, msg, *a, **kw)

    monkeypatch.setattr(mail.smtplib.SMTP, "send_message", send_and_write)
    assert run_once(engine, clock, settings, only={"outbox"})["outbox"] == 1
    assert seen == [True]


def test_a_crash_between_send_and_mark_resends_once_never_loses(
    engine: Engine,
    clock: FixedClock,
    settings,  # type: ignore[no-untyped-def]
    smtp,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inbox, port = smtp
    settings.smtp_port = port
    _add(engine, clock.now())
    real_mark = mail._mark

    def crash(*a, **kw):  # type: ignore[no-untyped-def]
        raise RuntimeError("worker killed")

    monkeypatch.setattr(mail, "_mark", crash)
    assert str(run_once(engine, clock, settings, only={"outbox"})["outbox"]).startswith("error")
    assert len(inbox.messages) == 1
    monkeypatch.setattr(mail, "_mark", real_mark)
    # Still claimed: not resent at once...
    assert run_once(engine, clock, settings, only={"outbox"})["outbox"] == 0
    # ...but once the claim lapses, sent again (at most one duplicate; never lost).
    clock.set(clock.now() + mail.CLAIM + timedelta(seconds=1))
    assert run_once(engine, clock, settings, only={"outbox"})["outbox"] == 1
    assert len(inbox.messages) == 2
    assert run_once(engine, clock, settings, only={"outbox"})["outbox"] == 0


def test_throttle_rows_are_pruned_by_the_worker(
    engine: Engine,
    clock: FixedClock,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    from app.accounts.models import AuthFailure

    with Session(engine) as s:
        s.add(AuthFailure(key="login:old", at=clock.now() - timedelta(days=2)))
        s.add(AuthFailure(key="login:new", at=clock.now()))
        s.commit()
    result = run_once(engine, clock, settings, only={"throttle_prune"})
    assert result == {"throttle_prune": 1}
    with Session(engine) as s:
        assert [r.key for r in s.exec(select(AuthFailure)).all()] == ["login:new"]
