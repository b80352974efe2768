"""Receipts: one for every charge and every top-up, numbered from one gap-free sequence.

``issue_for_entry`` is called by the ledger's one write path (``service._move``) in the same
transaction as the journal entry, so a receipt exists exactly when its entry does:

- numbers are ``R-<year>-<six digits>``, one sequence per calendar year (UTC);
- the next number comes from a locked ``UPDATE … SET last_number = last_number + 1`` on the
  year's counter row: concurrent charges queue on that row for the rest of their
  transaction, and a transaction that rolls back takes its number with it — no gaps, no
  duplicates (``uq_receipts_year_seq`` and the unique number are the belt and braces);
- the customer's billing details (company, address, tax id) and the seller's block
  (``seller_fields``: the settings of that moment) are copied in at issue time, and so are the line items the orders domain passed (``invoicing.InvoiceLine``: node type,
  quantity, unit price per node-month, discount, service period) into ``receipt_lines``;
  they add up to the entry exactly or nothing is issued.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from app.accounts.models import User
from app.db import count_of_user, rows_of_user, rows_where
from app.errors import N_, NotFound
from app.ledger.invoicing import InvoiceLine, Seller, check_lines
from app.ledger.models import (
    CreditNote,
    DocumentLine,
    IssuedDocument,
    JournalEntry,
    Receipt,
    ReceiptCounter,
    ReceiptLine,
)
from app.ledger.postings import EntryKind
from app.settings import Settings

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

D = TypeVar("D", Receipt, CreditNote)


def format_number(year: int, seq: int) -> str:
    return f"R-{year}-{seq:06d}"


class SellerSettings(Protocol):
    seller_name: str
    seller_name_zh: str
    seller_address_en: str
    seller_address_zh: str
    seller_tax_id: str


def seller_from(settings: SellerSettings) -> Seller:
    return Seller(
        name=settings.seller_name,
        name_zh=settings.seller_name_zh,
        address_en=settings.seller_address_en,
        address_zh=settings.seller_address_zh,
        tax_id=settings.seller_tax_id,
    )


# Who issues documents in this process: set once by ``create_app`` and the worker from
# their settings (``use_seller``); a process that sets none (a CLI, the simulator) reads
# the settings of its environment the first time it issues a document.
_seller: list[Seller] = []


def use_seller(settings: SellerSettings) -> None:
    _seller[:] = [seller_from(settings)]


def current_seller() -> Seller:
    if not _seller:
        use_seller(Settings())
    return _seller[0]


def seller_fields(seller: Seller) -> dict[str, Any]:
    """The seller's block as the snapshot columns of a receipt or a credit note."""
    return {
        "seller_name": seller.name[:200],
        "seller_name_zh": seller.name_zh[:200],
        "seller_address_en": seller.address_en[:500],
        "seller_address_zh": seller.address_zh[:500],
        "seller_tax_id": seller.tax_id[:64],
    }


def parties_fields(user: User | None) -> dict[str, Any]:
    """The buyer's billing details and today's seller, as the snapshot columns a receipt
    or a credit note is issued with (what it prints for ever after)."""
    return {
        "bill_email": user.email if user else "",
        "bill_name": user.name if user else "",
        "bill_company": user.company if user else "",
        "bill_address": (user.billing_address if user else "")[:500],
        "bill_tax_id": user.tax_id if user else "",
        **seller_fields(current_seller()),
    }


def seller_of(doc: IssuedDocument) -> Seller:
    """The seller an issued document names: its own snapshot, never today's settings."""
    return seller_from(doc)


def next_seq(session: Session, year: int, counter: Any = ReceiptCounter) -> int:
    """The year's next number of a document series (``counter``: its counter table)."""
    bump = (
        update(counter)
        .where(col(counter.year) == year)
        .values(last_number=counter.last_number + 1)
        .returning(col(counter.last_number))
        .execution_options(synchronize_session=False)
    )
    row = session.exec(bump).first()  # type: ignore[call-overload]
    if row is None:
        # The year's first receipt: create its counter; a concurrent creator wins the insert
        # and we queue on its row lock in the UPDATE below.
        try:
            with session.begin_nested():
                session.add(counter(year=year, last_number=0))
                session.flush()
        except IntegrityError:
            pass
        row = session.exec(bump).first()  # type: ignore[call-overload]
    assert row is not None
    return int(row[0])


def line_fields(line: InvoiceLine) -> dict[str, Any]:
    """An ``InvoiceLine`` as the columns of a ledger-owned line row (copied, not referred)."""
    return {
        "sku": line.sku[:32],
        "description": line.description[:200],
        "quantity": line.quantity,
        "unit_cents": line.unit_cents,
        "discount_cents": line.discount_cents,
        "period_start": line.period_start,
        "period_end": line.period_end,
        "days": line.days,
        "days_of": line.days_of,
        "total_cents": line.total_cents,
    }


def issued_fields(
    session: Session,
    entry: JournalEntry,
    now: datetime,
    counter: Any,
    number: Callable[[int, int], str],
) -> dict[str, Any]:
    """The columns every document issued for ``entry`` takes (``IssuedDocument``): the next
    number of its series (``counter``: the series' counter table, ``number``: its format),
    the entry's customer, kind, amount and order, and the parties of the day."""
    assert entry.user_id is not None and entry.id is not None
    user = session.get(User, entry.user_id)
    year = now.year
    seq = next_seq(session, year, counter)
    return {
        "number": number(year, seq),
        "year": year,
        "seq": seq,
        "user_id": entry.user_id,
        "entry_id": entry.id,
        "kind": entry.kind,
        "amount_cents": entry.amount_cents,
        "order_id": entry.order_id,
        **parties_fields(user),
        "created_at": now,
    }


