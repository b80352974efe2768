"""Demo data, seeded once: the catalog, a demo customer with a balance, sales and ops.

Each domain may contribute ``app/<domain>/seed.py`` with ``seed(session, now) -> list[str]``
(idempotent). The printed lines are shown by ``make run`` on first start.
"""

from __future__ import annotations

import importlib
from datetime import datetime

from sqlmodel import Session, select

from app.accounts.models import Role, User
from app.accounts.security import hash_password
from app.db import make_engine, transaction
from app.settings import Settings

DEMO_ACCOUNTS = (
    ("customer@demo.test", "demo-customer-2026", Role.customer),
    ("sales@demo.test", "demo-sales-2026", Role.sales),
    ("ops@demo.test", "demo-ops-2026", Role.ops),
)
SEED_MODULES = ("app.catalog.seed", "app.ledger.seed", "app.orders.seed", "app.quotes.seed")


def ensure_user(
    session: Session, email: str, password: str, role: str, now: datetime
) -> tuple[User, bool]:
    user = session.exec(select(User).where(User.email == email)).first()
    if user is not None:
        return user, False
    user = User(email=email, password_hash=hash_password(password), role=role, created_at=now)
    session.add(user)
    session.flush()
    return user, True


def seed_demo(settings: Settings | None = None) -> list[str]:
    from app.clock import SimulatedClock, SystemClock
    from app.main import import_models

    import_models()
    settings = settings or Settings()
    engine = make_engine(settings.database_url)
    clock = SimulatedClock(engine) if settings.simulation else SystemClock()
    now = clock.now()
    lines: list[str] = []
    with transaction(engine) as session:
        created_any = False
        for email, password, role in DEMO_ACCOUNTS:
            _user, created = ensure_user(session, email, password, role.value, now)
            created_any |= created
        for name in SEED_MODULES:
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as e:
                if e.name == name:
                    continue
                raise
            lines += module.seed(session, now)
    if created_any:
        lines.insert(0, "Demo logins (development only):")
        for i, (email, password, role) in enumerate(DEMO_ACCOUNTS, start=1):
            lines.insert(i, f"  {role.value:<8} {email}  password: {password}")
    else:
        lines.insert(0, "Demo data already present (logins in README.md).")
    engine.dispose()
    return lines
