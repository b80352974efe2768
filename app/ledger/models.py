"""Ledger tables: accounts, journal entries, postings (append-only), holds, idempotency.

Database guarantees (belt and braces under the service's row locks):
- ``ck_ledger_accounts_nonneg``: a customer account (available/held) never goes below zero;
- ``uq_ledger_entries_credit_invoice_id``: one top-up credit per invoice;
- ``uq_ledger_entries_resolves_hold_id``: one resolution (post or void) per hold;
- ``uq_ledger_idem_user_key``: one result per idempotency key and customer;
- ``uq_ledger_postings_entry_account``: one posting per account in an entry.
"""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import BigInteger, CheckConstraint, Column, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.db import UTCDateTime


class LedgerAccount(SQLModel, table=True):
    """A customer has two accounts (``available``, ``held``); system accounts have a code.

    ``balance_cents`` is a cache of the sum of the account's postings for customer accounts,
    written in the same statement that checks it (conditional UPDATE); ``ledger check``
    compares it with the sum. System accounts are not cached (no hot row every customer's
    transaction would queue on); their balances are derived by summing.
    """

    __tablename__ = "ledger_accounts"
    __table_args__ = (
        UniqueConstraint("user_id", "kind", name="uq_ledger_accounts_user_kind"),
        CheckConstraint("kind = 'system' OR balance_cents >= 0", name="nonneg"),
    )
    id: int | None = Field(default=None, primary_key=True)
    code: str = Field(sa_column=Column(String(64), unique=True, nullable=False))
    kind: str = Field(max_length=16)  # available | held | system
    user_id: int | None = Field(default=None, foreign_key="users.id", index=True)
    name: str = Field(default="", max_length=120)
    balance_cents: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))
    created_at: datetime = Field(sa_type=UTCDateTime)


class JournalEntry(SQLModel, table=True):
    """One movement of money: two or more postings summing to zero. Never updated."""

    __tablename__ = "ledger_entries"
    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=24, index=True)  # EntryKind
    reason: str = Field(default="", max_length=300)  # reason code / text shown on statements
    user_id: int | None = Field(default=None, foreign_key="users.id", index=True)
    order_id: int | None = Field(default=None, index=True)
    invoice_id: int | None = Field(default=None, index=True)
    quote_id: int | None = Field(default=None, index=True)
    hold_id: int | None = Field(default=None, index=True)
    actor_id: int | None = Field(default=None, foreign_key="users.id")
    # Exactly-once guards (NULL for other kinds; NULLs never collide).
    credit_invoice_id: int | None = Field(default=None, sa_column=Column(BigInteger, unique=True))
    resolves_hold_id: int | None = Field(default=None, sa_column=Column(BigInteger, unique=True))
    corrects_entry_id: int | None = Field(default=None)
    # A crypto receipt converted once at the invoice's locked rate, stored exactly.
    crypto_currency: str = Field(default="", max_length=8)
    crypto_amount: str = Field(default="", max_length=40)  # integer, smallest unit
    rate: str = Field(default="", max_length=40)  # decimal, US$ per whole coin
    amount_cents: int = Field(sa_column=Column(BigInteger, nullable=False))  # the moved amount
    created_at: datetime = Field(sa_type=UTCDateTime, index=True)


class Posting(SQLModel, table=True):
    """One leg of an entry. ``balance_after_cents`` is the account's balance right after it
    (customer accounts only, read from the same locked UPDATE)."""

    __tablename__ = "ledger_postings"
    __table_args__ = (
        UniqueConstraint("entry_id", "account_id", name="uq_ledger_postings_entry_account"),
    )
    id: int | None = Field(default=None, primary_key=True)
    entry_id: int = Field(foreign_key="ledger_entries.id", index=True)
    account_id: int = Field(foreign_key="ledger_accounts.id", index=True)
    amount_cents: int = Field(sa_column=Column(BigInteger, nullable=False))
    balance_after_cents: int | None = Field(default=None, sa_column=Column(BigInteger))
    created_at: datetime = Field(sa_type=UTCDateTime)


class Hold(SQLModel, table=True):
    """A reservation: pending → posted | voided, exactly once."""

    __tablename__ = "ledger_holds"
    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="users.id", index=True)
    amount_cents: int = Field(sa_column=Column(BigInteger, nullable=False))
    status: str = Field(default="pending", max_length=16, index=True)
    reason: str = Field(default="", max_length=300)
    order_id: int | None = Field(default=None, index=True)
    idempotency_key: str = Field(max_length=120)
    entry_id: int | None = Field(default=None)  # the hold entry (available → held)
    resolve_entry_id: int | None = Field(default=None)  # the post/void entry
    resolve_reason: str = Field(default="", max_length=300)
    created_at: datetime = Field(sa_type=UTCDateTime)
    resolved_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    actor_id: int | None = Field(default=None)
    resolved_by: int | None = Field(default=None)


class IdempotencyRecord(SQLModel, table=True):
    """The first *successful* result of a money-moving command, per customer and key."""

    __tablename__ = "ledger_idempotency"
    __table_args__ = (UniqueConstraint("user_id", "key", name="uq_ledger_idem_user_key"),)
    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="users.id", index=True)
    key: str = Field(max_length=120)
    command: str = Field(max_length=24)
    fingerprint: str = Field(max_length=64)
    hold_id: int | None = None
    entry_id: int | None = None
    created_at: datetime = Field(sa_type=UTCDateTime)


