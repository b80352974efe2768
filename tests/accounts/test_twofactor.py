"""Two-factor sign-in (TOTP + recovery codes). Codes are computed from the secret against
the wall clock, as a phone would; the app's clock is fixed at START and plays no part."""

from __future__ import annotations

import re
import time
from types import SimpleNamespace
from typing import Any

import pyotp
import pytest
from sqlmodel import Session, select

from app.accounts import login, policy, twofactor
from app.accounts.deps import get_staff_user
from app.accounts.models import RecoveryCode, User
from app.accounts.security import SESSION_COOKIE
from app.errors import Forbidden, InvalidInput
from tests.accounts.helpers import STRONG, reset_csrf, web_login


def _user(engine: Any, user_id: int) -> User:
    with Session(engine, expire_on_commit=False) as s:
        u = s.get(User, user_id)
        assert u is not None
        s.commit()
        return u


def code_at(secret: str, offset_steps: int = 0) -> str:
    return pyotp.TOTP(secret).at(time.time() + 30 * offset_steps)


def enrol(client: Any, engine: Any, user: User) -> tuple[str, list[str]]:
    assert client.post("/account/2fa/start").status_code == 303
    page = client.get("/account/2fa")
    assert page.status_code == 200 and "<svg" in page.text and 'id="totp-secret"' in page.text
    secret = _user(engine, user.id).totp_pending_secret  # type: ignore[arg-type]
    assert re.sub(r"\s", "", re.search(r'id="totp-secret">([^<]+)<', page.text).group(1)) == secret  # type: ignore[union-attr]
    assert _user(engine, user.id).totp_enabled_at is None  # type: ignore[arg-type]
    r = client.post(
        "/account/2fa/confirm", data={"code": "123456" if code_at(secret) != "123456" else "654321"}
    )
    assert r.status_code == 422 and _user(engine, user.id).totp_enabled_at is None  # type: ignore[arg-type]
    r = client.post("/account/2fa/confirm", data={"code": code_at(secret)})
    assert r.status_code == 200
    codes = re.findall(r"<code>([a-z2-9]{5}-[a-z2-9]{5})</code>", r.text)
    assert len(codes) == 10 and r.headers["cache-control"] == "no-store"
    assert _user(engine, user.id).totp_enabled_at is not None  # type: ignore[arg-type]
    return secret, codes


@pytest.fixture
def enrolled(client: Any, engine: Any, make_user: Any, login: Any) -> tuple[User, str, list[str]]:
    user = make_user(password=STRONG)
    login(client, user)
    secret, codes = enrol(client, engine, user)
    client.post("/logout")
    reset_csrf(client)
    client.cookies.clear()
    reset_csrf(client)
    return user, secret, codes


def test_password_alone_no_longer_signs_in(client: Any, engine: Any, enrolled: Any) -> None:
    user, secret, _codes = enrolled
    r = web_login(client, user.email, next="/balance")
    assert r.status_code == 303 and r.headers["location"].startswith("/login/2fa")
    assert SESSION_COOKIE not in client.cookies
    assert client.get("/account").status_code in (302, 303, 401)
    assert client.get("/login/2fa").status_code == 200
    r = client.post("/login/2fa", data={"code": "000000", "next": "/balance"})
    assert r.status_code == 422 and "not right" in r.text
    # The next step's code (drift allowed); the enrolment already used the current one.
    r = client.post("/login/2fa", data={"code": code_at(secret, 1), "next": "/balance"})
    assert r.status_code == 303 and r.headers["location"] == "/balance"
    assert SESSION_COOKIE in client.cookies
    reset_csrf(client)
    assert client.get("/account").status_code == 200


def test_a_code_works_once(client: Any, new_client: Any, engine: Any, enrolled: Any) -> None:
    user, secret, _codes = enrolled
    code = code_at(secret, 1)
    web_login(client, user.email)
    assert client.post("/login/2fa", data={"code": code}).status_code == 303
    other = new_client()
    web_login(other, user.email)
    r = other.post("/login/2fa", data={"code": code})
    assert r.status_code == 422  # replayed (e.g. shoulder-surfed) code


def test_recovery_code_signs_in_once(
    client: Any, new_client: Any, engine: Any, enrolled: Any
) -> None:
    user, _secret, codes = enrolled
    web_login(client, user.email)
    r = client.post("/login/2fa", data={"code": codes[0].upper().replace("-", " ")})
    assert r.status_code == 303
    other = new_client()
    web_login(other, user.email)
    assert other.post("/login/2fa", data={"code": codes[0]}).status_code == 422
    with Session(engine) as s:
        used = s.exec(select(RecoveryCode).where(RecoveryCode.user_id == user.id)).all()
        assert sum(1 for c in used if c.used_at) == 1 and all(len(c.code_hash) == 64 for c in used)
        assert all(c.code_hash not in codes for c in used)  # only hashes are stored


def test_wrong_codes_are_throttled(client: Any, enrolled: Any) -> None:
    user, secret, _codes = enrolled
    web_login(client, user.email)
    for _ in range(5):
        assert client.post("/login/2fa", data={"code": "000001"}).status_code == 422
    r = client.post("/login/2fa", data={"code": code_at(secret, 1)})
    assert r.status_code == 429  # even the right code waits now


