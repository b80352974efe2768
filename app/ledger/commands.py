"""The ledger's direct commands: a charge (renewals), a top-up credit, a promotion, a lease's
unused days given back, an ops adjustment. Each keyed one is ``moves.keyed_command``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Unpack

from sqlmodel import Session, select

from app import errors
from app.accounts import audit
from app.errors import N_
from app.ledger.invoicing import CreditReason, InvoiceLine
from app.ledger.models import JournalEntry
from app.ledger.moves import Debit, check_amount, check_key, keyed_command, lock_customer, move
from app.ledger.postings import EntryKind
from app.text import single_line


def charge(
    session: Session, *, lines: Sequence[InvoiceLine] = (), **debit: Unpack[Debit]
) -> JournalEntry:
    """A direct debit (available → revenue), e.g. a monthly renewal. ``lines``: what it
    pays for, printed on its receipt (they add up to ``amount_cents``)."""
    order_id, reason = debit.get("order_id"), debit["reason"]
    entry, _made = keyed_command(
        session,
        command="charge",
        kind=EntryKind.charge,
        user_id=debit["user_id"],
        key=debit["idempotency_key"],
        amount_cents=debit["amount_cents"],
        now=debit["now"],
        params={"order_id": order_id},
        entry={"reason": reason[:300], "order_id": order_id, "actor_id": debit.get("actor_id")},
        order_id=order_id,
        reason=reason,
        lines=lines,
    )
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
    check_amount(amount_cents)
    avail, held = lock_customer(session, user_id, now)
    first = session.exec(
        select(JournalEntry).where(JournalEntry.credit_invoice_id == invoice_id)
    ).first()
    if first is not None:
        if first.user_id != user_id or first.amount_cents != amount_cents:
            raise errors.Conflict(N_("This invoice was already credited with a different amount."))
        return first
    return move(
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
    entry, _made = keyed_command(
        session,
        command="promotion",
        kind=EntryKind.promotion,
        user_id=user_id,
        key=idempotency_key,
        amount_cents=amount_cents,
        now=now,
        params={},
        entry={"reason": reason[:300], "actor_id": actor_id},
    )
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
    lines: Sequence[InvoiceLine] = (),
) -> JournalEntry:
    """Give back the unused whole days of a lease that ops ended early (revenue →
    available), as an entry named for the order. Once per order: a replay returns the
    first entry; a different amount for the same order is an IdempotencyConflict. Issues
    the credit note (``lines``: what is credited, for which days) with the entry."""
    entry, _made = keyed_command(
        session,
        command="lease_credit",
        kind=EntryKind.lease_credit,
        user_id=user_id,
        key=f"lease-credit:{order_id}",
        amount_cents=amount_cents,
        now=now,
        params={"order_id": order_id},
        entry={
            "reason": f"order #{order_id}: {days} unused days credited (lease ended early)",
            "order_id": order_id,
            "actor_id": actor_id,
        },
        lines=lines,
        credit_reason=CreditReason.lease_ended_early,
    )
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
    check_amount(amount_cents, signed=True)
    check_key(idempotency_key)
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
    entry, made = keyed_command(
        session,
        command="adjust",
        kind=EntryKind.adjustment,
        user_id=user_id,
        key=idempotency_key,
        amount_cents=amount_cents,
        now=now,
        params={"reason": reason, "corrects": corrects_entry_id},
        entry={
            "reason": reason[:300],
            "actor_id": actor.id,
            "corrects_entry_id": corrects_entry_id,
        },
        declined_cents=-amount_cents,
        reason=reason,
        signed=True,
    )
    if made:
        audit.record(
            session,
            "ledger.adjust",
            now,
            actor=actor,
            target=f"user:{user_id}",
            ip=ip,
            amount_cents=amount_cents,
            reason=reason,
            entry_id=entry.id,
        )
        session.flush()
    return entry
