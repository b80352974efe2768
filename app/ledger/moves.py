"""The ledger's one write path and what every money command shares.

The customer's *available* account row is the per-customer mutex (``lock_customer``:
``SELECT … FOR UPDATE`` on PostgreSQL; SQLite writers are serialised by ``BEGIN
IMMEDIATE``). ``move`` applies one entry's legs: each debit is a conditional ``UPDATE …
WHERE balance_cents >= :a RETURNING balance_cents`` (no row back: ``Short``), then the
entry, its postings and its receipt. ``keyed_command`` is the sequence of every keyed
command (charge, promotion, lease credit, adjustment): lock, replay, move, bind the key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from app import errors
from app.errors import N_
from app.ledger import credit_notes, receipts
from app.ledger.invoicing import CreditReason, InvoiceLine, check_lines
from app.ledger.models import (
    DeclinedAttempt,
    IdempotencyRecord,
    JournalEntry,
    LedgerAccount,
    Posting,
)
from app.ledger.postings import AccountKind, EntryKind, SystemAccount, legs_for
from app.money import format_cents

SYSTEM_NAMES = {
    SystemAccount.crypto_receipts: N_("Crypto receipts"),
    SystemAccount.promotions: N_("Promotions"),
    SystemAccount.adjustments: N_("Manual adjustments"),
    SystemAccount.revenue: N_("Revenue"),
}


MAX_CENTS = 10**12  # US$10 billion: anything larger is a typo, not a payment


class InsufficientBalance(errors.InsufficientBalance):
    default_message = N_("Your balance is too low for this payment: {shortfall} more is needed.")

    def __init__(
        self, message: str | None = None, *, shortfall_cents: int, available_cents: int = 0
    ):
        self.shortfall_cents = shortfall_cents
        self.available_cents = available_cents
        super().__init__(
            message,
            shortfall=format_cents(shortfall_cents),
            shortfall_cents=shortfall_cents,
        )


class IdempotencyConflict(errors.Conflict):
    code = "idempotency_conflict"
    default_message = N_(
        "This request was already made with different details. Reload the page and try again."
    )


class HoldAlreadyResolved(errors.Conflict):
    code = "hold_already_resolved"
    default_message = N_("This reservation was already settled another way.")


class Debit(TypedDict):
    """What a keyed debit of a customer's balance names: a hold (``holds.place_hold``,
    ``place_hold_id``, ``hold_in_one_params``) and a charge (``commands.charge``) take
    these keywords."""

    user_id: int
    amount_cents: int
    idempotency_key: str
    now: datetime
    reason: str
    order_id: NotRequired[int | None]
    actor_id: NotRequired[int | None]


class Short(Exception):
    def __init__(self, available: int) -> None:
        self.available = available


def code_of(user_id: int, kind: AccountKind) -> str:
    return f"user:{user_id}:{kind.value}"


def system_account(session: Session, which: SystemAccount, now: datetime) -> LedgerAccount:
    acc = session.exec(select(LedgerAccount).where(LedgerAccount.code == which.value)).first()
    if acc is not None:
        return acc
    return create_account(
        session,
        LedgerAccount(
            code=which.value,
            kind=AccountKind.system.value,
            name=SYSTEM_NAMES[which],
            created_at=now,
        ),
    )


def create_account(session: Session, acc: LedgerAccount) -> LedgerAccount:
    """Insert an account, or return the one a concurrent transaction created first."""
    try:
        with session.begin_nested():
            session.add(acc)
            session.flush()
        return acc
    except IntegrityError:
        found = session.exec(select(LedgerAccount).where(LedgerAccount.code == acc.code)).first()
        assert found is not None
        return found


def find_account(
    session: Session, user_id: int, kind: AccountKind, lock: bool = False
) -> LedgerAccount | None:
    stmt = select(LedgerAccount).where(LedgerAccount.code == code_of(user_id, kind))
    if lock:
        stmt = stmt.with_for_update()
    return session.exec(stmt.execution_options(populate_existing=True)).first()


def lock_customer(
    session: Session, user_id: int, now: datetime, *, load_held: bool = True
) -> tuple[LedgerAccount, LedgerAccount | None]:
    """Lock the customer's available account (the per-customer mutex); create both if new.
    ``load_held=False``: the held account is not read (``move`` credits it by code)."""
    avail = find_account(session, user_id, AccountKind.available, lock=True)
    if avail is None:
        for kind in (AccountKind.available, AccountKind.held):
            create_account(
                session,
                LedgerAccount(
                    code=code_of(user_id, kind), kind=kind.value, user_id=user_id, created_at=now
                ),
            )
        avail = find_account(session, user_id, AccountKind.available, lock=True)
    assert avail is not None
    if not load_held:
        return avail, None
    held = find_account(session, user_id, AccountKind.held)
    assert held is not None
    return avail, held


def move(
    session: Session,
    kind: EntryKind,
    amount_cents: int,
    *,
    user_id: int,
    now: datetime,
    avail: LedgerAccount,
    held: LedgerAccount | None,
    before_entry: Any = None,
    lines: Sequence[InvoiceLine] = (),
    credit_reason: CreditReason | None = None,
    **entry_fields: Any,
) -> JournalEntry:
    """Apply the legs of one entry: balances (conditional debits) first, then the rows.

    ``held`` None: the customer's held account is not loaded (``lock_customer(...,
    load_held=False)``); a credit to it is one ``UPDATE … WHERE code = … RETURNING id``,
    a round trip fewer under the customer's lock. ``lines``: what the entry is for, copied
    into its receipt or credit note (they must add up to ``amount_cents``)."""
    check_lines(lines, abs(amount_cents))
    legs = legs_for(kind, amount_cents)
    resolved: list[tuple[int, int, int | None]] = []
    for leg in legs:
        if leg.account == AccountKind.available.value:
            acc: LedgerAccount | None = avail
        elif leg.account == AccountKind.held.value:
            acc = held
            if acc is None and leg.amount_cents > 0:
                resolved.append(
                    credit_by_code(session, user_id, AccountKind.held, leg.amount_cents)
                )
                continue
            if acc is None:
                acc = find_account(session, user_id, AccountKind.held)
                assert acc is not None
        else:
            system = system_account(session, SystemAccount(leg.account), now)
            assert system.id is not None
            resolved.append((system.id, leg.amount_cents, None))
            continue
        assert acc is not None and acc.id is not None
        stmt = (
            update(LedgerAccount)
            .where(col(LedgerAccount.id) == acc.id)
            .values(balance_cents=LedgerAccount.balance_cents + leg.amount_cents)
            .returning(col(LedgerAccount.balance_cents))
            .execution_options(synchronize_session=False)
        )
        if leg.amount_cents < 0:
            stmt = stmt.where(col(LedgerAccount.balance_cents) >= -leg.amount_cents)
        row = session.exec(stmt).first()  # type: ignore[call-overload]
        if row is None:
            current = find_account(session, user_id, AccountKind(acc.kind))
            raise Short(current.balance_cents if current else 0)
        session.expire(acc, ["balance_cents"])  # the UPDATE wrote it: read again when asked
        resolved.append((acc.id, leg.amount_cents, int(row[0])))
    extra = before_entry() if before_entry else {}
    entry = JournalEntry(
        kind=kind.value,
        user_id=user_id,
        amount_cents=abs(amount_cents),
        created_at=now,
        **{**entry_fields, **extra},
    )
    session.add(entry)
    session.flush()
    for account_id, amount, after in resolved:
        session.add(
            Posting(
                entry_id=entry.id,  # type: ignore[arg-type]
                account_id=account_id,
                amount_cents=amount,
                balance_after_cents=after,
                created_at=now,
            )
        )
    session.flush()
    # charges and top-ups get a receipt, refunds and credits a credit note: same transaction
    receipts.issue_for_entry(session, entry, now, lines)
    credit_notes.issue_for_entry(session, entry, now, lines, credit_reason)
    return entry


def credit_by_code(
    session: Session, user_id: int, kind: AccountKind, amount_cents: int
) -> tuple[int, int, int | None]:
    """Credit a customer account not loaded in the session: (id, amount, balance after)."""
    row = session.exec(  # type: ignore[call-overload]
        update(LedgerAccount)
        .where(col(LedgerAccount.code) == code_of(user_id, kind))
        .values(balance_cents=LedgerAccount.balance_cents + amount_cents)
        .returning(col(LedgerAccount.id), col(LedgerAccount.balance_cents))
        .execution_options(synchronize_session=False)
    ).one()
    account_id, after = int(row[0]), int(row[1])
    forget_loaded(session, account_id)
    return account_id, amount_cents, after


def forget_loaded(session: Session, account_id: int) -> None:
    """A copy of the account loaded earlier in this session reads its balance again (a
    plain UPDATE changed it behind the ORM)."""
    loaded = session.identity_map.get(session.identity_key(LedgerAccount, account_id))
    if loaded is not None:
        session.expire(loaded, ["balance_cents"])


def check_amount(amount_cents: int, *, signed: bool = False) -> None:
    if not isinstance(amount_cents, int) or isinstance(amount_cents, bool):
        raise errors.InvalidInput(N_("The amount must be a whole number of cents."), field="amount")
    if (amount_cents == 0) if signed else (amount_cents <= 0):
        raise errors.InvalidInput(N_("The amount must be more than zero."), field="amount")
    if abs(amount_cents) > MAX_CENTS:
        # the limit stated, as the forms state it (app.numbers' number.too_large)
        raise errors.InvalidInput(
            N_("Enter at most {max}."), field="amount", max=format_cents(MAX_CENTS, "en")
        )


def check_key(key: str) -> None:
    if not key or len(key) > 120:
        raise errors.InvalidInput(
            N_("A request key (1–120 characters) is required."), field="idempotency_key"
        )


def fingerprint(command: str, **params: Any) -> str:
    raw = json.dumps({"command": command, **params}, sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


def replay(
    session: Session, user_id: int, key: str, command: str, fingerprint: str
) -> IdempotencyRecord | None:
    rec = session.exec(
        select(IdempotencyRecord).where(
            IdempotencyRecord.user_id == user_id, IdempotencyRecord.key == key
        )
    ).first()
    if rec is None:
        return None
    if rec.command != command or rec.fingerprint != fingerprint:
        raise IdempotencyConflict()
    return rec


def open_command(
    session: Session,
    *,
    user_id: int,
    key: str,
    now: datetime,
    command: str,
    load_held: bool = True,
    **params: Any,
) -> tuple[LedgerAccount, LedgerAccount | None, str, IdempotencyRecord | None]:
    """The start of every keyed command: lock the customer, then look for a replay of the
    same key (same parameters → the first result; different → IdempotencyConflict)."""
    avail, held = lock_customer(session, user_id, now, load_held=load_held)
    fp = fingerprint(command, **params)
    return avail, held, fp, replay(session, user_id, key, command, fp)


def record_declined(
    session: Session,
    *,
    user_id: int,
    key: str,
    command: str,
    amount_cents: int,
    available: int,
    now: datetime,
    order_id: int | None,
    reason: str,
) -> InsufficientBalance:
    """Record a command refused for want of money and return the error to raise. Writes
    no hold and moves no money (the checkout records its refused hold again with this
    after the savepoint that held the attempt was rolled back)."""
    session.add(
        DeclinedAttempt(
            user_id=user_id,
            key=key,
            command=command,
            amount_cents=amount_cents,
            available_cents=available,
            order_id=order_id,
            reason=reason[:300],
            created_at=now,
        )
    )
    session.flush()
    return InsufficientBalance(shortfall_cents=amount_cents - available, available_cents=available)


def keyed_command(
    session: Session,
    *,
    command: str,
    kind: EntryKind,
    user_id: int,
    key: str,
    amount_cents: int,
    now: datetime,
    params: dict[str, Any],
    entry: dict[str, Any],
    declined_cents: int | None = None,
    order_id: int | None = None,
    reason: str = "",
    lines: Sequence[InvoiceLine] = (),
    credit_reason: CreditReason | None = None,
    signed: bool = False,
) -> tuple[JournalEntry, bool]:
    """Every keyed command's sequence: check the amount (``signed``: either sign, not
    zero) and the key, lock the customer, answer a replay of ``key`` with its first entry
    (another amount or other ``params`` → ``IdempotencyConflict``), move the money (a
    short balance is recorded as declined, ``declined_cents`` asked, and raised as
    ``InsufficientBalance``), bind the key to the new entry. Returns (entry, made now)."""
    check_amount(amount_cents, signed=signed)
    check_key(key)
    avail, held, fp, prior = open_command(
        session, user_id=user_id, key=key, now=now, command=command, amount=amount_cents, **params
    )
    if prior is not None:
        first = session.get(JournalEntry, prior.entry_id)
        assert first is not None
        return first, False
    try:
        made = move(
            session,
            kind,
            amount_cents,
            user_id=user_id,
            now=now,
            avail=avail,
            held=held,
            lines=lines,
            credit_reason=credit_reason,
            **entry,
        )
    except Short as s:
        raise record_declined(
            session,
            user_id=user_id,
            key=key,
            command=command,
            amount_cents=amount_cents if declined_cents is None else declined_cents,
            available=s.available,
            now=now,
            order_id=order_id,
            reason=reason,
        ) from None
    session.add(
        IdempotencyRecord(
            user_id=user_id,
            key=key,
            command=command,
            fingerprint=fp,
            entry_id=made.id,
            created_at=now,
        )
    )
    session.flush()
    return made, True
