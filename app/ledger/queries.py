"""The ledger's reads: balances, a customer's statement, holds, the staff journal, and the
facts other domains reconcile against (``lease_credits``, ``topup_credits``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, func, select

from app.db import count_of_user, rows_of_user
from app.ledger.models import DeclinedAttempt, Hold, JournalEntry, LedgerAccount, Posting
from app.ledger.moves import code_of, find_account
from app.ledger.postings import AccountKind, EntryKind, HoldStatus


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


def available_cents(session: Session, user_id: int) -> int:
    acc = find_account(session, user_id, AccountKind.available)
    return acc.balance_cents if acc else 0


def held_cents(session: Session, user_id: int) -> int:
    acc = find_account(session, user_id, AccountKind.held)
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
    avail = find_account(session, user_id, AccountKind.available)
    held = find_account(session, user_id, AccountKind.held)
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
    return rows_of_user(session, DeclinedAttempt, user_id, limit=limit)


def statement_count(session: Session, user_id: int) -> int:
    return count_of_user(session, JournalEntry, user_id)


def balance_and_statement(
    session: Session, user_id: int, limit: int = 50, offset: int = 0
) -> tuple[int, int, list[StatementLine]]:
    """``balance_summary`` and ``statement`` in two plain reads (no ORM objects): the two
    accounts by code, then the page of entries with their postings to those accounts (the
    JSON balance answered in six statements)."""
    codes = {code_of(user_id, k): k.value for k in (AccountKind.available, AccountKind.held)}
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


@dataclass(frozen=True)
class Credit:
    """One credit entry, as other domains reconcile it against their own rows."""

    entry_id: int
    user_id: int
    amount_cents: int
    order_id: int | None = None
    invoice_id: int | None = None


def lease_credits(session: Session) -> list[Credit]:
    """Every early-end lease credit (orders checks: once per order, to its customer)."""
    rows = session.exec(
        select(JournalEntry).where(JournalEntry.kind == EntryKind.lease_credit.value)
    ).all()
    return [Credit(e.id or 0, e.user_id or 0, e.amount_cents, order_id=e.order_id) for e in rows]


def topup_credits(session: Session) -> list[Credit]:
    """Every top-up credit with the invoice it credits (payments checks them)."""
    rows = session.exec(
        select(JournalEntry).where(JournalEntry.kind == EntryKind.topup.value)
    ).all()
    return [
        Credit(e.id or 0, e.user_id or 0, e.amount_cents, invoice_id=e.credit_invoice_id)
        for e in rows
    ]
