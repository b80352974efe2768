"""Credit notes: one for every refund or credit of an order to the customer's balance.

``issue_for_entry`` is called by the ledger's one write path (``moves.move``) right after a
``hold_void`` (a paid order cancelled before delivery: a missed date or the customer's own
cancel) or a ``lease_credit`` (ops ended a lease early: the unused days, pro rata), in the
same transaction as the entry: a replayed refund answers its first entry without moving
money again, so it issues no second note, and a rolled-back refund takes its note and its
number with it.

- numbers are ``CN-<year>-<six digits>``, a gap-free sequence of their own per calendar
  year, from the locked counter row ``credit_note_counters`` (as receipts have theirs);
- the note refers to the receipt it corrects (the order's latest charge receipt) or to
  none when what is refunded was never invoiced (the first month, released before
  delivery: it is invoiced only when the nodes are delivered);
- the buyer's billing details and the seller's block are copied in as they are at issue
  time (``receipts.seller_fields``), so a note never changes with the settings;
- its lines are the ``InvoiceLine`` values the orders domain passed, copied in; without
  any, one line of the entry's whole amount. They add up to the entry exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlmodel import Session, col

from app.accounts.models import User
from app.db import rows_where
from app.errors import N_
from app.ledger import receipts
from app.ledger.invoicing import CreditReason, InvoiceLine, check_lines
from app.ledger.models import CreditNote, CreditNoteCounter, CreditNoteLine, JournalEntry
from app.ledger.postings import EntryKind

# What gets a credit note: money given back to a customer for an order.
CREDIT_KINDS = frozenset({EntryKind.hold_void.value, EntryKind.lease_credit.value})

REASON_TEXT = {
    CreditReason.missed_delivery.value: N_(
        "Full refund: the promised delivery date was missed and the order was cancelled."
    ),
    CreditReason.cancelled.value: N_("Full refund: the order was cancelled before delivery."),
    CreditReason.lease_ended_early.value: N_(
        "The lease was ended early by our operations team: the unused whole days of the "
        "paid month are credited pro rata."
    ),
    CreditReason.other.value: N_("Credited to your prepaid balance."),
}


def format_number(year: int, seq: int) -> str:
    return f"CN-{year}-{seq:06d}"


def issue_for_entry(
    session: Session,
    entry: JournalEntry,
    now: datetime,
    lines: Sequence[InvoiceLine] = (),
    reason: CreditReason | None = None,
) -> CreditNote | None:
    """The credit note of a just-written refund entry, in its transaction (None for other
    kinds). ``LineError`` when ``lines`` do not add up to the entry."""
    if entry.kind not in CREDIT_KINDS or entry.user_id is None or entry.id is None:
        return None
    check_lines(lines, entry.amount_cents)
    if reason is None:
        reason = (
            CreditReason.lease_ended_early
            if entry.kind == EntryKind.lease_credit.value
            else CreditReason.other
        )
    corrected = (
        receipts.latest_for_order(session, entry.user_id, entry.order_id)
        if entry.order_id is not None and entry.kind == EntryKind.lease_credit.value
        else None
    )
    if not lines:
        lines = (InvoiceLine(sku="", description="", quantity=1, unit_cents=entry.amount_cents),)
    note = CreditNote(
        reason=reason.value,
        receipt_id=corrected.id if corrected else None,
        receipt_number=corrected.number if corrected else "",
        **receipts.issued_fields(session, entry, now, CreditNoteCounter, format_number),
    )
    return receipts.add_document(
        session, note, lines, lambda note_id, **row: CreditNoteLine(credit_note_id=note_id, **row)
    )


def lines_of(session: Session, credit_note_id: int) -> list[CreditNoteLine]:
    return rows_where(
        session,
        CreditNoteLine,
        col(CreditNoteLine.credit_note_id) == credit_note_id,
        order_by=col(CreditNoteLine.position),
    )


def credit_notes_for(
    session: Session, user_id: int, limit: int = 50, offset: int = 0
) -> list[CreditNote]:
    return receipts.documents_for(session, CreditNote, user_id, limit, offset)


def credit_notes_for_order(session: Session, user_id: int, order_id: int) -> list[CreditNote]:
    return receipts.documents_for_order(session, CreditNote, user_id, order_id)


def credit_notes_correcting(session: Session, receipt_id: int) -> list[CreditNote]:
    return rows_where(
        session, CreditNote, col(CreditNote.receipt_id) == receipt_id, order_by=col(CreditNote.id)
    )


def credit_note_numbers_by_entry(session: Session, entry_ids: list[int]) -> dict[int, str]:
    return receipts.numbers_by_entry(session, CreditNote, entry_ids)


def credit_note_of_entry(session: Session, entry_id: int | None) -> str | None:
    """The number of the credit note a refund entry issued (None: it issued none)."""
    return (
        None
        if entry_id is None
        else credit_note_numbers_by_entry(session, [entry_id]).get(entry_id)
    )


def credit_note_path(number: str) -> str:
    """Where the customer reads a credit note (relative to the site's address)."""
    return f"/credit-notes/{number}"


def get_credit_note(session: Session, viewer: User, number: str) -> CreditNote:
    """The customer's own credit note, or any for staff; others get 404 (no probing)."""
    return receipts.own_document(
        session, viewer, CreditNote, number, N_("No credit note with that number.")
    )


def reason_msgid(note: CreditNote) -> str:
    return REASON_TEXT.get(note.reason, REASON_TEXT[CreditReason.other.value])