class DeclinedAttempt(SQLModel, table=True):
    """A debit refused for insufficient funds (kept for support and for the statement)."""

    __tablename__ = "ledger_declined"
    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="users.id", index=True)
    key: str = Field(max_length=120)
    command: str = Field(max_length=24)
    amount_cents: int = Field(sa_column=Column(BigInteger, nullable=False))
    available_cents: int = Field(sa_column=Column(BigInteger, nullable=False))
    order_id: int | None = None
    reason: str = Field(default="", max_length=300)
    created_at: datetime = Field(sa_type=UTCDateTime, index=True)


class ReceiptCounter(SQLModel, table=True):
    """The last receipt number issued in a year. Incremented by a locked UPDATE in the same
    transaction as the ledger entry the receipt is for, so numbers have no gaps: a rolled
    back charge rolls its number back too."""

    __tablename__ = "receipt_counters"
    year: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    last_number: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))


class IssuedDocument(SQLModel):
    """What a receipt and a credit note both record, each in its own table: the number in
    its year's gap-free series, the customer, the ledger entry it was issued with (one
    document per entry) and its amount, and the customer's billing details and the
    seller's block copied in when it is issued, so a document keeps saying what it said
    after the customer edits their profile or the seller settings change. Written once,
    never updated."""

    id: int | None = Field(default=None, primary_key=True)
    number: str = Field(sa_type=String(20), unique=True)
    year: int
    seq: int
    user_id: int = Field(foreign_key="users.id", index=True)
    entry_id: int = Field(sa_type=BigInteger, unique=True)
    kind: str = Field(max_length=24)  # the entry kind
    amount_cents: int = Field(sa_type=BigInteger)
    currency: str = Field(default="USD", max_length=3)
    order_id: int | None = Field(default=None, index=True)
    bill_email: str = Field(default="", max_length=254)
    bill_name: str = Field(default="", max_length=120)
    bill_company: str = Field(default="", max_length=120)
    bill_address: str = Field(default="", max_length=500)
    bill_tax_id: str = Field(default="", max_length=64)
    # The seller as it was when the document was issued (legal name, both addresses, tax
    # id), copied from the settings in the same transaction: changing the settings later
    # never rewrites an issued document.
    seller_name: str = Field(default="", max_length=200)
    seller_name_zh: str = Field(default="", max_length=200)
    seller_address_en: str = Field(default="", max_length=500)
    seller_address_zh: str = Field(default="", max_length=500)
    seller_tax_id: str = Field(default="", max_length=64)
    created_at: datetime = Field(sa_type=UTCDateTime, index=True)


class DocumentLine(SQLModel):
    """One line item of a receipt or a credit note, copied from the ``InvoiceLine`` the
    orders domain passed (``app/ledger/invoicing.py``) and written once with its document.
    A document's ``total_cents`` add up to its ``amount_cents`` (``ledger check``)."""

    id: int | None = Field(default=None, primary_key=True)
    position: int
    sku: str = Field(default="", max_length=32)
    description: str = Field(default="", max_length=200)
    quantity: int
    unit_cents: int = Field(sa_type=BigInteger)
    discount_cents: int = Field(default=0, sa_type=BigInteger)
    period_start: date | None = None
    period_end: date | None = None
    days: int | None = None
    days_of: int | None = None
    total_cents: int = Field(sa_type=BigInteger)


class Receipt(IssuedDocument, table=True):
    """A receipt for one charge or top-up (entry kinds topup | hold_post | charge):
    ``R-2026-000001``; a top-up's also says what was paid in crypto, at which rate."""

    __tablename__ = "receipts"
    __table_args__ = (UniqueConstraint("year", "seq", name="uq_receipts_year_seq"),)
    invoice_id: int | None = Field(default=None)
    crypto_currency: str = Field(default="", max_length=8)
    crypto_amount: str = Field(default="", max_length=40)
    rate: str = Field(default="", max_length=40)


class ReceiptLine(DocumentLine, table=True):
    """One line item of a receipt (what the charge paid for, for which service period)."""

    __tablename__ = "receipt_lines"
    __table_args__ = (UniqueConstraint("receipt_id", "position", name="uq_receipt_lines_pos"),)
    receipt_id: int = Field(foreign_key="receipts.id", index=True)


class CreditNoteCounter(SQLModel, table=True):
    """The last credit-note number issued in a year: its own gap-free sequence, bumped by a
    locked UPDATE in the refund's transaction (as ``ReceiptCounter`` for receipts)."""

    __tablename__ = "credit_note_counters"
    year: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    last_number: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))


class CreditNote(IssuedDocument, table=True):
    """A credit note ``CN-2026-000001``: money given back to the customer's balance for an
    order (a refund before delivery, unused days of a lease ended early; entry kinds
    hold_void | lease_credit), issued with the ledger entry that moved it. ``receipt_id``
    is the receipt it corrects (None when the money credited had not been invoiced yet: a
    reservation released before delivery)."""

    __tablename__ = "credit_notes"
    __table_args__ = (UniqueConstraint("year", "seq", name="uq_credit_notes_year_seq"),)
    reason: str = Field(default="other", max_length=24)  # invoicing.CreditReason
    receipt_id: int | None = Field(default=None, index=True)
    receipt_number: str = Field(default="", max_length=20)


class CreditNoteLine(DocumentLine, table=True):
    """One line of a credit note (what is credited, for which service period)."""

    __tablename__ = "credit_note_lines"
    __table_args__ = (
        UniqueConstraint("credit_note_id", "position", name="uq_credit_note_lines_pos"),
    )
    credit_note_id: int = Field(foreign_key="credit_notes.id", index=True)
