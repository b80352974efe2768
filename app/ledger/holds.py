"""Holds: money reserved for an order (it leaves *available* at once), then posted to
revenue or voided back, exactly once.

``place_hold_id`` is the locked path: the customer's available row locked, the key looked up
under the lock, both balances in one conditional UPDATE, then the hold, its entry, postings
and idempotency record as plain Core statements. ``HOLD_IN_ONE`` is the same hold as ONE
PostgreSQL statement with no lock read first (data-modifying CTEs), built so that a
composer (the paid checkout, ``app/orders/checkout.py``) can add its own domains' rows,
written only with the hold; a short balance, a used key or a new customer writes nothing
there and takes the locked path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Unpack, cast

from sqlalchemy import (
    CTE,
    BigInteger,
    ColumnElement,
    Integer,
    Select,
    String,
    Table,
    bindparam,
    case,
    func,
    or_,
    true,
    union_all,
    update,
)
from sqlalchemy import exists as sa_exists
from sqlalchemy import insert as sa_insert
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from app import errors
from app.errors import N_
from app.ledger.invoicing import CreditReason, InvoiceLine
from app.ledger.models import Hold, IdempotencyRecord, JournalEntry, LedgerAccount, Posting
from app.ledger.moves import (
    Debit,
    HoldAlreadyResolved,
    IdempotencyConflict,
    Short,
    check_amount,
    check_key,
    code_of,
    fingerprint,
    forget_loaded,
    lock_customer,
    move,
    record_declined,
)
from app.ledger.postings import AccountKind, EntryKind, HoldStatus, legs_for, resolve_transition


def _table(model: Any) -> Table:
    return cast(Table, model.__table__)


_ACC = _table(LedgerAccount)
_IDEM = _table(IdempotencyRecord)
_HOLDS = _table(Hold)
_ENTRIES = _table(JournalEntry)
_POSTINGS = _table(Posting)


def place_hold(session: Session, **command: Unpack[Debit]) -> Hold:
    """Reserve money: it leaves *available* at once. Raises ``InsufficientBalance``."""
    hold = session.get(Hold, place_hold_id(session, **command))
    assert hold is not None
    return hold


# --- the locked path (every dialect) ---------------------------------------------------------

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


def place_hold_id(session: Session, **debit: Unpack[Debit]) -> int:
    """``place_hold``, returning the hold's id (the checkout needs no more): the same rules
    in plain statements — the customer's available row locked, the key looked up under the
    lock, both balances in one conditional UPDATE, then the hold, entry, postings and the
    idempotency record. The key is looked up by the UPDATE itself (it moves nothing when
    the key was used; then the record is read and replayed), or, when the locked balance
    is short, by a read of its own before declining."""
    user_id = debit["user_id"]
    amount_cents = debit["amount_cents"]
    idempotency_key = debit["idempotency_key"]
    now, reason = debit["now"], debit["reason"]
    order_id, actor_id = debit.get("order_id"), debit.get("actor_id")
    check_amount(amount_cents)
    check_key(idempotency_key)
    avail_code, held_code = (
        code_of(user_id, AccountKind.available),
        code_of(user_id, AccountKind.held),
    )
    conn = session.connection()
    row = conn.execute(_LOCK_AVAILABLE, {"code": avail_code}).first()
    if row is None:  # a customer's first money command: create the accounts (rare path)
        lock_customer(session, user_id, now, load_held=False)
        row = conn.execute(_LOCK_AVAILABLE, {"code": avail_code}).first()
        assert row is not None
    available = int(row[1])
    fp = fingerprint("hold", amount=amount_cents, order_id=order_id)
    if available < amount_cents:  # the row is locked: this is the balance the UPDATE sees
        prior = _replay_hold(session, user_id, idempotency_key, fp)
        if prior is not None:  # a replay is answered, not declined
            return prior
        raise record_declined(
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
    for account_id, _balance in after.values():
        forget_loaded(session, account_id)
    legs = {leg.account: leg.amount_cents for leg in legs_for(EntryKind.hold, amount_cents)}
    hold_id = int(
        conn.execute(
            _INSERT_HOLD,
            {
                "user_id": user_id,
                "amount_cents": amount_cents,
                "status": HoldStatus.pending.value,
                "reason": reason[:300],
                "order_id": order_id,
                "idempotency_key": idempotency_key,
                "created_at": now,
                "actor_id": actor_id,
                "resolve_reason": "",
            },
        ).scalar_one()
    )
    entry_id = int(
        conn.execute(
            _INSERT_ENTRY,
            {
                "kind": EntryKind.hold.value,
                "reason": reason[:300],
                "user_id": user_id,
                "order_id": order_id,
                "hold_id": hold_id,
                "actor_id": actor_id,
                "crypto_currency": "",
                "crypto_amount": "",
                "rate": "",
                "amount_cents": amount_cents,
                "created_at": now,
            },
        ).scalar_one()
    )
    conn.execute(
        sa_insert(_POSTINGS).values(
            [
                {
                    "entry_id": entry_id,
                    "account_id": after[code][0],
                    "amount_cents": legs[kind.value],
                    "balance_after_cents": after[code][1],
                    "created_at": now,
                }
                for code, kind in (
                    (avail_code, AccountKind.available),
                    (held_code, AccountKind.held),
                )
            ]
        )
    )
    conn.execute(_SET_HOLD_ENTRY, {"hid": hold_id, "eid": entry_id})
    conn.execute(
        sa_insert(_IDEM),
        {
            "user_id": user_id,
            "key": idempotency_key,
            "command": "hold",
            "fingerprint": fp,
            "hold_id": hold_id,
            "entry_id": entry_id,
            "created_at": now,
        },
    )
    return hold_id


def _replay_hold(session: Session, user_id: int, key: str, fp: str) -> int | None:
    """The hold an earlier ``place_hold`` with this key made (None when the key is unused);
    ``IdempotencyConflict`` when the key was used for another command or amount."""
    prior = session.connection().execute(_PRIOR, {"uid": user_id, "key": key}).first()
    if prior is None:
        return None
    if prior[0] != "hold" or prior[1] != fp:
        raise IdempotencyConflict()
    return int(prior[2])


# --- the hold in one PostgreSQL statement -----------------------------------------------------


def _p(name: str, column: Any) -> Any:
    """A bind parameter ``h_<name>`` typed as ``column`` (rendered with its cast)."""
    return bindparam(f"h_{name}", type_=column.type)


@dataclass(frozen=True)
class HoldInOne:
    """The hold as data-modifying CTEs (PostgreSQL). ``written``: a one-row selectable
    present only when the hold was written (the available row debited — the UPDATE takes
    its row lock, and PostgreSQL re-checks ``balance_cents >= amount`` on the row as it is
    once locked — the held row credited, the key unused); a composer's own rows that select
    FROM it are written only with the hold. ``hold_id``: the new hold's id, a column of
    ``written``. ``select``: the statement answering (hold id or NULL, available account,
    its balance after, held account, its balance after, rows debited); a composer adds its
    CTEs to it (``select.add_cte``). Parameters: ``hold_in_one_params``."""

    written: CTE
    hold_id: ColumnElement[int]
    select: Select[Any]


def _hold_in_one() -> HoldInOne:
    uid, amount = _p("user_id", _HOLDS.c.user_id), _p("amount", _HOLDS.c.amount_cents)
    key, now = _p("key", _HOLDS.c.idempotency_key), _p("now", _HOLDS.c.created_at)
    reason, order = _p("reason", _HOLDS.c.reason), _p("order_id", _HOLDS.c.order_id)
    actor = _p("actor_id", _HOLDS.c.actor_id)
    # the constants are parameters too (``hold_in_one_params``)
    pending, hold_kind = _p("pending", _HOLDS.c.status), _p("kind", _ENTRIES.c.kind)
    blank = _p("blank", _ENTRIES.c.rate)
    debit = (
        update(_ACC)
        .where(
            _ACC.c.code == _p("avail_code", _ACC.c.code),
            _ACC.c.balance_cents >= amount,
            ~sa_exists().where(_IDEM.c.user_id == uid, _IDEM.c.key == key),
        )
        .values(balance_cents=_ACC.c.balance_cents - amount)
        .returning(_ACC.c.id, _ACC.c.balance_cents)
        .cte("debit")
    )
    credit = (
        update(_ACC)
        .where(_ACC.c.code == _p("held_code", _ACC.c.code), sa_exists(sa_select(debit.c.id)))
        .values(balance_cents=_ACC.c.balance_cents + amount)
        .returning(_ACC.c.id, _ACC.c.balance_cents)
        .cte("credit")
    )

    def next_id(table: Table) -> Any:
        return func.nextval(func.pg_get_serial_sequence(table.name, "id")).cast(Integer)

    ids = (
        sa_select(
            next_id(_HOLDS).label("hold_id"),
            next_id(_ENTRIES).label("entry_id"),
            debit.c.id.label("a_id"),
            debit.c.balance_cents.label("a_after"),
            credit.c.id.label("h_id"),
            credit.c.balance_cents.label("h_after"),
        )
        .select_from(debit.join(credit, true()))
        .cte("hold")
    )
    rows = [
        sa_insert(_HOLDS).from_select(
            [
                "id", "user_id", "amount_cents", "status", "reason", "order_id",
                "idempotency_key", "entry_id", "resolve_reason", "created_at", "actor_id",
            ],
            sa_select(
                ids.c.hold_id, uid, amount, pending, reason, order, key, ids.c.entry_id, blank,
                now, actor,
            ),
        ),
        sa_insert(_ENTRIES).from_select(
            [
                "id", "kind", "reason", "user_id", "order_id", "hold_id", "actor_id",
                "crypto_currency", "crypto_amount", "rate", "amount_cents", "created_at",
            ],
            sa_select(
                ids.c.entry_id, hold_kind, reason, uid, order, ids.c.hold_id, actor, blank,
                blank, blank, amount, now,
            ),
        ),
        sa_insert(_IDEM).from_select(
            ["user_id", "key", "command", "fingerprint", "hold_id", "entry_id", "created_at"],
            sa_select(
                uid, key, hold_kind, _p("fp", _IDEM.c.fingerprint), ids.c.hold_id,
                ids.c.entry_id, now,
            ),
        ),
        sa_insert(_POSTINGS).from_select(
            ["entry_id", "account_id", "amount_cents", "balance_after_cents", "created_at"],
            union_all(
                sa_select(ids.c.entry_id, ids.c.a_id, -amount, ids.c.a_after, now),
                sa_select(ids.c.entry_id, ids.c.h_id, amount, ids.c.h_after, now),
            ),
        ),
    ]  # fmt: skip
    one = sa_select(true().label("one")).subquery("one")
    debited = sa_select(func.count()).select_from(debit).scalar_subquery()
    answer = (
        sa_select(ids.c.hold_id, ids.c.a_id, ids.c.a_after, ids.c.h_id, ids.c.h_after, debited)
        .select_from(one.outerjoin(ids, true()))
        .add_cte(*(r.cte(f"h{i}") for i, r in enumerate(rows)))
    )
    return HoldInOne(written=ids, hold_id=ids.c.hold_id, select=answer)


HOLD_IN_ONE = _hold_in_one()


def hold_in_one_params(**command: Unpack[Debit]) -> dict[str, Any]:
    """``HOLD_IN_ONE``'s parameters (the amount and key checked as ``place_hold`` does)."""
    user_id, amount_cents = command["user_id"], command["amount_cents"]
    order_id = command.get("order_id")
    check_amount(amount_cents)
    check_key(command["idempotency_key"])
    return {
        "h_user_id": user_id,
        "h_amount": amount_cents,
        "h_key": command["idempotency_key"],
        "h_now": command["now"],
        "h_reason": command["reason"][:300],
        "h_order_id": order_id,
        "h_actor_id": command.get("actor_id"),
        "h_avail_code": code_of(user_id, AccountKind.available),
        "h_held_code": code_of(user_id, AccountKind.held),
        "h_fp": fingerprint("hold", amount=amount_cents, order_id=order_id),
        "h_pending": HoldStatus.pending.value,
        "h_kind": EntryKind.hold.value,  # the entry's kind and the idempotency command
        "h_blank": "",
    }