def test_pending_sign_in_is_bound_to_password_and_signature(
    client: Any, engine: Any, enrolled: Any
) -> None:
    user, secret, _codes = enrolled
    web_login(client, user.email)
    client.cookies.clear()
    reset_csrf(client)
    client.cookies.set("login_2fa", "forged.value")
    r = client.post("/login/2fa", data={"code": code_at(secret, 1)})
    assert r.status_code == 303 and r.headers["location"].startswith("/login?")
    assert SESSION_COOKIE not in client.cookies
    # A password change between the two steps voids the pending sign-in.
    client.cookies.clear()
    reset_csrf(client)
    web_login(client, user.email)
    with Session(engine) as s:
        u = s.get(User, user.id)
        assert u is not None
        u.password_hash = u.password_hash + "x"
        s.add(u)
        s.commit()
    r = client.post("/login/2fa", data={"code": code_at(secret, 1)})
    assert r.status_code == 303 and r.headers["location"].startswith("/login?")


def test_inline_login_on_the_deploy_form_points_to_the_login_page(
    client: Any, enrolled: Any
) -> None:
    user, _secret, _codes = enrolled

    request = SimpleNamespace(
        state=SimpleNamespace(user=None, user_loaded=False), client=None, headers={}
    )
    with Session(client.app.state.engine) as s:
        with pytest.raises(InvalidInput) as e:
            login.signup_or_login(
                s,
                request,
                None,
                mode="login",
                email=user.email,
                password=STRONG,  # type: ignore[arg-type]
                now=client.app.state.clock.now(),
            )
        assert "two-factor" in str(getattr(e.value, "errors", {}))


def test_disable_needs_password_and_code(client: Any, engine: Any, enrolled: Any) -> None:
    user, secret, codes = enrolled
    web_login(client, user.email)
    client.post("/login/2fa", data={"code": codes[1]})
    reset_csrf(client)
    r = client.post(
        "/account/2fa/disable", data={"password": "wrong one", "code": code_at(secret, 1)}
    )
    assert r.status_code == 422 and _user(engine, user.id).totp_enabled_at is not None  # type: ignore[arg-type]
    r = client.post("/account/2fa/disable", data={"password": STRONG, "code": "999999"})
    assert r.status_code == 422 and _user(engine, user.id).totp_enabled_at is not None  # type: ignore[arg-type]
    r = client.post("/account/2fa/disable", data={"password": STRONG, "code": code_at(secret, 1)})
    assert r.status_code == 303
    u = _user(engine, user.id)  # type: ignore[arg-type]
    assert u.totp_enabled_at is None and u.totp_secret == ""
    client.post("/logout")
    reset_csrf(client)
    assert web_login(client, user.email).headers["location"] == "/account"  # password alone again


def test_new_recovery_codes_replace_the_old(client: Any, engine: Any, enrolled: Any) -> None:
    user, secret, codes = enrolled
    web_login(client, user.email)
    client.post("/login/2fa", data={"code": code_at(secret, 1)})
    reset_csrf(client)
    r = client.post("/account/2fa/recovery-codes", data={"code": codes[2]})
    assert r.status_code == 200
    fresh = re.findall(r"<code>([a-z2-9]{5}-[a-z2-9]{5})</code>", r.text)
    assert len(fresh) == 10 and not set(fresh) & set(codes)
    client.post("/logout")
    client.cookies.clear()
    reset_csrf(client)
    web_login(client, user.email)
    assert client.post("/login/2fa", data={"code": codes[3]}).status_code == 422
    assert client.post("/login/2fa", data={"code": fresh[0]}).status_code == 303


def _request() -> Any:
    return SimpleNamespace()


def test_staff_need_two_factor_in_production_only(make_user: Any) -> None:
    production = SimpleNamespace(staff_second_factor_required=True)
    development = SimpleNamespace(staff_second_factor_required=False)
    ops = make_user(role="ops")
    policy.admit(ops, second_factor_required=False)
    assert get_staff_user(_request(), ops) is ops and ops.is_ops
    policy.admit(ops, second_factor_required=True)
    assert not ops.is_staff and not ops.is_ops  # no staff powers anywhere, not only /staff
    with pytest.raises(Forbidden):
        get_staff_user(_request(), ops)
    ops.totp_enabled_at, ops.totp_secret = ops.created_at, "JBSWY3DPEHPK3PXP"
    policy.admit(ops, second_factor_required=True)
    assert get_staff_user(_request(), ops) is ops
    assert twofactor.required(ops, production) and not twofactor.required(ops, development)  # type: ignore[arg-type]


def test_matching_step_allows_one_step_of_drift_and_never_an_old_step() -> None:
    from datetime import UTC, datetime

    secret = pyotp.random_base32()
    at = datetime(2026, 12, 1, 9, 0, 15, tzinfo=UTC)
    step = int(at.timestamp()) // 30
    totp = pyotp.TOTP(secret)
    assert twofactor.matching_step(secret, totp.at(at), at, 0) == step
    assert twofactor.matching_step(secret, totp.at(step * 30 - 30), at, 0) == step - 1
    assert twofactor.matching_step(secret, totp.at(step * 30 - 60), at, 0) is None
    assert twofactor.matching_step(secret, totp.at(at), at, step) is None
    assert twofactor.matching_step(secret, "１２３４５６", at, 0) in (
        None,
        step,
    )  # full-width digits are digits
    assert twofactor.matching_step(secret, "12345", at, 0) is None
