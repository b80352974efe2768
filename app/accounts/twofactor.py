"""Two-factor sign-in: TOTP (RFC 6238, 30-second steps, 6 digits) with recovery codes.

- Optional for customers; required for staff when ``APP_ENVIRONMENT=production`` (staff
  pages answer 403 with a link to turn it on until they do). Development keeps the demo
  logins working without it.
- Codes are checked against the **wall clock** (``app.clock.wall_now``), never the
  simulated clock: the customer's phone knows nothing of our simulation.
- A code is accepted for the current step and one step either side (clock drift), and
  never twice, even by parallel requests: the last accepted step is stored by a
  conditional ``UPDATE … WHERE totp_last_step < :step`` (one request wins the row; the
  others see the new step and are refused).
- Ten recovery codes are shown once when two-factor is turned on (or regenerated); only
  their SHA-256 is stored; each works once (``UPDATE … WHERE used_at IS NULL``).
- Codes are throttled per account like passwords (5 wrong in 15 minutes), each attempt
  counted before it is checked (``throttle.attempt``). Turning two-factor off also needs
  the password, which shares the password-change limit (no second password oracle).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import unicodedata
from datetime import datetime

import pyotp
import segno
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy import update
from sqlmodel import Session, col, select

from app.accounts import policy, throttle
from app.accounts.models import RecoveryCode, User
from app.accounts.security import verify_password
from app.errors import N_, InvalidInput, TooManyRequests
from app.settings import Settings

ISSUER = "GPU Nodes"
STEP_SECONDS = 30
DIGITS = 6
DRIFT_STEPS = 1
RECOVERY_CODES = 10
SECOND_FACTOR = throttle.Limit("second-factor-user", 5, throttle.LOGIN_ACCOUNT.window)
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i look-alikes


class SecondFactorThrottled(TooManyRequests):
    code = "second_factor_throttled"
    default_message = N_("Too many wrong codes. Wait 15 minutes and try again.")


def enabled(user: User) -> bool:
    return user.totp_enabled_at is not None and bool(user.totp_secret)


def required(user: User, settings: Settings) -> bool:
    """Staff must use two-factor sign-in in production (or where the settings say so)."""
    return settings.staff_second_factor_required and policy.staff_role(user)


def enrolment_needs_link(user: User, settings: Settings) -> bool:
    """A staff account that must have a second factor and has none enrols only through a
    one-time link made by ops on the server (:func:`enrolment_link_token`): its password
    alone (perhaps phished) must not be enough to bind an authenticator to it."""
    return required(user, settings) and not enabled(user)


def provisioning_uri(secret: str, email: str) -> str:
    return pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS).provisioning_uri(
        name=email, issuer_name=ISSUER
    )


def qr_svg(uri: str) -> str:
    """The otpauth:// URI as an inline SVG QR code (no script, no external request)."""
    return str(segno.make(uri, error="m").svg_inline(scale=4, dark="#111", light="#fff"))


def _clean_code(code: str) -> str:
    return "".join(unicodedata.normalize("NFKC", code).split()).replace("-", "").lower()


def matching_step(secret: str, code: str, at: datetime, last_step: int) -> int | None:
    """The time step ``code`` belongs to (within the drift window, newer than ``last_step``)."""
    cleaned = _clean_code(code)
    if len(cleaned) != DIGITS or not cleaned.isascii() or not cleaned.isdigit():
        return None
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS)
    now_step = int(at.timestamp()) // STEP_SECONDS
    for step in range(now_step - DRIFT_STEPS, now_step + DRIFT_STEPS + 1):
        if step <= last_step:
            continue
        if hmac.compare_digest(totp.at(step * STEP_SECONDS), cleaned):
            return step
    return None


def _hash(code: str) -> str:
    return hashlib.sha256(_clean_code(code).encode()).hexdigest()


def _new_recovery_codes(session: Session, user: User, now: datetime) -> list[str]:
    for old in session.exec(select(RecoveryCode).where(RecoveryCode.user_id == user.id)).all():
        session.delete(old)
    session.flush()
    codes = []
    for _ in range(RECOVERY_CODES):
        raw = "".join(secrets.choice(_ALPHABET) for _ in range(10))
        code = f"{raw[:5]}-{raw[5:]}"
        codes.append(code)
        session.add(RecoveryCode(user_id=user.id or 0, code_hash=_hash(code), created_at=now))
    session.flush()
    return codes


ENROL_LINK_MAX_AGE = 72 * 3600  # seconds an enrolment link made by ops stays valid


