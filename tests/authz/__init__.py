"""The authorization matrix: every route × {anonymous, customer A, customer B, sales, ops,
and an ops account without the second factor staff need} (the matrix requires it for staff,
as production does; sales and ops have it on).

Each domain keeps its entries in ``tests/authz/<domain>.py`` as ``RULES: list[Rule]``;
``test_matrix.py`` loads every such module, fails for any route of the app without a rule
(and for rules whose route no longer exists), then runs each rule for the five actors.
See README.md in this folder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fastapi import FastAPI
from sqlmodel import Session

from app.accounts.models import User


class Outcome:
    """What an actor must get. ``OK`` means "got past authorization": any status except
    401/403/404/405 and a redirect to /login (a 422 for an empty form is fine: the rule
    is about who may reach the handler, not about valid input)."""

    def __init__(self, name: str, check: Callable[[int, str], bool]) -> None:
        self.name = name
        self.check = check

    def __repr__(self) -> str:
        return self.name


def _to_login(status: int, location: str) -> bool:
    return status == 401 or (status in (302, 303, 307) and location.startswith("/login"))


OK = Outcome("OK", lambda s, loc: s not in (401, 403, 404, 405) and not _to_login(s, loc))
LOGIN = Outcome("LOGIN", _to_login)  # anonymous: 401 or a redirect to /login?next=…
FORBIDDEN = Outcome("FORBIDDEN", lambda s, loc: s == 403)
NOT_FOUND = Outcome("NOT_FOUND", lambda s, loc: s == 404)  # hidden: other people's objects


def status(code: int) -> Outcome:
    """An exact status, for routes whose answer does not depend on who asks."""
    return Outcome(str(code), lambda s, loc: s == code)


ACTORS = ("anon", "customer", "other_customer", "sales", "ops", "unenrolled_staff")


@dataclass
class Ctx:
    """Handed to ``setup``: make objects owned by ``a`` (customer A) and return the path
    parameters (and anything ``data`` needs). Commit what you create."""

    app: FastAPI
    session: Session
    now: datetime
    a: User  # customer A: owns what setup creates
    b: User  # customer B: must never see or change A's objects
    sales: User
    ops: User
    unenrolled_staff: User | None = None  # role ops, no second factor: no staff powers
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rule:
    method: str
    path: str  # the route's path template, exactly as in the route table
    anon: Outcome
    customer: Outcome  # customer A (the owner)
    sales: Outcome
    ops: Outcome
    other_customer: Outcome | None = None  # customer B; defaults to ``customer``
    # An ops account without its second factor has no staff powers: a signed-in stranger to
    # A's objects, so it defaults to customer B's outcome.
    unenrolled_staff: Outcome | None = None
    setup: Callable[[Ctx], dict[str, Any]] | None = None
    data: dict[str, Any] | Callable[[Ctx, dict[str, Any]], dict[str, Any]] | None = None
    json: Any = None
    headers: dict[str, str] | None = None
    note: str = ""

    def expected(self, actor: str) -> Outcome:
        if actor == "other_customer":
            return self.other_customer or self.customer
        if actor == "unenrolled_staff":
            return self.unenrolled_staff or self.other_customer or self.customer
        return getattr(self, actor)  # type: ignore[no-any-return]


def public(method: str, path: str, **kw: Any) -> Rule:
    return Rule(method, path, anon=OK, customer=OK, sales=OK, ops=OK, **kw)


def customer_only(method: str, path: str, **kw: Any) -> Rule:
    """Any signed-in user reaches it (it acts on the caller's own things)."""
    return Rule(method, path, anon=LOGIN, customer=OK, sales=OK, ops=OK, **kw)


def owned(
    method: str,
    path: str,
    setup: Callable[[Ctx], dict[str, Any]],
    *,
    staff: Outcome = NOT_FOUND,
    **kw: Any,
) -> Rule:
    """A's object: A gets through, B gets 404 (no hint it exists), staff as given."""
    return Rule(
        method,
        path,
        anon=LOGIN,
        customer=OK,
        other_customer=NOT_FOUND,
        sales=staff,
        ops=staff,
        setup=setup,
        **kw,
    )


def staff_only(method: str, path: str, **kw: Any) -> Rule:
    return Rule(method, path, anon=LOGIN, customer=FORBIDDEN, sales=OK, ops=OK, **kw)


def ops_only(method: str, path: str, **kw: Any) -> Rule:
    return Rule(method, path, anon=LOGIN, customer=FORBIDDEN, sales=FORBIDDEN, ops=OK, **kw)
