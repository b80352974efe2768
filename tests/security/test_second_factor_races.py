"""A second-factor code works once under any concurrency; every throttle counts an attempt
before it checks it (so parallel guesses cannot all slip past the limit); turning two-factor
off is throttled and shares the password-change limit.

Each test runs on SQLite and, with ``TEST_DATABASE_URL``, on PostgreSQL — where the
parallel requests really overlap (SQLite serialises writing transactions).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pyotp
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.accounts import service, twofactor
from app.accounts.models import RecoveryCode, User
from app.clock import FixedClock
from app.errors import DomainError, InvalidInput, TooManyRequests
from app.notifications.models import OutboxEmail
from tests.accounts.helpers import STRONG

WALL = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)


def _parallel(n: int, fn: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(n)

    def run(i: int) -> Any:
        barrier.wait()
        try:
            return fn(i)
        except DomainError as e:
            return e

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


def _width(engine: Engine) -> int:
    return 8 if engine.dialect.name == "postgresql" else 6


def _enrolled(
    engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> tuple[int, str, list[str]]:
    user = make_user(password=STRONG)
    with Session(engine) as s:
        u = s.get(User, user.id)
        assert u is not None
        secret = twofactor.start_enrolment(s, u)
        code = pyotp.TOTP(secret).at(WALL)
        codes = twofactor.confirm_enrolment(s, u, code, now=clock.now(), wall=WALL)
        s.commit()
    assert user.id is not None
    return user.id, secret, codes


def _check(engine: Engine, clock: FixedClock, user_id: int, code: str, wall: datetime) -> str:
    """One request's worth: its own session and transaction."""
    with Session(engine) as s:
        u = s.get(User, user_id)
        assert u is not None
        try:
            how = twofactor.check(s, u, code, now=clock.now(), wall=wall)
        except DomainError:
            s.commit()  # as the pages do: the form is shown again and the request commits
            raise
        s.commit()
        return how


def test_one_authenticator_code_opens_one_sign_in_in_parallel(
    engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    user_id, secret, _codes = _enrolled(engine, clock, make_user)
    later = WALL + timedelta(seconds=30)
    code = pyotp.TOTP(secret).at(later)
    results = _parallel(_width(engine), lambda i: _check(engine, clock, user_id, code, later))
    assert results.count("totp") == 1, results
    assert all(isinstance(r, (InvalidInput, TooManyRequests)) for r in results if r != "totp")
    # and the step is spent for good (refused, or throttled by the losers' failures)
    with pytest.raises((InvalidInput, TooManyRequests)):
        _check(engine, clock, user_id, code, later)


def test_one_recovery_code_opens_one_sign_in_in_parallel(
    engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    user_id, _secret, codes = _enrolled(engine, clock, make_user)
    results = _parallel(_width(engine), lambda i: _check(engine, clock, user_id, codes[0], WALL))
    assert results.count("recovery") == 1, results
    with Session(engine) as s:
        used = s.exec(select(RecoveryCode).where(RecoveryCode.user_id == user_id)).all()
        assert sum(1 for r in used if r.used_at is not None) == 1


def test_parallel_wrong_codes_are_checked_at_most_five_times(
    engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    user_id, _secret, _codes = _enrolled(engine, clock, make_user)
    n = 9 if engine.dialect.name == "postgresql" else 8
    results = _parallel(n, lambda i: _check(engine, clock, user_id, f"{i:06d}", WALL))
    checked = [r for r in results if isinstance(r, InvalidInput)]
    throttled = [r for r in results if isinstance(r, TooManyRequests)]
    assert len(checked) <= 5 and len(checked) + len(throttled) == n, results


def test_parallel_wrong_current_passwords_are_checked_at_most_five_times(
    engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    user = make_user(password=STRONG)

    def change(i: int) -> Any:
        with Session(engine) as s:
            u = s.get(User, user.id)
            assert u is not None
            try:
                service.change_password(
                    s,
                    u,
                    current_password=f"wrong guess {i}",
                    new_password="a new long passphrase",
                    now=clock.now(),
                )
            except DomainError:
                s.commit()  # as the page does
                raise
            s.commit()

    n = 9 if engine.dialect.name == "postgresql" else 8
    results = _parallel(n, change)
    checked = [r for r in results if isinstance(r, InvalidInput)]
    assert len(checked) <= 5 and all(isinstance(r, DomainError) for r in results), results


def _disable(engine: Engine, clock: FixedClock, user_id: int, password: str, code: str) -> None:
    with Session(engine) as s:
        u = s.get(User, user_id)
        assert u is not None
        try:
            twofactor.disable(s, u, password=password, code=code, now=clock.now(), wall=WALL)
        except DomainError:
            s.commit()  # as the pages do: the form is shown again and the request commits
            raise
        s.commit()


def test_turning_two_factor_off_is_throttled(
    engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    user_id, _secret, codes = _enrolled(engine, clock, make_user)
    for i in range(5):
        with pytest.raises(InvalidInput):
            _disable(engine, clock, user_id, f"wrong guess {i}", codes[0])
    # the sixth guess is not checked, even with the right password
    with pytest.raises(TooManyRequests):
        _disable(engine, clock, user_id, STRONG, codes[0])
    with Session(engine) as s:
        u = s.get(User, user_id)
        assert u is not None and twofactor.enabled(u)


def test_two_factor_off_is_no_password_oracle_once_password_changes_are_throttled(
    engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    user_id, _secret, codes = _enrolled(engine, clock, make_user)
    for i in range(5):
        with Session(engine) as s:
            u = s.get(User, user_id)
            assert u is not None
            with pytest.raises(InvalidInput):
                service.change_password(
                    s,
                    u,
                    current_password=f"wrong {i}",
                    new_password="a new long passphrase",
                    now=clock.now(),
                )
            s.rollback()
    with pytest.raises(TooManyRequests):
        _disable(engine, clock, user_id, "yet another guess", codes[0])


def test_parallel_reset_requests_send_at_most_three_emails(
    engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    make_user(email="ann@example.com", password=STRONG)

    def ask(i: int) -> Any:
        with Session(engine) as s:
            service.request_password_reset(
                s,
                email="ann@example.com",
                base_url="https://example.com",
                now=clock.now(),
                ip="198.51.100.7",
            )
            s.commit()

    _parallel(9 if engine.dialect.name == "postgresql" else 6, ask)
    with Session(engine) as s:
        sent = s.exec(select(OutboxEmail).where(OutboxEmail.to_addr == "ann@example.com")).all()
    assert len(sent) <= 3