def _secret_tag(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


def new_enrolment_link(session: Session, user: User, secret_key: str) -> str:
    """A one-time enrolment token for ``user`` (``/account/2fa/enrol/<token>``): bound to a
    fresh pending secret, so a newer link voids older ones and enrolling spends it."""
    user.totp_pending_secret = pyotp.random_base32(length=32)
    session.add(user)
    session.flush()
    data = {"u": user.id, "s": _secret_tag(user.totp_pending_secret)}
    return URLSafeTimedSerializer(secret_key, salt="2fa-enrol").dumps(data)


def enrolment_link_valid(user: User, token: str, secret_key: str) -> bool:
    """``token`` is a live enrolment link for ``user`` (signed, not expired, not spent)."""
    try:
        data = URLSafeTimedSerializer(secret_key, salt="2fa-enrol").loads(
            token, max_age=ENROL_LINK_MAX_AGE
        )
    except BadSignature:
        return False
    if not isinstance(data, dict) or not user.totp_pending_secret or enabled(user):
        return False
    return data.get("u") == user.id and hmac.compare_digest(
        str(data.get("s", "")), _secret_tag(user.totp_pending_secret)
    )


def start_enrolment(session: Session, user: User) -> str:
    """A new secret to scan; two-factor is on only once a code from it is confirmed."""
    if not user.totp_pending_secret:
        user.totp_pending_secret = pyotp.random_base32(length=32)
        session.add(user)
        session.flush()
    return user.totp_pending_secret


def confirm_enrolment(
    session: Session, user: User, code: str, *, now: datetime, wall: datetime
) -> list[str]:
    """Turn two-factor on with the first code from the app; returns the recovery codes."""
    if not user.totp_pending_secret:
        raise InvalidInput(N_("Start again: scan the new code first."), field="code")
    step = matching_step(user.totp_pending_secret, code, wall, 0)
    if step is None:
        raise InvalidInput(
            N_(
                "That code does not match. Check the time on your phone and enter the current code."
            ),
            field="code",
        )
    user.totp_secret = user.totp_pending_secret
    user.totp_pending_secret = ""
    user.totp_enabled_at = now
    user.totp_last_step = step
    session.add(user)
    return _new_recovery_codes(session, user, now)


def check(session: Session, user: User, code: str, *, now: datetime, wall: datetime) -> str:
    """The second step of a sign-in (or a confirmation of a sensitive change): a current TOTP
    code or an unused recovery code. Returns "totp" or "recovery"; raises ``InvalidInput``
    (wrong) or ``SecondFactorThrottled``. Failures count even if the caller rolls back."""
    tried = throttle.attempt(session, [(SECOND_FACTOR, str(user.id))], now)
    if tried is None:
        raise SecondFactorThrottled()
    how = _use_code(session, user, code, now=now, wall=wall)
    if how is None:
        raise InvalidInput(N_("That code is not right (or was already used)."), field="code")
    tried.succeeded()
    return how


def _use_code(
    session: Session, user: User, code: str, *, now: datetime, wall: datetime
) -> str | None:
    """Spend ``code`` if it is right and unused: each write is conditional, so of parallel
    requests with one code exactly one changes the row and the others find it spent."""
    if not enabled(user):
        return None
    step = matching_step(user.totp_secret, code, wall, user.totp_last_step)
    if step is not None:
        won = session.execute(
            update(User)
            .where(col(User.id) == user.id, col(User.totp_last_step) < step)
            .values(totp_last_step=step)
        )
        return "totp" if won.rowcount == 1 else None  # type: ignore[attr-defined]
    if len(_clean_code(code)) == 10:
        won = session.execute(
            update(RecoveryCode)
            .where(
                col(RecoveryCode.user_id) == user.id,
                col(RecoveryCode.code_hash) == _hash(code),
                col(RecoveryCode.used_at).is_(None),
            )
            .values(used_at=now)
        )
        return "recovery" if won.rowcount == 1 else None  # type: ignore[attr-defined]
    return None


def remaining_recovery_codes(session: Session, user: User) -> int:
    return len(
        session.exec(
            select(RecoveryCode.id).where(
                RecoveryCode.user_id == user.id, col(RecoveryCode.used_at).is_(None)
            )
        ).all()
    )


def regenerate_recovery_codes(
    session: Session, user: User, code: str, *, now: datetime, wall: datetime
) -> list[str]:
    check(session, user, code, now=now, wall=wall)
    return _new_recovery_codes(session, user, now)


def disable(
    session: Session, user: User, *, password: str, code: str, now: datetime, wall: datetime
) -> None:
    """Turn two-factor off: needs the password and a current code (or a recovery code).
    The password check counts against the password-change limit (5 wrong in 15 minutes)."""
    tried = throttle.attempt(session, [(throttle.PASSWORD_CHECK_USER, str(user.id))], now)
    if tried is None:
        raise SecondFactorThrottled(N_("Too many attempts. Wait 15 minutes and try again."))
    if not verify_password(user.password_hash, password[:1024]):
        raise InvalidInput(N_("Your password is not right."), field="password")
    tried.succeeded()
    check(session, user, code, now=now, wall=wall)
    user.totp_secret = ""
    user.totp_pending_secret = ""
    user.totp_enabled_at = None
    user.totp_last_step = 0
    session.add(user)
    for old in session.exec(select(RecoveryCode).where(RecoveryCode.user_id == user.id)).all():
        session.delete(old)
    session.flush()
