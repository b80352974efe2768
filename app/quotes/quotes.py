"""Sales quotes, the staff side: build, approve, send, decline, withdraw, expire, list.

Services take ``session`` and ``now`` and never commit (the request owns the transaction).
Every staff action writes an audit event. The share token is never put in the audit log.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, update
from sqlmodel import Session, col, select

from app.accounts import audit
from app.accounts.models import User
from app.clock import utc
from app.errors import N_, Conflict, Forbidden, InvalidInput, NotFound
from app.quotes import pricing
from app.quotes.inputs import QuoteInput, apply_input, apply_promise
from app.quotes.models import Quote
from app.quotes.pricing import QuoteStatus
from app.text import single_line

PAGE_SIZE = 25
TOKEN_BYTES = 24  # secrets.token_urlsafe(24): 32 characters, 192 bits


class QuoteNotFound(NotFound):
    code = "quote_not_found"
    default_message = N_("We could not find that quote. Check the link you were sent.")


class QuoteExpired(Conflict):
    status_code = 410
    code = "quote_expired"
    default_message = N_("This quote has expired. Ask your sales contact for a new one.")


class QuoteNotOpen(Conflict):
    code = "quote_not_open"
    default_message = N_("This quote can no longer be accepted.")


class QuoteStateError(Conflict):
    code = "quote_state"
    default_message = N_("That action does not fit the quote's current status. Reload the page.")


class QuoteAlreadyUsed(Conflict):
    code = "quote_used"
    default_message = N_("This quote has already been used for another order.")


@dataclass(frozen=True)
class QuoteTerms:
    """What checkout honours: the quoted unit price (per node per month, after discount)."""

    quote_id: int
    sku_id: str
    quantity: int
    months: int
    unit_price_cents: int
    expires_at: datetime
    prospect_email: str = ""  # prefills the signed-out account step on /deploy
    used_order_id: int | None = None  # the order that holds the quote (one quote, one order)
    # Renewals charge the order's monthly total, fixed at checkout from the quoted price:
    # the discount holds for every renewal of an order placed from the quote.
    renewals_keep_price: bool = True


# ----------------------------------------------------------------------------- staff actions


def create_quote(
    session: Session, *, actor: User, data: QuoteInput, now: datetime, ip: str = ""
) -> Quote:
    assert actor.id is not None
    q = Quote(
        token=secrets.token_urlsafe(TOKEN_BYTES),
        status=QuoteStatus.draft.value,
        created_by_id=actor.id,
        sku_id=data.sku_id,
        quantity=data.quantity,
        months=data.months,
        list_unit_price_cents=0,
        unit_price_cents=0,
        monthly_total_cents=0,
        total_cents=0,
        created_at=now,
        updated_at=now,
    )
    terms = {"sku": data.sku_id, "quantity": data.quantity, "months": data.months}
    return _input_saved(session, q, data, "quote.created", actor=actor, now=now, ip=ip, **terms)


def update_quote(
    session: Session, q: Quote, *, actor: User, data: QuoteInput, now: datetime, ip: str = ""
) -> Quote:
    if q.status not in pricing.EDITABLE_STATUSES:
        raise QuoteStateError(N_("Only drafts and quotes waiting for approval can be edited."))
    if q.status == QuoteStatus.pending_approval and data.discount_bp != q.discount_bp:
        q.status = QuoteStatus.draft.value  # a new discount needs a new approval
        q.approval_requested_at = None
    return _input_saved(session, q, data, "quote.updated", actor=actor, now=now, ip=ip)


def approval_covers(q: Quote) -> bool:
    return q.approved_discount_bp is not None and q.discount_bp <= q.approved_discount_bp


def _saved(
    session: Session, q: Quote, action: str, *, actor: User, now: datetime, ip: str, **details: Any
) -> Quote:
    """Write the quote and its audit event (the share token never goes in the event)."""
    session.add(q)
    session.flush()
    audit.record(session, action, now, actor=actor, target=f"quote:{q.id}", ip=ip, **details)
    return q


def _input_saved(
    session: Session,
    q: Quote,
    data: QuoteInput,
    action: str,
    *,
    actor: User,
    now: datetime,
    ip: str,
    **details: Any,
) -> Quote:
    """The builder's input applied to the quote (live price, promise), then written; the
    event tells the discount and the total it comes to."""
    apply_input(session, q, data, now)
    details.update(discount_bp=q.discount_bp, total_cents=q.total_cents)
    return _saved(session, q, action, actor=actor, now=now, ip=ip, **details)


def _mark_sent(session: Session, q: Quote, now: datetime) -> None:
    apply_promise(session, q, now)  # the estimate as of sending
    q.status = QuoteStatus.sent.value
    q.sent_at = now
    q.expires_at = pricing.expires_at(now, q.valid_days)
    q.updated_at = now


def send_quote(session: Session, q: Quote, *, actor: User, now: datetime, ip: str = "") -> Quote:
    """Share a draft. Above the sales limit it waits for an ops approval instead."""
    if q.status != QuoteStatus.draft:
        raise QuoteStateError()
    if pricing.needs_approval(q.discount_bp) and not approval_covers(q):
        q.status = QuoteStatus.pending_approval.value
        q.approval_requested_at = now
        q.updated_at = now
        action = "quote.approval_requested"
    else:
        _mark_sent(session, q, now)
        action = "quote.sent"
    return _saved(session, q, action, actor=actor, now=now, ip=ip, discount_bp=q.discount_bp)


def decide_discount(
    session: Session,
    q: Quote,
    *,
    approve: bool,
    actor: User,
    reason: str,
    now: datetime,
    ip: str = "",
) -> Quote:
    """Ops decide on a discount above the sales limit: approved, the quote is sent;
    declined, it goes back to draft. Either way with a reason, on one line."""
    if not actor.is_ops:
        raise Forbidden(N_("Only operations staff can approve a discount above 10 %."))
    if q.status != QuoteStatus.pending_approval:
        raise QuoteStateError()
    reason = single_line(reason, 500)
    if not reason:
        missing = (
            N_("Say why this discount is approved.")
            if approve
            else N_("Say why this discount is declined.")
        )
        raise InvalidInput(missing, field="reason")
    if approve:
        q.approved_by_id = actor.id
        q.approved_at = now
        q.approval_reason = reason
        q.approved_discount_bp = q.discount_bp
        _mark_sent(session, q, now)
        action = "quote.approved"
    else:
        q.status = QuoteStatus.draft.value
        q.approval_requested_at = None
        q.updated_at = now
        action = "quote.approval_declined"
    return _saved(
        session, q, action, actor=actor, now=now, ip=ip, discount_bp=q.discount_bp, reason=reason
    )


def withdraw_quote(
    session: Session, q: Quote, *, actor: User, now: datetime, ip: str = ""
) -> Quote:
    if q.status in (QuoteStatus.accepted, QuoteStatus.withdrawn):
        raise QuoteStateError(N_("An accepted or withdrawn quote cannot be withdrawn."))
    q.status = QuoteStatus.withdrawn.value
    q.withdrawn_at = now
    q.updated_at = now
    return _saved(session, q, "quote.withdrawn", actor=actor, now=now, ip=ip)


def record_pdf_download(
    session: Session, q: Quote, *, actor: User, now: datetime, ip: str = ""
) -> None:
    audit.record(session, "quote.pdf_downloaded", now, actor=actor, target=f"quote:{q.id}", ip=ip)


# ----------------------------------------------------------------------------- reads


def observe_expiry(session: Session, q: Quote, now: datetime) -> Quote:
    """Store 'expired' on a shared quote past its expiry (derived, stored when observed)."""
    exp = utc(q.expires_at) if q.expires_at else None
    if pricing.effective_status(q.status, exp, now) == QuoteStatus.expired and (
        q.status != QuoteStatus.expired
    ):
        q.status = QuoteStatus.expired.value
        q.expired_at = now
        session.add(q)
        session.flush()
    return q


def expire_due(session: Session, now: datetime) -> int:
    """Mark every shared quote past its expiry as expired (one statement)."""
    result = session.execute(
        update(Quote)
        .where(
            col(Quote.status).in_([s.value for s in pricing.OPEN_STATUSES]),
            col(Quote.expires_at).is_not(None),
            col(Quote.expires_at) < now,
        )
        .values(status=QuoteStatus.expired.value, expired_at=now)
    )
    return int(getattr(result, "rowcount", 0) or 0)


def get_quote(session: Session, quote_id: int, now: datetime, *, lock: bool = False) -> Quote:
    """A quote by id; ``lock`` takes the row lock (PostgreSQL) before a state change, so
    two staff actions on one quote (approve vs withdraw) cannot interleave."""
    stmt = select(Quote).where(Quote.id == quote_id)
    q = session.exec(stmt.with_for_update() if lock else stmt).first()
    if q is None:
        raise QuoteNotFound()
    return observe_expiry(session, q, now)


def sizing_summary(q: Quote) -> dict[str, Any] | None:
    if not q.sizing_summary_json:
        return None
    try:
        data = json.loads(q.sizing_summary_json)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def promise_params(q: Quote) -> dict[str, Any]:
    try:
        data = json.loads(q.promise_params_json or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def status_filter_values() -> list[str]:
    return [s.value for s in QuoteStatus]


@dataclass
class QuotePage:
    items: list[Quote]
    total: int
    page: int
    pages: int


def list_quotes(
    session: Session, *, now: datetime, status: str = "", q: str = "", page: int = 1
) -> QuotePage:
    expire_due(session, now)
    stmt = select(Quote)
    count = select(func.count()).select_from(Quote)
    conds: list[Any] = []
    if status in status_filter_values():
        conds.append(Quote.status == status)
    text = q.strip()
    if text:
        ref = pricing.parse_reference(text)
        like = f"%{text.lower().replace('%', '').replace('_', '')}%"
        ors: list[Any] = [
            func.lower(Quote.prospect_email).like(like),
            func.lower(Quote.prospect_company).like(like),
            func.lower(Quote.prospect_name).like(like),
        ]
        if ref is not None:
            ors.append(Quote.id == ref)
        conds.append(or_(*ors))
    for c in conds:
        stmt = stmt.where(c)
        count = count.where(c)
    total = int(session.exec(count).one())  # type: ignore[call-overload]
    pages = max(1, (total + PAGE_SIZE - 1) // PAGE_SIZE)
    page = min(max(1, page), pages)
    items = session.exec(
        stmt.order_by(col(Quote.id).desc()).offset((page - 1) * PAGE_SIZE).limit(PAGE_SIZE)
    ).all()
    return QuotePage(list(items), total, page, pages)


def status_counts(session: Session) -> dict[str, int]:
    rows = session.exec(select(Quote.status, func.count()).group_by(Quote.status)).all()
    return {str(s): int(n) for s, n in rows}


def users_by_id(session: Session, ids: set[int | None]) -> dict[int, User]:
    real = {i for i in ids if i is not None}
    if not real:
        return {}
    return {u.id: u for u in session.exec(select(User).where(col(User.id).in_(real))).all() if u.id}
