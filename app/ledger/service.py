"""The ledger service: every money movement of a customer goes through here.

Contracts (see docs/architecture.md "Seams"): all functions take the caller's session and
``now`` and never commit — the request (or ``app.db.transaction``) owns the transaction, so
an order's state, its ledger entry and its inventory hold commit together or not at all.

How "never negative" holds under concurrency
--------------------------------------------
Every command on a customer first locks the customer's *available* account row
(``SELECT … FOR UPDATE`` on PostgreSQL; SQLite transactions already start with
``BEGIN IMMEDIATE`` so writers are serialised). The debit itself is one conditional
statement, ``UPDATE ledger_accounts SET balance_cents = balance_cents - :a WHERE id = :id
AND balance_cents >= :a RETURNING balance_cents``: no row back means insufficient funds.
A ``CHECK (balance_cents >= 0)`` on customer accounts backs this up in the database. The
per-customer lock (always *available* before *held*) also serialises idempotency look-ups.

Idempotency keys
----------------
Keys are scoped to the customer. The first *successful* command with a key is recorded
(``ledger_idempotency``); a replay with the same parameters (command, amount, order)
returns that first result, a replay with different parameters raises
``IdempotencyConflict`` (409). A refused attempt (insufficient funds) is recorded in
``ledger_declined`` — in the caller's transaction, so it persists when the caller handles
the error (the checkout does: it re-renders the review with a top-up offer) — but does *not*
bind the key: after a top-up, the same key (the same checkout form) is a new attempt that
can succeed. Two attempts can never both succeed, because success binds the key under the
customer's lock.

Holds resolve exactly once
--------------------------
``post_hold``/``void_hold`` on a pending hold apply once (conditional status UPDATE plus a
unique ``resolves_hold_id`` on the entry). Calling the *same* resolution again is an
idempotent no-op returning the first entry (a retried delivery or cancel click); calling
the *other* one raises ``HoldAlreadyResolved`` (409).

This module is the ledger's seam for other domains (docs/architecture.md "Seams"): it names
the commands and reads they call; the work lives in ``moves`` (the one write path),
``commands``, ``holds`` and ``queries``.
"""

from __future__ import annotations

from app.ledger.commands import adjust, charge, credit_topup, credit_unused_days, grant_promotion
from app.ledger.credit_notes import credit_note_of_entry, credit_note_path, credit_notes_for_order
from app.ledger.holds import (
    HOLD_IN_ONE,
    HoldInOne,
    hold_in_one_params,
    hold_in_one_result,
    place_hold,
    place_hold_id,
    post_hold,
    void_hold,
)
from app.ledger.invoicing import CreditReason, InvoiceLine, LineError
from app.ledger.moves import (
    MAX_CENTS,
    SYSTEM_NAMES,
    Debit,
    HoldAlreadyResolved,
    IdempotencyConflict,
    InsufficientBalance,
    record_declined,
    system_account,
)
from app.ledger.queries import (
    Credit,
    StatementLine,
    available_cents,
    balance_and_statement,
    balance_summary,
    declined_attempts,
    get_hold,
    held_cents,
    journal,
    journal_count,
    lease_credits,
    pending_holds,
    recognised_revenue_cents,
    statement,
    statement_count,
    topup_credits,
)
from app.ledger.receipts import receipt_of_entry, receipt_path, receipts_for_order, use_seller

__all__ = [
    "HOLD_IN_ONE",
    "MAX_CENTS",
    "SYSTEM_NAMES",
    "Credit",
    "CreditReason",
    "InvoiceLine",
    "LineError",
    "HoldAlreadyResolved",
    "HoldInOne",
    "IdempotencyConflict",
    "InsufficientBalance",
    "StatementLine",
    "adjust",
    "available_cents",
    "balance_and_statement",
    "balance_summary",
    "charge",
    "credit_topup",
    "credit_note_of_entry",
    "credit_note_path",
    "credit_notes_for_order",
    "credit_unused_days",
    "declined_attempts",
    "get_hold",
    "grant_promotion",
    "held_cents",
    "Debit",
    "hold_in_one_params",
    "hold_in_one_result",
    "journal",
    "journal_count",
    "lease_credits",
    "pending_holds",
    "place_hold",
    "place_hold_id",
    "post_hold",
    "receipt_of_entry",
    "receipt_path",
    "receipts_for_order",
    "recognised_revenue_cents",
    "record_declined",
    "statement",
    "statement_count",
    "system_account",
    "topup_credits",
    "use_seller",
    "void_hold",
]