def add_document(
    session: Session, doc: D, lines: Sequence[InvoiceLine], line_row: Callable[..., DocumentLine]
) -> D:
    """Write an issued document, then its ``lines`` copied in, numbered from 1, as the rows
    ``line_row(doc_id, position=…, **line_fields(line))``."""
    session.add(doc)
    session.flush()
    assert doc.id is not None
    for i, line in enumerate(lines, 1):
        session.add(line_row(doc.id, position=i, **line_fields(line)))
    if lines:
        session.flush()
    return doc


def issue_for_entry(
    session: Session, entry: JournalEntry, now: datetime, lines: Sequence[InvoiceLine] = ()
) -> Receipt | None:
    """The receipt of a just-written entry, in the same transaction (None for other kinds),
    with ``lines`` copied in (they must add up to the entry: ``LineError`` otherwise)."""
    if entry.kind not in RECEIPT_KINDS or entry.user_id is None or entry.id is None:
        return None
    check_lines(lines, entry.amount_cents)
    receipt = Receipt(
        invoice_id=entry.invoice_id,
        crypto_currency=entry.crypto_currency,
        crypto_amount=entry.crypto_amount,
        rate=entry.rate,
        **issued_fields(session, entry, now, ReceiptCounter, format_number),
    )
    return add_document(
        session, receipt, lines, lambda receipt_id, **row: ReceiptLine(receipt_id=receipt_id, **row)
    )


def lines_of(session: Session, receipt_id: int) -> list[ReceiptLine]:
    return rows_where(
        session,
        ReceiptLine,
        col(ReceiptLine.receipt_id) == receipt_id,
        order_by=col(ReceiptLine.position),
    )


def latest_for_order(session: Session, user_id: int, order_id: int) -> Receipt | None:
    """The order's most recent charge receipt (what a credit for the order corrects)."""
    return session.exec(
        select(Receipt)
        .where(
            Receipt.user_id == user_id,
            Receipt.order_id == order_id,
            col(Receipt.kind).in_([EntryKind.hold_post.value, EntryKind.charge.value]),
        )
        .order_by(col(Receipt.id).desc())
        .limit(1)
    ).first()


def documents_for_order(session: Session, doc: type[D], user_id: int, order_id: int) -> list[D]:
    """The customer's documents of kind ``doc`` for an order, oldest first."""
    return list(
        session.exec(
            select(doc)
            .where(doc.user_id == user_id, doc.order_id == order_id)
            .order_by(col(doc.id))
        ).all()
    )


def receipts_for_order(session: Session, user_id: int, order_id: int) -> list[Receipt]:
    return documents_for_order(session, Receipt, user_id, order_id)


def documents_for(
    session: Session, doc: type[D], user_id: int, limit: int = 50, offset: int = 0
) -> list[D]:
    """The customer's documents of kind ``doc``, newest first."""
    return rows_of_user(session, doc, user_id, limit=limit, offset=offset)


def receipts_for(session: Session, user_id: int, limit: int = 50, offset: int = 0) -> list[Receipt]:
    return documents_for(session, Receipt, user_id, limit, offset)


def receipt_count(session: Session, user_id: int) -> int:
    return count_of_user(session, Receipt, user_id)


def numbers_by_entry(
    session: Session, doc: type[Receipt] | type[CreditNote], entry_ids: list[int]
) -> dict[int, str]:
    """The numbers of the documents of kind ``doc`` the entries issued, by entry id."""
    if not entry_ids:
        return {}
    rows = session.exec(
        select(doc.entry_id, doc.number).where(col(doc.entry_id).in_(entry_ids))
    ).all()
    return {int(e): n for e, n in rows}


def own_document(session: Session, viewer: User, doc: type[D], number: str, missing: str) -> D:
    """The viewer's own document of kind ``doc`` numbered ``number``, or any for staff;
    others get 404 with ``missing`` (no probing)."""
    found = session.exec(select(doc).where(doc.number == number[:20])).first()
    if found is None or (found.user_id != viewer.id and not viewer.is_staff):
        raise NotFound(missing)
    return found


def receipt_numbers_by_entry(session: Session, entry_ids: list[int]) -> dict[int, str]:
    return numbers_by_entry(session, Receipt, entry_ids)


def receipt_of_entry(session: Session, entry_id: int | None) -> str | None:
    """The number of the receipt an entry issued (None: it issued none)."""
    return None if entry_id is None else receipt_numbers_by_entry(session, [entry_id]).get(entry_id)


def receipt_path(number: str) -> str:
    """Where the customer reads a receipt (relative to the site's address)."""
    return f"/receipts/{number}"


def get_receipt(session: Session, viewer: User, number: str) -> Receipt:
    """The customer's own receipt, or any receipt for staff; others get 404 (no probing)."""
    return own_document(session, viewer, Receipt, number, N_("No receipt with that number."))


def title_msgid(receipt: Receipt) -> tuple[str, dict[str, object]]:
    """The receipt's line item as a message id and its parameters (rendered per reader)."""
    if receipt.kind != EntryKind.topup.value and receipt.order_id is None:
        return KIND_TITLE_NO_ORDER, {}
    return KIND_TITLE[receipt.kind], {"order": receipt.order_id}
