"""The ledger's contracts: double entry, holds exactly once, idempotency, never negative."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, func, select

from app.clock import FixedClock
from app.errors import Conflict, InvalidInput
from app.errors import InsufficientBalance as BaseInsufficient
from app.ledger import service as ledger
from app.ledger.models import DeclinedAttempt, Hold, JournalEntry
from app.ledger.service import HoldAlreadyResolved, IdempotencyConflict, InsufficientBalance
from app.reconcile import run_checks
from tests.support.factories import fund


@pytest.fixture
def customer(make_user: Callable[..., Any]) -> Any:
    return make_user()


def count(session: Session, model: Any) -> int:
    return int(session.exec(select(func.count()).select_from(model)).one())


def test_hold_reduces_available_then_posts_once(
    session: Session, customer: Any, clock: FixedClock
) -> None:
    now = clock.now()
    fund(session, customer.id, 10_000, now)
    hold = ledger.place_hold(
        session,
        user_id=customer.id,
        amount_cents=3_000,
        idempotency_key="k1",
        now=now,
        reason="order",
        order_id=7,
    )
    session.commit()
    assert ledger.balance_summary(session, customer.id) == (7_000, 3_000)
    e1 = ledger.post_hold(session, hold.id, now=now)
    session.commit()
    assert ledger.balance_summary(session, customer.id) == (7_000, 0)
    # Same intent again: the first entry, nothing moves.
    e2 = ledger.post_hold(session, hold.id, now=now + timedelta(seconds=5))
    assert e2.id == e1.id
    with pytest.raises(HoldAlreadyResolved):
        ledger.void_hold(session, hold.id, now=now, reason="too late")
    session.rollback()
    assert ledger.balance_summary(session, customer.id) == (7_000, 0)
    assert run_checks(session) == []


def test_void_returns_money(session: Session, customer: Any, clock: FixedClock) -> None:
    now = clock.now()
    fund(session, customer.id, 5_000, now)
    hold = ledger.place_hold(
        session,
        user_id=customer.id,
        amount_cents=5_000,
        idempotency_key="k",
        now=now,
        reason="order",
    )
    ledger.void_hold(session, hold.id, now=now, reason="promise missed")
    ledger.void_hold(session, hold.id, now=now, reason="promise missed")  # replay: no-op
    session.commit()
    assert ledger.balance_summary(session, customer.id) == (5_000, 0)
    with pytest.raises(HoldAlreadyResolved):
        ledger.post_hold(session, hold.id, now=now)
    session.rollback()
    lines = ledger.statement(session, customer.id, 10, 0)
    assert [ln.kind for ln in lines] == ["hold_void", "hold", "promotion"]
    assert [(ln.available_delta, ln.held_delta) for ln in lines] == [
        (5_000, -5_000),
        (-5_000, 5_000),
        (5_000, 0),
    ]
    assert run_checks(session) == []


def test_insufficient_is_recorded_and_key_stays_open(
    session: Session, customer: Any, clock: FixedClock
) -> None:
    now = clock.now()
    fund(session, customer.id, 1_000, now)
    with pytest.raises(InsufficientBalance) as ei:
        ledger.place_hold(
            session,
            user_id=customer.id,
            amount_cents=2_500,
            idempotency_key="pay-1",
            now=now,
            reason="order",
        )
    assert isinstance(ei.value, BaseInsufficient)
    assert ei.value.shortfall_cents == 1_500
    assert ei.value.params["shortfall_cents"] == 1_500
    session.commit()  # the checkout handles the error and commits: the attempt is kept
    assert count(session, DeclinedAttempt) == 1
    assert ledger.balance_summary(session, customer.id) == (1_000, 0)
    # After a top-up, the same key is a new attempt and succeeds; then it replays.
    fund(session, customer.id, 2_000, now, key="topup")
    h1 = ledger.place_hold(
        session,
        user_id=customer.id,
        amount_cents=2_500,
        idempotency_key="pay-1",
        now=now,
        reason="order",
    )
    h2 = ledger.place_hold(
        session,
        user_id=customer.id,
        amount_cents=2_500,
        idempotency_key="pay-1",
        now=now,
        reason="order",
    )
    assert h1.id == h2.id
    assert ledger.available_cents(session, customer.id) == 500
    with pytest.raises(IdempotencyConflict):
        ledger.place_hold(
            session,
            user_id=customer.id,
            amount_cents=2_400,
            idempotency_key="pay-1",
            now=now,
            reason="order",
        )
    with pytest.raises(IdempotencyConflict):
        ledger.charge(
            session,
            user_id=customer.id,
            amount_cents=2_500,
            idempotency_key="pay-1",
            now=now,
            reason="x",
        )
    session.commit()
    assert run_checks(session) == []


def test_charge_and_adjust(
    session: Session, customer: Any, make_user: Callable[..., Any], clock: FixedClock
) -> None:
    now = clock.now()
    ops = make_user(role="ops")
    fund(session, customer.id, 10_000, now)
    e = ledger.charge(
        session,
        user_id=customer.id,
        amount_cents=4_000,
        idempotency_key="renew-1",
        now=now,
        reason="renewal",
        order_id=3,
    )
    assert (
        ledger.charge(
            session,
            user_id=customer.id,
            amount_cents=4_000,
            idempotency_key="renew-1",
            now=now,
            reason="renewal",
            order_id=3,
        ).id
        == e.id
    )
    with pytest.raises(InsufficientBalance):
        ledger.charge(
            session,
            user_id=customer.id,
            amount_cents=6_001,
            idempotency_key="renew-2",
            now=now,
            reason="renewal",
        )
    ledger.adjust(
        session,
        user_id=customer.id,
        amount_cents=-1_000,
        reason="duplicate credit",
        actor=ops,
        now=now,
        idempotency_key="adj-1",
    )
    with pytest.raises(InsufficientBalance):
        ledger.adjust(
            session,
            user_id=customer.id,
            amount_cents=-5_001,
            reason="too much",
            actor=ops,
            now=now,
            idempotency_key="adj-2",
        )
    with pytest.raises(InvalidInput):
        ledger.adjust(
            session,
            user_id=customer.id,
            amount_cents=100,
            reason="  ",
            actor=ops,
            now=now,
            idempotency_key="adj-3",
        )
    session.commit()
    assert ledger.available_cents(session, customer.id) == 5_000
    from app.accounts.audit import AuditEvent

    assert (
        len(session.exec(select(AuditEvent).where(AuditEvent.action == "ledger.adjust")).all()) == 1
    )
    assert run_checks(session) == []


@pytest.mark.parametrize("amount", [0, -5, 10**13])
def test_bad_amounts_change_nothing(
    session: Session, customer: Any, clock: FixedClock, amount: int
) -> None:
    with pytest.raises(InvalidInput):
        ledger.place_hold(
            session,
            user_id=customer.id,
            amount_cents=amount,
            idempotency_key="x",
            now=clock.now(),
            reason="r",
        )
    session.rollback()
    assert count(session, JournalEntry) == 0


def test_topup_credit_once(session: Session, customer: Any, clock: FixedClock) -> None:
    now = clock.now()
    kw = dict(
        user_id=customer.id,
        amount_cents=1_234,
        invoice_id=99,
        now=now,
        crypto_amount=1,
        currency="BTC",
        rate="97000",
    )
    e1 = ledger.credit_topup(session, **kw)  # type: ignore[arg-type]
    e2 = ledger.credit_topup(session, **kw)  # type: ignore[arg-type]
    assert e1.id == e2.id
    with pytest.raises(Conflict):
        ledger.credit_topup(session, **{**kw, "amount_cents": 1_235})  # type: ignore[arg-type]
    session.commit()
    assert ledger.available_cents(session, customer.id) == 1_234


def test_database_refuses_negative_balance_and_double_resolution(
    session: Session, customer: Any, clock: FixedClock
) -> None:
    now = clock.now()
    fund(session, customer.id, 100, now)
    with pytest.raises(IntegrityError):
        session.exec(text("UPDATE ledger_accounts SET balance_cents = -1 WHERE kind = 'available'"))  # type: ignore[call-overload]
        session.flush()
    session.rollback()
    hold = ledger.place_hold(
        session, user_id=customer.id, amount_cents=100, idempotency_key="h", now=now, reason="r"
    )
    entry = ledger.post_hold(session, hold.id, now=now)
    session.commit()
    with pytest.raises(IntegrityError):
        session.add(
            JournalEntry(
                kind="hold_void", amount_cents=100, resolves_hold_id=hold.id, created_at=now
            )
        )
        session.flush()
    session.rollback()
    assert session.get(Hold, hold.id).resolve_entry_id == entry.id  # type: ignore[union-attr]


def test_checks_find_tampering(session: Session, customer: Any, clock: FixedClock) -> None:
    fund(session, customer.id, 500, clock.now())
    session.exec(text("UPDATE ledger_accounts SET balance_cents = 501 WHERE kind = 'available'"))  # type: ignore[call-overload]
    session.exec(text("UPDATE ledger_postings SET amount_cents = 499 WHERE amount_cents = 500"))  # type: ignore[call-overload]
    session.commit()
    names = {v.check for v in run_checks(session)}
    assert {"cached_balances", "zero_sum", "ledger_balanced"} <= names


def test_demo_seed_once_and_cli_check(
    session: Session, make_user: Callable[..., Any], clock: FixedClock, db_url: str
) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from app.ledger import seed

    demo = make_user(email=seed.DEMO_EMAIL)
    assert seed.seed(session, clock.now())
    assert seed.seed(session, clock.now()) == []  # once
    session.commit()
    assert ledger.available_cents(session, demo.id) == seed.DEMO_BALANCE_CENTS
    session.rollback()  # end the read transaction (SQLite: BEGIN IMMEDIATE holds the lock)
    root = Path(__file__).resolve().parents[2]
    ok = subprocess.run(
        [sys.executable, "-m", "app", "ledger", "check", "--database-url", db_url],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0 and "zero_sum" in ok.stdout and "all checks passed" in ok.stdout
    session.exec(
        text(
            "UPDATE ledger_accounts SET balance_cents = balance_cents + 1 WHERE kind = 'available'"
        )
    )  # type: ignore[call-overload]
    session.commit()
    bad = subprocess.run(
        [sys.executable, "-m", "app", "ledger", "check", "--database-url", db_url],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and "FAIL" in bad.stdout


def test_balance_and_statement_reads_what_the_two_reads_did(
    session: Session, customer: Any, make_user: Callable[..., Any], clock: FixedClock
) -> None:
    """The JSON balance's two plain reads answer exactly what ``balance_summary`` and
    ``statement`` answer: every page, holds placed, posted and voided, another customer's
    entries never mixed in, a customer with no accounts at all."""
    other = make_user()
    nobody = make_user()
    now = clock.now()
    fund(session, customer.id, 50_000, now)
    fund(session, other.id, 9_000, now)
    for i in range(5):
        hold = ledger.place_hold(
            session,
            user_id=customer.id,
            amount_cents=1_000 + i,
            idempotency_key=f"h{i}",
            now=now + timedelta(minutes=i),
            reason="order",
            order_id=i + 1,
        )
        if i % 2:
            ledger.post_hold(session, hold.id, now=now + timedelta(minutes=i, seconds=1))
        elif i == 2:
            ledger.void_hold(session, hold.id, now=now + timedelta(minutes=i), reason="cancel")
    session.commit()
    for user in (customer, other, nobody):
        for limit, offset in ((50, 0), (3, 0), (3, 3), (2, 7), (1, 100), (500, 0)):
            got = ledger.balance_and_statement(session, user.id, limit, offset)
            want = (
                *ledger.balance_summary(session, user.id),
                ledger.statement(session, user.id, limit, offset),
            )
            assert got == want, (user.id, limit, offset)
    assert len(ledger.balance_and_statement(session, customer.id)[2]) == 1 + 5 + 2 + 1


def test_an_amount_past_the_largest_states_the_limit(
    session: Session, customer: Any, make_user: Callable[..., Any], clock: FixedClock
) -> None:
    with pytest.raises(InvalidInput) as e:
        ledger.adjust(
            session,
            user_id=customer.id,
            amount_cents=ledger.MAX_CENTS + 1,
            reason="typo",
            actor=make_user(role="ops"),
            now=clock.now(),
            idempotency_key="adj-huge",
        )
    assert e.value.render_message(lambda s: s) == "Enter at most US$10,000,000,000.00."
    assert session.exec(select(func.count()).select_from(JournalEntry)).one() == 0