def hold_in_one_result(session: Session, row: Sequence[Any]) -> int | None:
    """The hold ``HOLD_IN_ONE`` wrote (None: nothing was written — short, key used or no
    accounts yet — and the caller takes ``place_hold_id``)."""
    hold_id, a_id, _a_after, h_id, _h_after, debited = row
    if hold_id is None:
        if debited:  # pragma: no cover - the held account is made with the available one
            raise errors.Conflict()
        return None
    forget_loaded(session, int(a_id))
    forget_loaded(session, int(h_id))
    return int(hold_id)


# --- post and void ----------------------------------------------------------------------------


def _resolve(
    session: Session,
    hold_id: int,
    wanted: HoldStatus,
    *,
    now: datetime,
    reason: str,
    actor_id: int | None,
    lines: Sequence[InvoiceLine] = (),
    credit_reason: CreditReason | None = None,
) -> JournalEntry:
    hold = session.get(Hold, hold_id)
    if hold is None:
        raise errors.NotFound(N_("No such reservation."))
    avail, held = lock_customer(session, hold.user_id, now)
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
        entry = move(
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
            lines=lines,
            credit_reason=credit_reason,
        )
    except Short:  # pragma: no cover - the held account always covers its pending holds
        raise errors.Conflict(N_("The reservation does not match the held balance.")) from None
    session.refresh(hold)
    hold.resolve_entry_id = entry.id
    session.add(hold)
    session.flush()
    return entry


def post_hold(
    session: Session,
    hold_id: int,
    *,
    now: datetime,
    actor_id: int | None = None,
    lines: Sequence[InvoiceLine] = (),
) -> JournalEntry:
    """Capture a pending hold (held → revenue), its receipt listing ``lines``. Same call
    again: returns the first entry (and issues nothing more)."""
    return _resolve(
        session, hold_id, HoldStatus.posted, now=now, reason="", actor_id=actor_id, lines=lines
    )


def void_hold(
    session: Session,
    hold_id: int,
    *,
    now: datetime,
    reason: str,
    actor_id: int | None = None,
    lines: Sequence[InvoiceLine] = (),
    credit_reason: CreditReason | None = None,
) -> JournalEntry:
    """Release a pending hold back to available (a full refund of the reservation), with
    its credit note (``lines``, ``credit_reason``). Same call again: the first entry."""
    return _resolve(
        session,
        hold_id,
        HoldStatus.voided,
        now=now,
        reason=reason,
        actor_id=actor_id,
        lines=lines,
        credit_reason=credit_reason,
    )
