"""Who may see or do what: the one place that decides an actor's powers.

A user's role says what they are hired to do; this module decides what they *can* do in a
request, and every check asks it — the staff dependencies (``StaffUser``, ``OpsUser``,
``SalesUser``), and every "the owner or staff" test in the domains, which read
``User.is_staff`` / ``is_ops`` (those properties answer from here).

The rules:

* **Staff keep staff powers only with a second factor** when the deployment requires it
  (production always; elsewhere ``APP_STAFF_SECOND_FACTOR=true``). Without one, a sales or
  ops account is treated as a customer on every route — other customers' receipts,
  invoices and quotes are 404, simulation controls and staff pages are 403 — whether it
  signed in with a cookie or an API token.
* **Such a staff account enrols its second factor only through a one-time enrolment link**
  made by ops on the server (``python -m app users enrol-link --email …``), so a phished
  staff password alone can neither reach staff powers nor enrol the phisher's own
  authenticator (``twofactor.enrolment_needs_link``).
* Customers see and change only their own things: each domain reads a customer's objects
  for the signed-in user (e.g. ``orders.get_order_for``), and 404s anyone else's.

Framework-free: the web layer calls :func:`admit` once per request when it resolves the
user (``app.accounts.deps``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import inspect

if TYPE_CHECKING:  # the models import this module for their role properties
    from app.accounts.models import User

STAFF_ROLE_NAMES = ("sales", "ops")
_WITHHELD = "staff_powers_withheld"


def has_second_factor(user: User) -> bool:
    return user.totp_enabled_at is not None and bool(user.totp_secret)


def staff_role(user: User) -> bool:
    """The user's role is a staff role (what they would be allowed with a second factor)."""
    return user.role in STAFF_ROLE_NAMES


def admit(user: User, *, second_factor_required: bool) -> User:
    """Decide this request's powers for ``user`` (kept on the loaded object: every later
    check in the request, through any query that returns this row, sees the same answer)."""
    withheld = second_factor_required and staff_role(user) and not has_second_factor(user)
    inspect(user).info[_WITHHELD] = withheld
    return user


def staff_powers_withheld(user: User) -> bool:
    """A staff account acting without its staff powers in this request (no second factor)."""
    return bool(inspect(user).info.get(_WITHHELD, False))


def acts_as(user: User, *roles: str) -> bool:
    """The user has one of ``roles`` *and* may use it now."""
    return user.role in roles and not (
        user.role in STAFF_ROLE_NAMES and staff_powers_withheld(user)
    )
