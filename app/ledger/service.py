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
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import BigInteger, String, Table, bindparam, case, func, or_, text, update
from sqlalchemy import exists as sa_exists
from sqlalchemy import insert as sa_insert
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select

from app import errors
from app.db import is_postgres
from app.errors import N_
from app.ledger import receipts
from app.ledger.models import (
    DeclinedAttempt,
    Hold,
    IdempotencyRecord,
    JournalEntry,
    LedgerAccount,
    Posting,
)
from app.ledger.postings import (
    AccountKind,
    EntryKind,
    HoldStatus,
    SystemAccount,
    legs_for,
    resolve_transition,
)
from app.money import format_cents
from app.text import single_line

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


class _Short(Exception):
    def __init__(self, available: int) -> None:
        self.available = available


@dataclass(frozen=True)
class StatementLine:
    entry_id: int
    at: datetime
    kind: str
    reason: str
    available_delta: int
    held_delta: int
    available_after: int | None
    held_after: int | None
    order_id: int | None
    invoice_id: int | None
    hold_id: int | None
    quote_id: int | None
    crypto_currency: str
    crypto_amount: str
    rate: str
    actor_id: int | None


# --- accounts -----------------------------------------------------------------------------


def _code(user_id: int, kind: AccountKind) -> str:
    return f"user:{user_id}:{kind.value}"


def system_account(session: Session, which: SystemAccount, now: datetime) -> LedgerAccount:
    acc = session.exec(select(LedgerAccount).where(LedgerAccount.code == which.value)).first()
    if acc is not None:
        return acc
    return _create_account(
        session,
        LedgerAccount(
            code=which.value,
            kind=AccountKind.system.value,
            name=SYSTEM_NAMES[which],
            created_at=now,
        ),
    )


def _create_account(session: Session, acc: LedgerAccount) -> LedgerAccount:
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


def _find(
    session: Session, user_id: int, kind: AccountKind, lock: bool = False
) -> LedgerAccount | None:
    stmt = select(LedgerAccount).where(LedgerAccount.code == _code(user_id, kind))
    if lock:
        stmt = stmt.with_for_update()
    return session.exec(stmt.execution_options(populate_existing=True)).first()


def _lock_customer(
    session: Session, user_id: int, now: datetime, *, load_held: bool = True
) -> tuple[LedgerAccount, LedgerAccount | None]:
    """Lock the customer's available account (the per-customer mutex); create both if new.
    ``load_held=False``: the held account is not read (``_move`` credits it by code)."""
    avail = _find(session, user_id, AccountKind.available, lock=True)
    if avail is None:
        for kind in (AccountKind.available, AccountKind.held):
            _create_account(
                session,
                LedgerAccount(
                    code=_code(user_id, kind), kind=kind.value, user_id=user_id, created_at=now
                ),
            )
        avail = _find(session, user_id, AccountKind.available, lock=True)
    assert avail is not None
    if not load_held:
        return avail, None
    held = _find(session, user_id, AccountKind.held)
    assert held is not None
    return avail, held


# --- the one write path -------------------------------------------------------------------


def _move(
    session: Session,
    kind: EntryKind,
    amount_cents: int,
    *,
    user_id: int,
    now: datetime,
    avail: LedgerAccount,
    held: LedgerAccount | None,
    before_entry: Any = None,
    **entry_fields: Any,
) -> JournalEntry:
    """Apply the legs of one entry: balances (conditional debits) first, then the rows.

    ``held`` None: the customer's held account is not loaded (``_lock_customer(...,
    load_held=False)``); a credit to it is one ``UPDATE … WHERE code = … RETURNING id``,
    a round trip fewer under the customer's lock."""
    legs = legs_for(kind, amount_cents)
    resolved: list[tuple[int, int, int | None]] = []
    for leg in legs:
        if leg.account == AccountKind.available.value:
            acc: LedgerAccount | None = avail
        elif leg.account == AccountKind.held.value:
            acc = held
            if acc is None and leg.amount_cents > 0:
                resolved.append(
                    _credit_by_code(session, user_id, AccountKind.held, leg.amount_cents)
                )
                continue
            if acc is None:
                acc = _find(session, user_id, AccountKind.held)
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
            current = _find(session, user_id, AccountKind(acc.kind))
            raise _Short(current.balance_cents if current else 0)
        # The UPDATE already wrote it: record it as loaded, so no second UPDATE is flushed.
        set_committed_value(acc, "balance_cents", int(row[0]))
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
    receipts.issue_for_entry(session, entry, now)  # charges and top-ups: same transaction
    return entry


def _credit_by_code(
    session: Session, user_id: int, kind: AccountKind, amount_cents: int
) -> tuple[int, int, int | None]:
    """Credit a customer account not loaded in the session: (id, amount, balance after)."""
    row = session.exec(  # type: ignore[call-overload]
        update(LedgerAccount)
        .where(col(LedgerAccount.code) == _code(user_id, kind))
        .values(balance_cents=LedgerAccount.balance_cents + amount_cents)
        .returning(col(LedgerAccount.id), col(LedgerAccount.balance_cents))
        .execution_options(synchronize_session=False)
    ).one()
    account_id, after = int(row[0]), int(row[1])
    loaded = session.identity_map.get(session.identity_key(LedgerAccount, account_id))
    if loaded is not None:  # keep a copy loaded earlier in this session true
        set_committed_value(loaded, "balance_cents", after)
    return account_id, amount_cents, after


