"""Two demo quotes (idempotent): a sent B200 quote and a draft waiting on a big discount."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, select

from app.accounts.models import User
from app.quotes import service
from app.quotes.models import Quote
from app.quotes.schemas import QuoteIn

DEMO_PROSPECT = "prospect@demo.test"

# Each demo quote: the builder's form, and the line the seed prints once it is sent.
DEMO_QUOTES: tuple[tuple[dict[str, str], str], ...] = (
    (
        {
            "prospect_name": "Lin Wei",
            "prospect_email": DEMO_PROSPECT,
            "prospect_company": "Example Labs",
            "sku": "hgx-b200",
            "quantity": "2",
            "months": "3",
            "discount": "8",
            "valid_days": "7",
            "sizing": "/size?model=llama-3.1-8b&tokens=1T",
            "notes": "Two B200 nodes for continued pretraining; price held for a week.",
        },
        "Demo quote (sent): /q/{token}",
    ),
    (
        {
            "prospect_name": "Ana Ruiz",
            "prospect_email": "research@demo.test",
            "prospect_company": "Frontier Research",
            "sku": "gb300-nvl72",
            "quantity": "144",
            "months": "24",
            "discount": "15",
            "valid_days": "14",
            "sizing_notes": "Pretraining a 400B MoE; wants two racks from Q2.",
        },
        # 15 % is above the sales limit: sending it asks ops for an approval.
        "Demo quote waiting for ops approval: /staff/quotes",
    ),
)


def seed(session: Session, now: datetime) -> list[str]:
    if session.exec(select(Quote).where(Quote.prospect_email == DEMO_PROSPECT)).first():
        return []
    sales = session.exec(select(User).where(User.email == "sales@demo.test")).first()
    if sales is None:
        return []
    lines: list[str] = []
    for form, line in DEMO_QUOTES:
        data = service.quote_input(session, QuoteIn.model_validate(form))
        q = service.create_quote(session, actor=sales, data=data, now=now)
        service.send_quote(session, q, actor=sales, now=now)
        lines.append(line.format(token=q.token))
    return lines
