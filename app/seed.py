"""Demo data, seeded once: the catalog, a demo customer with a balance, sales and ops.

Each domain may contribute ``app/<domain>/seed.py`` with ``seed(session, now) -> list[str]``
(idempotent). The printed lines are shown by ``make run`` on first start.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, select

from app.accounts.models import Role, User
from app.accounts.security import hash_password
from app.catalog import seed as catalog_seed
from app.clock import SimulatedClock, SystemClock
from app.db import make_engine, transaction
from app.ledger import seed as ledger_seed
from app.quotes import seed as quotes_seed
from app.settings import Settings
from app.tables import import_models

DEMO_ACCOUNTS = (
    ("customer@demo.test", "demo-customer-2026", Role.customer),
    ("sales@demo.test", "demo-sales-2026", Role.sales),
    ("ops@demo.test", "demo-ops-2026", Role.ops),
)
SEED_MODULES = (catalog_seed, ledger_seed, quotes_seed)


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
        for module in SEED_MODULES:
            lines += module.seed(session, now)
    if created_any:
        lines.insert(0, "Demo logins (development only):")
        for i, (email, password, role) in enumerate(DEMO_ACCOUNTS, start=1):
            lines.insert(i, f"  {role.value:<8} {email}  password: {password}")
    else:
        lines.insert(0, "Demo data already present (logins in README.md).")
    engine.dispose()
    return lines
