"""Receipts: one for every charge and every top-up, numbered from one gap-free sequence.

``issue_for_entry`` is called by the ledger's one write path (``service._move``) in the same
transaction as the journal entry, so a receipt exists exactly when its entry does:

- numbers are ``R-<year>-<six digits>``, one sequence per calendar year (UTC);
- the next number comes from a locked ``UPDATE … SET last_number = last_number + 1`` on the
  year's counter row: concurrent charges queue on that row for the rest of their
  transaction, and a transaction that rolls back takes its number with it — no gaps, no
  duplicates (``uq_receipts_year_seq`` and the unique number are the belt and braces);
- the customer's billing details (company, address, tax id) are copied in at issue time.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from app.accounts.models import User
from app.errors import N_, NotFound
from app.ledger.models import JournalEntry, Receipt, ReceiptCounter
from app.ledger.postings import EntryKind

# What gets a receipt: money the customer paid us (top-ups) and money we took from the
# balance for a service (a reservation charged at delivery, a renewal charge).
RECEIPT_KINDS = frozenset(
    {EntryKind.topup.value, EntryKind.hold_post.value, EntryKind.charge.value}
)

KIND_TITLE = {
    EntryKind.topup.value: N_("Top-up of your prepaid balance"),
    EntryKind.hold_post.value: N_("Charge: first month of order #{order}"),
    EntryKind.charge.value: N_("Charge: order #{order}"),
}
KIND_TITLE_NO_ORDER = N_("Charge from your prepaid balance")


def format_number(year: int, seq: int) -> str:
    return f"R-{year}-{seq:06d}"


def _next_seq(session: Session, year: int) -> int:
    bump = (
        update(ReceiptCounter)
        .where(col(ReceiptCounter.year) == year)
        .values(last_number=ReceiptCounter.last_number + 1)
        .returning(col(ReceiptCounter.last_number))
        .execution_options(synchronize_session=False)
    )
    row = session.exec(bump).first()  # type: ignore[call-overload]
    if row is None:
        # The year's first receipt: create its counter; a concurrent creator wins the insert
        # and we queue on its row lock in the UPDATE below.
        try:
            with session.begin_nested():
                session.add(ReceiptCounter(year=year, last_number=0))
                session.flush()
        except IntegrityError:
            pass
        row = session.exec(bump).first()  # type: ignore[call-overload]
    assert row is not None
    return int(row[0])


def issue_for_entry(session: Session, entry: JournalEntry, now: datetime) -> Receipt | None:
    """The receipt of a just-written entry, in the same transaction (None for other kinds)."""
    if entry.kind not in RECEIPT_KINDS or entry.user_id is None or entry.id is None:
        return None
    user = session.get(User, entry.user_id)
    year = now.year
    seq = _next_seq(session, year)
    receipt = Receipt(
        number=format_number(year, seq),
        year=year,
        seq=seq,
        user_id=entry.user_id,
        entry_id=entry.id,
        kind=entry.kind,
        amount_cents=entry.amount_cents,
        order_id=entry.order_id,
        invoice_id=entry.invoice_id,
        crypto_currency=entry.crypto_currency,
        crypto_amount=entry.crypto_amount,
        rate=entry.rate,
        bill_email=user.email if user else "",
        bill_name=user.name if user else "",
        bill_company=user.company if user else "",
        bill_address=(user.billing_address if user else "")[:500],
        bill_tax_id=user.tax_id if user else "",
        created_at=now,
    )
    session.add(receipt)
    session.flush()
    return receipt


def receipts_for(session: Session, user_id: int, limit: int = 50, offset: int = 0) -> list[Receipt]:
    stmt = (
        select(Receipt)
        .where(Receipt.user_id == user_id)
        .order_by(col(Receipt.id).desc())
        .offset(offset)
        .limit(limit)
    )
    return list(session.exec(stmt).all())


def receipt_count(session: Session, user_id: int) -> int:
    return int(
        session.exec(
            select(func.count()).select_from(Receipt).where(Receipt.user_id == user_id)
        ).one()
    )


def receipt_numbers_by_entry(session: Session, entry_ids: list[int]) -> dict[int, str]:
    if not entry_ids:
        return {}
    rows = session.exec(
        select(Receipt.entry_id, Receipt.number).where(col(Receipt.entry_id).in_(entry_ids))
    ).all()
    return {int(e): n for e, n in rows}


def get_receipt(session: Session, viewer: User, number: str) -> Receipt:
    """The customer's own receipt, or any receipt for staff; others get 404 (no probing)."""
    receipt = session.exec(select(Receipt).where(Receipt.number == number[:20])).first()
    if receipt is None or (receipt.user_id != viewer.id and not viewer.is_staff):
        raise NotFound(N_("No receipt with that number."))
    return receipt


def title_msgid(receipt: Receipt) -> tuple[str, dict[str, object]]:
    """The receipt's line item as a message id and its parameters (rendered per reader)."""
    if receipt.kind != EntryKind.topup.value and receipt.order_id is None:
        return KIND_TITLE_NO_ORDER, {}
    return KIND_TITLE[receipt.kind], {"order": receipt.order_id}
