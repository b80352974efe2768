"""``python -m app users create --role ops --email x@y [--password …|--password-stdin]``,
``python -m app users disable|enable --email x@y`` and
``python -m app users enrol-link --email x@y`` (a staff account's one-time link to turn on
two-factor sign-in: give it to the person over a channel other than their email)."""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlmodel import Session, select

from app.accounts.emails import looks_like_email
from app.accounts.models import Role, User

if TYPE_CHECKING:
    from app.clock import Clock
    from app.settings import Settings

ROLES = [r.value for r in Role]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    users = subparsers.add_parser("users", help="create staff/customer accounts, disable them")
    sub = users.add_subparsers(dest="action", required=True)
    create = sub.add_parser(
        "create",
        help="create an account (staff accounts are created only this way)",
        description="Create an account. Without --password the password is asked for on a "
        "terminal, or read from stdin with --password-stdin (keeps it out of shell history).",
    )
    create.add_argument("--email", required=True)
    create.add_argument("--role", required=True, help="one of: " + ", ".join(ROLES))
    create.add_argument("--password", default=None, help="avoid: visible in shell history")
    create.add_argument(
        "--password-stdin", action="store_true", help="read the password from stdin"
    )
    create.set_defaults(func=cmd_create)
    link = sub.add_parser(
        "enrol-link",
        help="print a one-time link with which a staff account turns on two-factor sign-in",
        description="Staff accounts without two-factor sign-in have no staff powers in "
        "production and can turn it on only with this link (valid 72 hours; a newer link "
        "voids older ones). Hand it over in person or over a channel you trust.",
    )
    link.add_argument("--email", required=True)
    link.set_defaults(func=cmd_enrol_link)
    for name, active in (("disable", False), ("enable", True)):
        p = sub.add_parser(name, help=f"{name} an account (disabling signs it out everywhere)")
        p.add_argument("--email", required=True)
        p.set_defaults(func=cmd_set_active, active=active)


def _password(args: argparse.Namespace) -> str | None:
    if args.password is not None:
        return str(args.password)
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\n")
    if sys.stdin.isatty():
        first = getpass.getpass("Password: ")
        second = getpass.getpass("Repeat password: ")
        if first != second:
            print("error: the passwords do not match", file=sys.stderr)
            return None
        return first
    print("error: no password given; use --password-stdin or run on a terminal", file=sys.stderr)
    return None


@contextmanager
def _transaction() -> Iterator[tuple[Settings, Session, Clock]]:
    """The settings, one transaction on their database and the app's clock (simulated when
    the settings say so); the engine is disposed afterwards."""
    from app.clock import SimulatedClock, SystemClock
    from app.db import make_engine, transaction
    from app.settings import Settings
    from app.tables import import_models

    import_models()
    settings = Settings()
    engine = make_engine(settings.database_url)
    clock = SimulatedClock(engine) if settings.simulation else SystemClock()
    try:
        with transaction(engine) as session:
            yield settings, session, clock
    finally:
        engine.dispose()


def _account(session: Session, email: str, *, active: bool = False) -> User | None:
    """The account with ``email`` (only an active one if ``active``); None, said on stderr,
    when there is none."""
    email = looks_like_email(email) or email
    user = session.exec(select(User).where(User.email == email)).first()
    if user is None or (active and not user.is_active):
        print(f"error: no {'active ' if active else ''}account with email {email}", file=sys.stderr)
        return None
    return user


def cmd_create(args: argparse.Namespace) -> int:
    from app.accounts import service
    from app.errors import DomainError

    if args.role not in ROLES:
        print(
            f"error: unknown role {args.role!r}; choose one of: {', '.join(ROLES)}", file=sys.stderr
        )
        return 2
    password = _password(args)
    if password is None:
        return 2
    try:
        with _transaction() as (_settings, session, clock):
            user = service.register(
                session, email=args.email, password=password, now=clock.now(), role=args.role
            )
            service.audit(
                session,
                "user.created_by_cli",
                clock.now(),
                actor=None,
                target=f"user:{user.id}",
                role=args.role,
                email=user.email,
            )
            email, uid = user.email, user.id
    except DomainError as e:
        errors = getattr(e, "errors", None) or {"": e.message}
        for field, message in errors.items():
            print(f"error: {field + ': ' if field else ''}{message}", file=sys.stderr)
        return 1
    print(f"created {args.role} account {email} (id {uid})")
    return 0


def cmd_set_active(args: argparse.Namespace) -> int:
    from app.accounts.service import switch_active

    with _transaction() as (_settings, session, clock):
        user = _account(session, args.email)
        if user is None:
            return 1
        switch_active(session, user, bool(args.active), clock.now(), via="cli")
        email = user.email
    print(f"{email} {'enabled' if args.active else 'disabled'}")
    return 0


def cmd_enrol_link(args: argparse.Namespace) -> int:
    from app.accounts import twofactor
    from app.accounts.service import audit

    with _transaction() as (settings, session, clock):
        user = _account(session, args.email, active=True)
        if user is None:
            return 1
        if twofactor.enabled(user):
            print(f"error: {user.email} already has two-factor sign-in on", file=sys.stderr)
            return 1
        token = twofactor.new_enrolment_link(session, user, settings.secret_key)
        audit(session, "account.2fa.enrol_link", clock.now(), target=f"user:{user.id}", via="cli")
    print(settings.base_url.rstrip("/") + "/account/2fa/enrol/" + token)
    return 0