def _check_amount(amount_cents: int, *, signed: bool = False) -> None:
    if not isinstance(amount_cents, int) or isinstance(amount_cents, bool):
        raise errors.InvalidInput(N_("The amount must be a whole number of cents."), field="amount")
    if (amount_cents == 0) if signed else (amount_cents <= 0):
        raise errors.InvalidInput(N_("The amount must be more than zero."), field="amount")
    if abs(amount_cents) > MAX_CENTS:
        raise errors.InvalidInput(N_("The amount is too large."), field="amount")


def _check_key(key: str) -> None:
    if not key or len(key) > 120:
        raise errors.InvalidInput(
            N_("A request key (1–120 characters) is required."), field="idempotency_key"
        )


def _fingerprint(command: str, **params: Any) -> str:
    raw = json.dumps({"command": command, **params}, sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


def _replay(
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


def _open(
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
    avail, held = _lock_customer(session, user_id, now, load_held=load_held)
    fp = _fingerprint(command, **params)
    return avail, held, fp, _replay(session, user_id, key, command, fp)


def _decline(
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


# --- reads --------------------------------------------------------------------------------


def available_cents(session: Session, user_id: int) -> int:
    acc = _find(session, user_id, AccountKind.available)
    return acc.balance_cents if acc else 0


def held_cents(session: Session, user_id: int) -> int:
    acc = _find(session, user_id, AccountKind.held)
    return acc.balance_cents if acc else 0


def balance_summary(session: Session, user_id: int) -> tuple[int, int]:
    return available_cents(session, user_id), held_cents(session, user_id)


def get_hold(session: Session, hold_id: int) -> Hold | None:
    return session.get(Hold, hold_id)


def statement(
    session: Session, user_id: int, limit: int = 50, offset: int = 0
) -> list[StatementLine]:
    """The customer's entries, newest first, with the change to available and held."""
    entries = list(
        session.exec(
            select(JournalEntry)
            .where(JournalEntry.user_id == user_id)
            .order_by(col(JournalEntry.id).desc())
            .limit(max(1, min(limit, 500)))
            .offset(max(0, offset))
        )
    )
    if not entries:
        return []
    avail = _find(session, user_id, AccountKind.available)
    held = _find(session, user_id, AccountKind.held)
    ids = [e.id for e in entries]
    acc_ids = {a.id: a.kind for a in (avail, held) if a is not None}
    postings = session.exec(
        select(Posting).where(
            col(Posting.entry_id).in_(ids), col(Posting.account_id).in_(list(acc_ids))
        )
    ).all()
    by_entry: dict[int, dict[str, Posting]] = {}
    for p in postings:
        by_entry.setdefault(p.entry_id, {})[acc_ids[p.account_id]] = p
    lines = []
    for e in entries:
        ps = by_entry.get(e.id or 0, {})
        a, h = ps.get("available"), ps.get("held")
        lines.append(
            StatementLine(
                entry_id=e.id or 0,
                at=e.created_at,
                kind=e.kind,
                reason=e.reason,
                available_delta=a.amount_cents if a else 0,
                held_delta=h.amount_cents if h else 0,
                available_after=a.balance_after_cents if a else None,
                held_after=h.balance_after_cents if h else None,
                order_id=e.order_id,
                invoice_id=e.invoice_id,
                hold_id=e.hold_id,
                quote_id=e.quote_id,
                crypto_currency=e.crypto_currency,
                crypto_amount=e.crypto_amount,
                rate=e.rate,
                actor_id=e.actor_id,
            )
        )
    return lines


def pending_holds(session: Session, user_id: int) -> list[Hold]:
    """What makes up the customer's on-hold balance."""
    return list(
        session.exec(
            select(Hold)
            .where(Hold.user_id == user_id, Hold.status == HoldStatus.pending.value)
            .order_by(col(Hold.id))
        )
    )


def declined_attempts(session: Session, user_id: int, limit: int = 20) -> list[DeclinedAttempt]:
    return list(
        session.exec(
            select(DeclinedAttempt)
            .where(DeclinedAttempt.user_id == user_id)
            .order_by(col(DeclinedAttempt.id).desc())
            .limit(limit)
        )
    )


def statement_count(session: Session, user_id: int) -> int:
    return int(
        session.exec(
            select(func.count()).select_from(JournalEntry).where(JournalEntry.user_id == user_id)
        ).one()
    )


def balance_and_statement(
    session: Session, user_id: int, limit: int = 50, offset: int = 0
) -> tuple[int, int, list[StatementLine]]:
    """``balance_summary`` and ``statement`` in two plain reads (no ORM objects): the two
    accounts by code, then the page of entries with their postings to those accounts (the
    JSON balance answered in six statements)."""
    codes = {_code(user_id, k): k.value for k in (AccountKind.available, AccountKind.held)}
    acc = LedgerAccount.__table__.c  # type: ignore[attr-defined]
    kinds: dict[int, str] = {}
    balance = {"available": 0, "held": 0}
    for acc_id, code, cents in session.execute(
        sa_select(acc.id, acc.code, acc.balance_cents).where(acc.code.in_(list(codes)))
    ):
        kinds[acc_id] = codes[code]
        balance[codes[code]] = int(cents)
    entry_t: Table = JournalEntry.__table__  # type: ignore[attr-defined]
    posting_t: Table = Posting.__table__  # type: ignore[attr-defined]
    e, p = entry_t.c, posting_t.c
    page = (
        sa_select(e.id)
        .where(e.user_id == user_id)
        .order_by(e.id.desc())
        .limit(max(1, min(limit, 500)))
        .offset(max(0, offset))
        .subquery()
    )
    rows = session.execute(
        sa_select(
            e.id,
            e.created_at,
            e.kind,
            e.reason,
            e.order_id,
            e.invoice_id,
            e.hold_id,
            e.quote_id,
            e.crypto_currency,
            e.crypto_amount,
            e.rate,
            e.actor_id,
            p.account_id,
            p.amount_cents,
            p.balance_after_cents,
        )
        .select_from(
            entry_t.join(page, page.c.id == e.id).outerjoin(
                posting_t, (p.entry_id == e.id) & p.account_id.in_(list(kinds) or [0])
            )
        )
        .order_by(e.id.desc())
    ).all()
    entries: dict[int, Any] = {}  # entry id → its row (rows come newest first)
    moved: dict[tuple[int, str], tuple[int, int | None]] = {}  # (entry, kind) → delta, after
    for r in rows:
        entries.setdefault(r[0], r)
        if r[12] is not None:
            moved[(r[0], kinds[r[12]])] = (r[13], r[14])
    lines = []
    for eid, r in entries.items():
        a_delta, a_after = moved.get((eid, "available"), (0, None))
        h_delta, h_after = moved.get((eid, "held"), (0, None))
        lines.append(
            StatementLine(
                entry_id=eid,
                at=r[1],
                kind=r[2],
                reason=r[3],
                available_delta=a_delta,
                held_delta=h_delta,
                available_after=a_after,
                held_after=h_after,
                order_id=r[4],
                invoice_id=r[5],
                hold_id=r[6],
                quote_id=r[7],
                crypto_currency=r[8],
                crypto_amount=r[9],
                rate=r[10],
                actor_id=r[11],
            )
        )
    return balance["available"], balance["held"], lines


# --- commands -----------------------------------------------------------------------------


def record_declined_hold(
    session: Session,
    *,
    user_id: int,
    key: str,
    amount_cents: int,
    available: int,
    now: datetime,
    order_id: int | None,
    reason: str,
) -> InsufficientBalance:
    """Record a hold refused for want of money (when the attempt itself was rolled back with
    a savepoint) and return the error to raise. Writes no hold and moves no money."""
    return _decline(
        session,
        user_id=user_id,
        key=key,
        command="hold",
        amount_cents=amount_cents,
        available=available,
        now=now,
        order_id=order_id,
        reason=reason,
    )


def place_hold(
    session: Session,
    *,
    user_id: int,
    amount_cents: int,
    idempotency_key: str,
    now: datetime,
    reason: str,
    order_id: int | None = None,
    actor_id: int | None = None,
) -> Hold:
    """Reserve money: it leaves *available* at once. Raises ``InsufficientBalance``."""
    hold_id = place_hold_id(
        session,
        user_id=user_id,
        amount_cents=amount_cents,
        idempotency_key=idempotency_key,
        now=now,
        reason=reason,
        order_id=order_id,
        actor_id=actor_id,
    )
    hold = session.get(Hold, hold_id)
    assert hold is not None
    return hold


def _table(model: Any) -> Table:
    return cast(Table, model.__table__)


_ACC = _table(LedgerAccount)
_IDEM = _table(IdempotencyRecord)
_HOLDS = _table(Hold)
_ENTRIES = _table(JournalEntry)
_POSTINGS = _table(Posting)
# The hold's statements, built once (plain Core: no ORM objects, no unit-of-work flush).
_LOCK_AVAILABLE = (
    sa_select(_ACC.c.id, _ACC.c.balance_cents)
    .where(_ACC.c.code == bindparam("code"))
    .with_for_update()
)
_PRIOR = sa_select(_IDEM.c.command, _IDEM.c.fingerprint, _IDEM.c.hold_id).where(
    _IDEM.c.user_id == bindparam("uid"), _IDEM.c.key == bindparam("key")
)
_AVAIL_CODE = bindparam("avail_code", type_=String)
_AMOUNT = bindparam("amount", type_=BigInteger)
# available -a and held +a in one statement; the debit stays conditional (never negative),
# and nothing moves when the key has a record already (read in this statement, i.e. after
# the available row was locked: a concurrent command with the same key has committed)
_HOLD_BALANCES = (
    update(_ACC)
    .where(
        _ACC.c.code.in_([_AVAIL_CODE, bindparam("held_code", type_=String)]),
        or_(_ACC.c.code != _AVAIL_CODE, _ACC.c.balance_cents >= _AMOUNT),
        ~sa_exists().where(_IDEM.c.user_id == bindparam("uid"), _IDEM.c.key == bindparam("key")),
    )
    .values(
        balance_cents=_ACC.c.balance_cents
        + case((_ACC.c.code == _AVAIL_CODE, -_AMOUNT), else_=_AMOUNT)
    )
    .returning(_ACC.c.id, _ACC.c.code, _ACC.c.balance_cents)
)
_INSERT_HOLD = sa_insert(_HOLDS).returning(_HOLDS.c.id)
_INSERT_ENTRY = sa_insert(_ENTRIES).returning(_ENTRIES.c.id)
_SET_HOLD_ENTRY = (
    update(_HOLDS).where(_HOLDS.c.id == bindparam("hid")).values(entry_id=bindparam("eid"))
)


def _keep_loaded_true(session: Session, account_id: int, balance: int) -> None:
    """A copy of the account loaded earlier in this session shows the balance just written."""
    loaded = session.identity_map.get(session.identity_key(LedgerAccount, account_id))
    if loaded is not None:
        set_committed_value(loaded, "balance_cents", balance)


def place_hold_id(
    session: Session,
    *,
    user_id: int,
    amount_cents: int,
    idempotency_key: str,
    now: datetime,
    reason: str,
    order_id: int | None = None,
    actor_id: int | None = None,
) -> int:
    """``place_hold``, returning the hold's id (the checkout needs no more): the same rules
    in plain statements — the customer's available row locked, the key looked up under the
    lock, both balances in one conditional UPDATE, then the hold, entry, postings and the
    idempotency record. The key is looked up by the UPDATE itself (it moves nothing when
    the key was used; then the record is read and replayed), or, when the locked balance
    is short, by a read of its own before declining."""
    _check_amount(amount_cents)
    _check_key(idempotency_key)
    avail_code, held_code = _code(user_id, AccountKind.available), _code(user_id, AccountKind.held)
    row = session.connection().execute(_LOCK_AVAILABLE, {"code": avail_code}).first()
    if row is None:  # a customer's first money command: create the accounts (rare path)
        _lock_customer(session, user_id, now, load_held=False)
        row = session.connection().execute(_LOCK_AVAILABLE, {"code": avail_code}).first()
        assert row is not None
    available = int(row[1])
    fp = _fingerprint("hold", amount=amount_cents, order_id=order_id)
    if available < amount_cents:  # the row is locked: this is the balance the UPDATE sees
        prior = _replay_hold(session, user_id, idempotency_key, fp)
        if prior is not None:  # a replay is answered, not declined
            return prior
        raise _decline(
            session,
            user_id=user_id,
            key=idempotency_key,
            command="hold",
            amount_cents=amount_cents,
            available=available,
            now=now,
            order_id=order_id,
            reason=reason,
        )
    conn = session.connection()
    after = {
        r[1]: (int(r[0]), int(r[2]))
        for r in conn.execute(
            _HOLD_BALANCES,
            {
                "avail_code": avail_code,
                "held_code": held_code,
                "amount": amount_cents,
                "uid": user_id,
                "key": idempotency_key,
            },
        )
    }
    if not after:  # the key has a record: nothing moved
        prior = _replay_hold(session, user_id, idempotency_key, fp)
        if prior is not None:
            return prior
    if set(after) != {avail_code, held_code}:  # pragma: no cover - the locked row had enough
        raise errors.Conflict()
    for account_id, balance in after.values():
        _keep_loaded_true(session, account_id, balance)
    legs = {leg.account: leg.amount_cents for leg in legs_for(EntryKind.hold, amount_cents)}
    postings = [
        {
            "account_id": after[code][0],
            "amount_cents": legs[kind.value],
            "balance_after_cents": after[code][1],
        }
        for code, kind in ((avail_code, AccountKind.available), (held_code, AccountKind.held))
    ]
    rows = {
        "user_id": user_id,
        "amount": amount_cents,
        "reason": reason[:300],
        "order_id": order_id,
        "key": idempotency_key,
        "actor_id": actor_id,
        "fp": fp,
        "now": now,
    }
    if is_postgres(session):
        return _write_hold_pg(session, rows, postings)
    return _write_hold(session, rows, postings)


def _replay_hold(session: Session, user_id: int, key: str, fp: str) -> int | None:
    """The hold an earlier ``place_hold`` with this key made (None when the key is unused);
    ``IdempotencyConflict`` when the key was used for another command or amount."""
    prior = session.connection().execute(_PRIOR, {"uid": user_id, "key": key}).first()
    if prior is None:
        return None
    if prior[0] != "hold" or prior[1] != fp:
        raise IdempotencyConflict()
    return int(prior[2])


# The hold's own rows as CTEs over ``ids`` (columns ``hid`` and ``eid``, drawn first so the
# hold and its entry point at each other without a second UPDATE): the hold and its entry
# (``hd``, ``e``) and the idempotency record (``i``). Shared by both PostgreSQL statements
# below, which differ in where ``ids`` and the postings' accounts come from.
_HOLD_ROWS_PG = """hd AS (
  INSERT INTO ledger_holds (id, user_id, amount_cents, status, reason, order_id,
                            idempotency_key, entry_id, resolve_reason, created_at, actor_id)
  SELECT hid, CAST(:user_id AS INTEGER), CAST(:amount AS BIGINT), 'pending',
         CAST(:reason AS VARCHAR), CAST(:order_id AS INTEGER), CAST(:key AS VARCHAR), eid, '',
         CAST(:now AS TIMESTAMPTZ), CAST(:actor_id AS INTEGER)
  FROM ids
), e AS (
  INSERT INTO ledger_entries (id, kind, reason, user_id, order_id, hold_id, actor_id,
                              crypto_currency, crypto_amount, rate, amount_cents, created_at)
  SELECT eid, 'hold', CAST(:reason AS VARCHAR), CAST(:user_id AS INTEGER),
         CAST(:order_id AS INTEGER), hid, CAST(:actor_id AS INTEGER), '', '', '',
         CAST(:amount AS BIGINT), CAST(:now AS TIMESTAMPTZ)
  FROM ids
), i AS (
  INSERT INTO ledger_idempotency (user_id, key, command, fingerprint, hold_id, entry_id,
                                  created_at)
  SELECT CAST(:user_id AS INTEGER), CAST(:key AS VARCHAR), 'hold', CAST(:fp AS VARCHAR),
         hid, eid, CAST(:now AS TIMESTAMPTZ)
  FROM ids
)"""

# PostgreSQL: the hold, its entry, both postings and the idempotency record in ONE statement
# (the postings' foreign key to the entry is checked at the end of the statement); the
# balances were updated by the caller under its row lock.
_HOLD_WRITES_PG = text(
    """
WITH ids AS (
  SELECT nextval(pg_get_serial_sequence('ledger_holds', 'id'))::INTEGER AS hid,
         nextval(pg_get_serial_sequence('ledger_entries', 'id'))::INTEGER AS eid
), """
    + _HOLD_ROWS_PG
    + """, p AS (
  INSERT INTO ledger_postings (entry_id, account_id, amount_cents, balance_after_cents,
                               created_at)
  SELECT eid, v.account_id, v.amount_cents, v.after_cents, CAST(:now AS TIMESTAMPTZ)
  FROM ids, (VALUES
    (CAST(:a_account AS INTEGER), CAST(:a_amount AS BIGINT), CAST(:a_after AS BIGINT)),
    (CAST(:h_account AS INTEGER), CAST(:h_amount AS BIGINT), CAST(:h_after AS BIGINT))
  ) AS v (account_id, amount_cents, after_cents)
)
SELECT hid FROM ids
"""
)


def _write_hold_pg(session: Session, rows: dict[str, Any], postings: list[dict[str, Any]]) -> int:
    a, h = postings
    params = {
        **rows,
        "a_account": a["account_id"],
        "a_amount": a["amount_cents"],
        "a_after": a["balance_after_cents"],
        "h_account": h["account_id"],
        "h_amount": h["amount_cents"],
        "h_after": h["balance_after_cents"],
    }
    return int(session.connection().execute(_HOLD_WRITES_PG, params).scalar_one())


# PostgreSQL, the checkout's hold in ONE statement with no lock read before it: the
# available row debited only when it covers the amount and the key is unused (a row lock
# taken by the UPDATE itself; PostgreSQL re-checks ``balance_cents >= amount`` on the row
# as it is once locked, so money never goes negative), the held row credited only when the
# debit happened, then the hold, its entry, both postings, the idempotency record and the
# caller's own rows (``also``: CTEs that read ``ids``, so they are written only with the
# hold). When the debit does not happen (short, key used, no accounts yet) nothing is
# written and ``place_hold_with`` takes the locked path of ``place_hold_id``.
_HOLD_ONE_PG_HEAD = (
    """
WITH a AS (
  UPDATE ledger_accounts SET balance_cents = balance_cents - CAST(:amount AS BIGINT)
  WHERE code = CAST(:avail_code AS VARCHAR) AND balance_cents >= CAST(:amount AS BIGINT)
    AND NOT EXISTS (SELECT 1 FROM ledger_idempotency
                    WHERE user_id = CAST(:user_id AS INTEGER) AND key = CAST(:key AS VARCHAR))
  RETURNING id, balance_cents
), h AS (
  UPDATE ledger_accounts SET balance_cents = balance_cents + CAST(:amount AS BIGINT)
  WHERE code = CAST(:held_code AS VARCHAR) AND EXISTS (SELECT 1 FROM a)
  RETURNING id, balance_cents
), ids AS (
  SELECT nextval(pg_get_serial_sequence('ledger_holds', 'id'))::INTEGER AS hid,
         nextval(pg_get_serial_sequence('ledger_entries', 'id'))::INTEGER AS eid,
         a.id AS a_id, a.balance_cents AS a_after, h.id AS h_id, h.balance_cents AS h_after
  FROM a, h
), """
    + _HOLD_ROWS_PG
    + """, p AS (
  INSERT INTO ledger_postings (entry_id, account_id, amount_cents, balance_after_cents,
                               created_at)
  SELECT eid, v.account_id, v.amount_cents, v.after_cents, CAST(:now AS TIMESTAMPTZ)
  FROM ids, LATERAL (VALUES (a_id, CAST(:a_amount AS BIGINT), a_after),
                            (h_id, CAST(:h_amount AS BIGINT), h_after)
  ) AS v (account_id, amount_cents, after_cents)
)"""
)
_HOLD_ONE_PG_TAIL = """
SELECT ids.hid, ids.a_id, ids.a_after, ids.h_id, ids.h_after, (SELECT count(*) FROM a)
FROM (SELECT 1) AS one LEFT JOIN ids ON true
"""
_HOLD_ONE_PG: dict[Any, Any] = {}


def place_hold_with(
    session: Session,
    *,
    user_id: int,
    amount_cents: int,
    idempotency_key: str,
    now: datetime,
    reason: str,
    order_id: int | None = None,
    actor_id: int | None = None,
    also: tuple[tuple[str, str], ...] = (),
    also_params: dict[str, Any] | None = None,
) -> tuple[int, bool]:
    """``place_hold_id`` for a caller that serialises the key itself (the checkout: the
    order's row is locked, or new in this transaction), with the caller's rows written in
    the same statement: ``also`` are ``(name, SQL)`` CTEs that select ``FROM ids`` (columns
    ``hid``, the new hold's id, and ``eid``), ``also_params`` their parameters (built once
    per ``also``: their text must not vary per call). Returns (hold id, whether ``also``
    was written). On PostgreSQL a usual hold is ONE statement; a short balance, a used key
    or a customer without accounts takes the locked path (nothing of ``also`` written).
    Elsewhere it is ``place_hold_id``."""
    _check_amount(amount_cents)
    _check_key(idempotency_key)
    if not is_postgres(session):
        return _place_hold_kw(
            session, user_id, amount_cents, idempotency_key, now, reason, order_id, actor_id
        ), False
    stmt = _HOLD_ONE_PG.get(also)
    if stmt is None:
        tail = "".join(f",\n{name} AS ({sql})" for name, sql in also)
        sql = " ".join((_HOLD_ONE_PG_HEAD + tail + _HOLD_ONE_PG_TAIL).split())
        stmt = _HOLD_ONE_PG[also] = text(sql)  # compact: psycopg caches texts under 4 KiB
    legs = {leg.account: leg.amount_cents for leg in legs_for(EntryKind.hold, amount_cents)}
    params = {
        **(also_params or {}),
        "user_id": user_id,
        "amount": amount_cents,
        "avail_code": _code(user_id, AccountKind.available),
        "held_code": _code(user_id, AccountKind.held),
        "reason": reason[:300],
        "order_id": order_id,
        "key": idempotency_key,
        "actor_id": actor_id,
        "fp": _fingerprint("hold", amount=amount_cents, order_id=order_id),
        "now": now,
        "a_amount": legs[AccountKind.available.value],
        "h_amount": legs[AccountKind.held.value],
    }
    hid, a_id, a_after, h_id, h_after, debited = session.connection().execute(stmt, params).one()
    if hid is None:
        if debited:  # pragma: no cover - the held account is made with the available one
            raise errors.Conflict()
        return _place_hold_kw(
            session, user_id, amount_cents, idempotency_key, now, reason, order_id, actor_id
        ), False
    _keep_loaded_true(session, int(a_id), int(a_after))
    _keep_loaded_true(session, int(h_id), int(h_after))
    return int(hid), True


def _place_hold_kw(
    session: Session,
    user_id: int,
    amount_cents: int,
    key: str,
    now: datetime,
    reason: str,
    order_id: int | None,
    actor_id: int | None,
) -> int:
    return place_hold_id(
        session,
        user_id=user_id,
        amount_cents=amount_cents,
        idempotency_key=key,
        now=now,
        reason=reason,
        order_id=order_id,
        actor_id=actor_id,
    )


def _write_hold(session: Session, rows: dict[str, Any], postings: list[dict[str, Any]]) -> int:
    """The same rows as ``_HOLD_WRITES_PG``, one plain statement each (SQLite)."""
    conn = session.connection()
    hold_id = int(
        conn.execute(
            _INSERT_HOLD,
            {
                "user_id": rows["user_id"],
                "amount_cents": rows["amount"],
                "status": HoldStatus.pending.value,
                "reason": rows["reason"],
                "order_id": rows["order_id"],
                "idempotency_key": rows["key"],
                "created_at": rows["now"],
                "actor_id": rows["actor_id"],
                "resolve_reason": "",
            },
        ).scalar_one()
    )
    entry_id = int(
        conn.execute(
            _INSERT_ENTRY,
            {
                "kind": EntryKind.hold.value,
                "reason": rows["reason"],
                "user_id": rows["user_id"],
                "order_id": rows["order_id"],
                "hold_id": hold_id,
                "actor_id": rows["actor_id"],
                "crypto_currency": "",
                "crypto_amount": "",
                "rate": "",
                "amount_cents": rows["amount"],
                "created_at": rows["now"],
            },
        ).scalar_one()
    )
    conn.execute(
        sa_insert(_POSTINGS).values(
            [{**p, "entry_id": entry_id, "created_at": rows["now"]} for p in postings]
        )
    )
    conn.execute(_SET_HOLD_ENTRY, {"hid": hold_id, "eid": entry_id})
    conn.execute(
        sa_insert(_IDEM),
        {
            "user_id": rows["user_id"],
            "key": rows["key"],
            "command": "hold",
            "fingerprint": rows["fp"],
            "hold_id": hold_id,
            "entry_id": entry_id,
            "created_at": rows["now"],
        },
    )
    return hold_id


def _resolve(
    session: Session,
    hold_id: int,
    wanted: HoldStatus,
    *,
    now: datetime,
    reason: str,
    actor_id: int | None,
) -> JournalEntry:
    hold = session.get(Hold, hold_id)
    if hold is None:
        raise errors.NotFound(N_("No such reservation."))
    avail, held = _lock_customer(session, hold.user_id, now)
    session.refresh(hold)  # re-read under the customer's lock
    outcome = resolve_transition(HoldStatus(hold.status), wanted)
    if outcome == "replay":
        first = session.get(JournalEntry, hold.resolve_entry_id)
        assert first is not None
        return first
    if outcome == "conflict":
        raise HoldAlreadyResolved()
    res = session.exec(  # type: ignore[call-overload]
        update(Hold)
        .where(col(Hold.id) == hold_id, col(Hold.status) == HoldStatus.pending.value)
        .values(
            status=wanted.value, resolved_at=now, resolved_by=actor_id, resolve_reason=reason[:300]
        )
        .execution_options(synchronize_session=False)
    )
    if res.rowcount != 1:  # pragma: no cover - impossible under the customer's lock
        raise HoldAlreadyResolved()
    kind = EntryKind.hold_post if wanted is HoldStatus.posted else EntryKind.hold_void
    try:
        entry = _move(
            session,
            kind,
            hold.amount_cents,
            user_id=hold.user_id,
            now=now,
            avail=avail,
            held=held,
            reason=reason[:300] or hold.reason,
            order_id=hold.order_id,
            hold_id=hold.id,
            resolves_hold_id=hold.id,
            actor_id=actor_id,
        )
    except _Short:  # pragma: no cover - the held account always covers its pending holds
        raise errors.Conflict(N_("The reservation does not match the held balance.")) from None
    session.refresh(hold)
    hold.resolve_entry_id = entry.id
    session.add(hold)
    session.flush()
    return entry


def post_hold(
    session: Session, hold_id: int, *, now: datetime, actor_id: int | None = None
) -> JournalEntry:
    """Capture a pending hold (held → revenue). Same call again: returns the first entry."""
    return _resolve(session, hold_id, HoldStatus.posted, now=now, reason="", actor_id=actor_id)


def void_hold(
    session: Session, hold_id: int, *, now: datetime, reason: str, actor_id: int | None = None
) -> JournalEntry:
    """Release a pending hold back to available (a full refund of the reservation)."""
    return _resolve(session, hold_id, HoldStatus.voided, now=now, reason=reason, actor_id=actor_id)


def charge(
    session: Session,
    *,
    user_id: int,
    amount_cents: int,
    idempotency_key: str,
    now: datetime,
    reason: str,
    order_id: int | None = None,
    actor_id: int | None = None,
) -> JournalEntry:
    """A direct debit (available → revenue), e.g. a monthly renewal."""
    _check_amount(amount_cents)
    _check_key(idempotency_key)
    avail, held, fp, prior = _open(
        session,
        user_id=user_id,
        key=idempotency_key,
        now=now,
        command="charge",
        amount=amount_cents,
        order_id=order_id,
    )
    if prior is not None:
        entry = session.get(JournalEntry, prior.entry_id)
        assert entry is not None
        return entry
    try:
        entry = _move(
            session,
            EntryKind.charge,
            amount_cents,
            user_id=user_id,
            now=now,
            avail=avail,
            held=held,
            reason=reason[:300],
            order_id=order_id,
            actor_id=actor_id,
        )
    except _Short as s:
        raise _decline(
            session,
            user_id=user_id,
            key=idempotency_key,
            command="charge",
            amount_cents=amount_cents,
            available=s.available,
            now=now,
            order_id=order_id,
            reason=reason,
        ) from None
    session.add(
        IdempotencyRecord(
            user_id=user_id,
            key=idempotency_key,
            command="charge",
            fingerprint=fp,
            entry_id=entry.id,
            created_at=now,
        )
    )
    session.flush()
    return entry


def credit_topup(
    session: Session,
    *,
    user_id: int,
    amount_cents: int,
    invoice_id: int,
    now: datetime,
    crypto_amount: int | str,
    currency: str,
    rate: str,
    reason: str = "",
) -> JournalEntry:
    """Credit a settled top-up invoice, at most once per invoice id (unique in the DB).

    A second call for the same invoice returns the first entry when it agrees, and raises
    ``Conflict`` when it does not (a bug upstream, never a second credit).
    """
    _check_amount(amount_cents)
    avail, held = _lock_customer(session, user_id, now)
    first = session.exec(
        select(JournalEntry).where(JournalEntry.credit_invoice_id == invoice_id)
    ).first()
    if first is not None:
        if first.user_id != user_id or first.amount_cents != amount_cents:
            raise errors.Conflict(N_("This invoice was already credited with a different amount."))
        return first
    return _move(
        session,
        EntryKind.topup,
        amount_cents,
        user_id=user_id,
        now=now,
        avail=avail,
        held=held,
        reason=reason[:300] or "crypto top-up",
        invoice_id=invoice_id,
        credit_invoice_id=invoice_id,
        crypto_currency=currency,
        crypto_amount=str(int(crypto_amount)),
        rate=str(rate),
    )


def grant_promotion(
    session: Session,
    *,
    user_id: int,
    amount_cents: int,
    reason: str,
    now: datetime,
    idempotency_key: str,
    actor_id: int | None = None,
) -> JournalEntry:
    """Credit from the promotions account (demo balance, goodwill credits)."""
    _check_amount(amount_cents)
    _check_key(idempotency_key)
    avail, held, fp, prior = _open(
        session,
        user_id=user_id,
        key=idempotency_key,
        now=now,
        command="promotion",
        amount=amount_cents,
    )
    if prior is not None:
        entry = session.get(JournalEntry, prior.entry_id)
        assert entry is not None
        return entry
    entry = _move(
        session,
        EntryKind.promotion,
        amount_cents,
        user_id=user_id,
        now=now,
        avail=avail,
        held=held,
        reason=reason[:300],
        actor_id=actor_id,
    )
    session.add(
        IdempotencyRecord(
            user_id=user_id,
            key=idempotency_key,
            command="promotion",
            fingerprint=fp,
            entry_id=entry.id,
            created_at=now,
        )
    )
    session.flush()
    return entry


def credit_unused_days(
    session: Session,
    *,
    user_id: int,
    order_id: int,
    amount_cents: int,
    days: int,
    now: datetime,
    actor_id: int | None = None,
) -> JournalEntry:
    """Give back the unused whole days of a lease that ops ended early (revenue →
    available), as an entry named for the order. Once per order: a replay returns the
    first entry; a different amount for the same order is an IdempotencyConflict."""
    _check_amount(amount_cents)
    key = f"lease-credit:{order_id}"
    avail, held, fp, prior = _open(
        session,
        user_id=user_id,
        key=key,
        now=now,
        command="lease_credit",
        amount=amount_cents,
        order_id=order_id,
    )
    if prior is not None:
        entry = session.get(JournalEntry, prior.entry_id)
        assert entry is not None
        return entry
    entry = _move(
        session,
        EntryKind.lease_credit,
        amount_cents,
        user_id=user_id,
        now=now,
        avail=avail,
        held=held,
        reason=f"order #{order_id}: {days} unused days credited (lease ended early)",
        order_id=order_id,
        actor_id=actor_id,
    )
    session.add(
        IdempotencyRecord(
            user_id=user_id,
            key=key,
            command="lease_credit",
            fingerprint=fp,
            entry_id=entry.id,
            created_at=now,
        )
    )
    session.flush()
    return entry


def adjust(
    session: Session,
    *,
    user_id: int,
    amount_cents: int,
    reason: str,
    actor: Any,
    now: datetime,
    idempotency_key: str,
    ip: str = "",
    corrects_entry_id: int | None = None,
) -> JournalEntry:
    """An ops correction against ``system:adjustments`` (signed; a debit cannot overdraw)."""
    from app.accounts import audit

    _check_amount(amount_cents, signed=True)
    _check_key(idempotency_key)
    reason = single_line(reason)
    if not reason:
        raise errors.InvalidInput(N_("A reason is required."), field="reason")
    if getattr(actor, "id", None) is None:
        raise errors.Forbidden()
    if corrects_entry_id is not None:
        target = session.get(JournalEntry, corrects_entry_id)
        if target is None or target.user_id != user_id:
            raise errors.InvalidInput(
                N_("That entry is not one of this customer's."), field="corrects_entry_id"
            )
    avail, held, fp, prior = _open(
        session,
        user_id=user_id,
        key=idempotency_key,
        now=now,
        command="adjust",
        amount=amount_cents,
        reason=reason,
        corrects=corrects_entry_id,
    )
    if prior is not None:
        entry = session.get(JournalEntry, prior.entry_id)
        assert entry is not None
        return entry
    try:
        entry = _move(
            session,
            EntryKind.adjustment,
            amount_cents,
            user_id=user_id,
            now=now,
            avail=avail,
            held=held,
            reason=reason[:300],
            actor_id=actor.id,
            corrects_entry_id=corrects_entry_id,
        )
    except _Short as s:
        raise _decline(
            session,
            user_id=user_id,
            key=idempotency_key,
            command="adjust",
            amount_cents=-amount_cents,
            available=s.available,
            now=now,
            order_id=None,
            reason=reason,
        ) from None
    session.add(
        IdempotencyRecord(
            user_id=user_id,
            key=idempotency_key,
            command="adjust",
            fingerprint=fp,
            entry_id=entry.id,
            created_at=now,
        )
    )
    audit.record(
        session,
        action="ledger.adjust",
        now=now,
        actor=actor,
        target=f"user:{user_id}",
        ip=ip,
        amount_cents=amount_cents,
        reason=reason,
        entry_id=entry.id,
    )
    session.flush()
    return entry


def journal(
    session: Session, limit: int = 50, offset: int = 0
) -> list[tuple[JournalEntry, list[tuple[Posting, LedgerAccount]]]]:
    """Staff: the whole journal, newest first, each entry with its postings."""
    entries = list(
        session.exec(
            select(JournalEntry).order_by(col(JournalEntry.id).desc()).limit(limit).offset(offset)
        )
    )
    ids = [e.id for e in entries]
    rows = session.exec(
        select(Posting, LedgerAccount)
        .join(LedgerAccount, col(LedgerAccount.id) == Posting.account_id)
        .where(col(Posting.entry_id).in_(ids))
        .order_by(col(Posting.id))
    ).all()
    by: dict[int, list[tuple[Posting, LedgerAccount]]] = {}
    for p, a in rows:
        by.setdefault(p.entry_id, []).append((p, a))
    return [(e, by.get(e.id or 0, [])) for e in entries]


def journal_count(session: Session) -> int:
    return int(session.exec(select(func.count()).select_from(JournalEntry)).one())


def recognised_revenue_cents(session: Session) -> int:
    """Money recognised so far: posted first months (hold_post) and charges (renewals)."""
    total = session.exec(
        select(func.coalesce(func.sum(JournalEntry.amount_cents), 0)).where(
            col(JournalEntry.kind).in_(("charge", "hold_post"))
        )
    ).one()
    return int(total)
