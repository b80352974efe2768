"""Give the demo customer a starting balance, once, from the promotions account."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, select

from app.accounts.models import User
from app.ledger import service

DEMO_EMAIL = "customer@demo.test"
DEMO_BALANCE_CENTS = 5_000_000  # US$50,000
SEED_KEY = "seed:demo-starting-balance"


def seed(session: Session, now: datetime) -> list[str]:
    user = session.exec(select(User).where(User.email == DEMO_EMAIL)).first()
    if user is None or user.id is None:
        return []
    before = service.available_cents(session, user.id)
    service.grant_promotion(
        session,
        user_id=user.id,
        amount_cents=DEMO_BALANCE_CENTS,
        # a promotion's reason is staff's text, shown as written on the customer's statement
        # in either language: the demo's is written in both
        reason="Demo starting balance · 演示初始余额",
        now=now,
        idempotency_key=SEED_KEY,
    )
    after = service.available_cents(session, user.id)
    if after != before:
        return [f"Demo customer balance: US${after / 100:,.2f} (from promotions)"]
    return []
