"""Who is asking: ``OptionalUser``, ``CurrentUser``, ``StaffUser``, ``OpsUser``, ``SalesUser``;
with the request, its session and its time as one ``Call``: ``UserCall``, ``StaffCall``,
``SalesCall``, ``OpsCall``.

Browsers authenticate with the signed session cookie (server-side session row, so logout
and revocation work across processes); API clients with ``Authorization: Bearer`` — on
``/api/`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlmodel import Session

from app.accounts import policy
from app.accounts.audit import client_ip
from app.accounts.models import Role, User
from app.accounts.security import SESSION_COOKIE, session_from_cookie, user_for_api_token
from app.db import reader
from app.errors import N_, Forbidden, NotAuthenticated
from app.web.deps import NowDep, SessionDep


def _resolve(request: Request, db: Session) -> User | None:
    now = request.app.state.clock.now()
    auth = request.headers.get("authorization", "")
    # API tokens authenticate the JSON API only: on pages a token is no credential at all
    # (pages need the session cookie and a CSRF token).
    if auth.lower().startswith("bearer ") and request.url.path.startswith("/api/"):
        user = user_for_api_token(db, auth[7:].strip(), now)
        if user is None:
            raise NotAuthenticated(N_("The API token is invalid or revoked."))
        request.state.auth_method = "token"
        return policy.admit(user, second_factor_required=_second_factor_required(request))
    row = session_from_cookie(
        db, request.cookies.get(SESSION_COOKIE), now, request.app.state.settings.secret_key
    )
    if row is None:
        return None
    user = db.get(User, row.user_id)
    if user is None or not user.is_active:
        return None
    request.state.session_row_id = row.id
    request.state.auth_method = "cookie"
    return policy.admit(user, second_factor_required=_second_factor_required(request))


def _second_factor_required(request: Request) -> bool:
    return bool(request.app.state.settings.staff_second_factor_required)


def get_optional_user(request: Request, db: SessionDep) -> User | None:
    if getattr(request.state, "user_loaded", False):
        return request.state.user  # type: ignore[no-any-return]
    user = _resolve(request, db)
    request.state.user = user
    request.state.user_loaded = True
    return user


def load_user(request: Request) -> User | None:
    """For templates rendered where no dependency resolved the user (error pages)."""
    if getattr(request.state, "user_loaded", False):
        return request.state.user  # type: ignore[no-any-return]
    current: Session | None = getattr(request.state, "db", None)
    try:
        if current is not None and current.in_transaction():
            # Inside the request's own transaction: a second session would wait on the
            # write lock this one holds (SQLite BEGIN IMMEDIATE).
            user = _resolve(request, current)
        else:
            with Session(reader(request.app.state.engine), expire_on_commit=False) as db:
                user = _resolve(request, db)
                db.commit()
    except Exception:  # noqa: BLE001 - an error page must render even if this fails
        user = None
    request.state.user = user
    request.state.user_loaded = True
    return user


def get_current_user(request: Request, db: SessionDep) -> User:
    # resolves the user itself (not through a get_optional_user dependency): one thread-pool
    # hop per request fewer; get_optional_user's per-request memo is shared all the same
    user = get_optional_user(request, db)
    if user is None:
        raise NotAuthenticated()
    return user


def get_staff_user(request: Request, user: Annotated[User, Depends(get_current_user)]) -> User:
    if user.is_staff:  # the policy's answer: a staff role with its second factor if required
        return user
    if policy.staff_role(user):
        # Staff can move money and hand over machines: without the required second factor
        # the account has no staff powers anywhere (app/accounts/policy.py).
        raise Forbidden(
            N_(
                "Staff pages need two-factor sign-in. Ask operations for an enrolment link, "
                "open it while signed in, then come back."
            )
        )
    raise Forbidden(N_("This area is for staff."))


def get_ops_user(user: Annotated[User, Depends(get_staff_user)]) -> User:
    if user.role != Role.ops.value:
        raise Forbidden(N_("Only operations staff can do this."))
    return user


def get_sales_user(user: Annotated[User, Depends(get_staff_user)]) -> User:
    # Ops can do everything sales can (approvals need ops anyway).
    return user


OptionalUser = Annotated[User | None, Depends(get_optional_user)]
CurrentUser = Annotated[User, Depends(get_current_user)]
StaffUser = Annotated[User, Depends(get_staff_user)]
OpsUser = Annotated[User, Depends(get_ops_user)]
SalesUser = Annotated[User, Depends(get_sales_user)]


@dataclass(frozen=True)
class Call:
    """A signed-in request as one value: the request, its database session, who asks and
    the request's time. Handlers take it by role: ``UserCall`` (any signed-in user),
    ``StaffCall``, ``SalesCall`` or ``OpsCall`` (the same checks as the users above)."""

    request: Request
    db: Session
    user: User
    now: datetime

    @property
    def ip(self) -> str:
        return client_ip(self.request)

    @property
    def session_id(self) -> int | None:
        """The id of the session row this request came in on (None with an API token)."""
        return getattr(self.request.state, "session_row_id", None)

    def run(self, action: Callable[..., object], **args: Any) -> None:
        """``action`` done by this request's user: who acts, over which session, when and
        from where are the request's; ``args`` are the rest ``action`` takes."""
        action(self.db, actor=self.user, now=self.now, ip=self.ip, **args)


# Each ``def`` dependency is a worker-thread call of its own: a ``Call`` resolves its user
# by calling the user dependencies above as functions (as ``get_current_user`` does
# ``get_optional_user``), in their order and with their refusals, in one thread call.
def get_user_call(request: Request, db: SessionDep, now: NowDep) -> Call:
    return Call(request, db, get_current_user(request, db), now)


def get_staff_call(request: Request, db: SessionDep, now: NowDep) -> Call:
    return Call(request, db, get_staff_user(request, get_current_user(request, db)), now)


def get_sales_call(request: Request, db: SessionDep, now: NowDep) -> Call:
    staff = get_staff_user(request, get_current_user(request, db))
    return Call(request, db, get_sales_user(staff), now)


def get_ops_call(request: Request, db: SessionDep, now: NowDep) -> Call:
    staff = get_staff_user(request, get_current_user(request, db))
    return Call(request, db, get_ops_user(staff), now)


UserCall = Annotated[Call, Depends(get_user_call)]
StaffCall = Annotated[Call, Depends(get_staff_call)]
SalesCall = Annotated[Call, Depends(get_sales_call)]
OpsCall = Annotated[Call, Depends(get_ops_call)]
