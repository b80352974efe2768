"""A quote as its customer sees it: the share page (``/q/{token}``), accepting it, the
link to deploy it, and the checkout seam (``quote_for_checkout``, ``claim_for_order``,
``mark_used``)."""

from __future__ import annotations

import json
from datetime import datetime
from urllib.parse import urlencode

from sqlmodel import Session, select

from app.accounts import audit
from app.clock import utc
from app.quotes import inputs, pricing
from app.quotes.models import Quote
from app.quotes.pricing import QuoteKind, QuoteStatus
from app.quotes.quotes import (
    QuoteAlreadyUsed,
    QuoteExpired,
    QuoteNotFound,
    QuoteNotOpen,
    QuoteTerms,
    observe_expiry,
)


def _by_token(session: Session, token: str, lock: bool = False) -> Quote | None:
    if not token or len(token) > 64:
        return None
    stmt = select(Quote).where(Quote.token == token)
    return session.exec(stmt.with_for_update() if lock else stmt).first()


def shared_quote(session: Session, token: str, now: datetime, *, lock: bool = False) -> Quote:
    """The quote behind a share link, for the prospect. Drafts and withdrawn → 404."""
    q = _by_token(session, token, lock)
    if q is None or q.status in (
        QuoteStatus.draft,
        QuoteStatus.pending_approval,
        QuoteStatus.withdrawn,
    ):
        raise QuoteNotFound()
    return observe_expiry(session, q, now)


def view_shared(
    session: Session, token: str, now: datetime, ip: str = "", *, by_staff: bool = False
) -> Quote:
    """The prospect opens the link: the first view marks the quote viewed (staff
    checking how the page looks do not count)."""
    q = shared_quote(session, token, now)
    if q.status == QuoteStatus.sent and not by_staff:
        q.status = QuoteStatus.viewed.value
        q.viewed_at = now
        session.add(q)
        session.flush()
        audit.record(session, "quote.viewed", now, target=f"quote:{q.id}", ip=ip)
    return q


def accept_shared(session: Session, token: str, now: datetime, ip: str = "") -> Quote:
    q = shared_quote(session, token, now, lock=True)
    if q.status == QuoteStatus.accepted:
        exp = utc(q.expires_at) if q.expires_at else None
        if not pricing.honoured(q.status, exp, now):
            raise QuoteExpired()
        return q  # accepting twice is harmless: same landing page
    if q.status == QuoteStatus.expired:
        raise QuoteExpired()
    if q.status not in pricing.OPEN_STATUSES:
        raise QuoteNotOpen()
    q.status = QuoteStatus.accepted.value
    q.accepted_at = now
    q.viewed_at = q.viewed_at or now
    session.add(q)
    session.flush()
    audit.record(session, "quote.accepted", now, target=f"quote:{q.id}", ip=ip)
    return q


def deploy_url(q: Quote) -> str:
    """Where an accepted node quote lands: the /deploy form, prefilled."""
    pairs: list[tuple[str, str]] = [
        ("sku", q.sku_id),
        ("nodes", str(q.quantity)),
    ]
    if q.image_id:
        pairs.append(("image", q.image_id))
    notes = inputs.notes_for_reader(
        json.loads(q.sizing_summary_json) if q.sizing_summary_json else {},
        q.quantity,
        q.kind,
        {name: getattr(q, name) or "" for name in inputs.NOTE_FIELDS},
    )
    if notes["note_model_size"]:
        pairs.append(("note_model_size", notes["note_model_size"]))
    if notes["note_token_budget"]:
        pairs.append(("note_token_budget", notes["note_token_budget"]))
    if q.quantity > 1:
        pairs += [("note_node_count", str(q.quantity)), ("note_private_network", "1")]
    if notes["note_comm_pattern"]:
        pairs.append(("note_comm_pattern", notes["note_comm_pattern"]))
    if q.sizing_query:
        pairs.append(("sizing", q.sizing_query))
    pairs.append(("quote", q.token))
    return "/deploy?" + urlencode(pairs)


def share_path(q: Quote) -> str:
    return f"/q/{q.token}"


# ----------------------------------------------------------------------------- checkout seam


def quote_for_checkout(session: Session, token: str, now: datetime) -> QuoteTerms | None:
    """The terms checkout honours for ``?quote=<token>``; None if unknown, expired, not
    shared/accepted, withdrawn, or a GB300 rack term (never self-serve)."""
    q = _by_token(session, token)
    if q is None or q.id is None or q.kind != QuoteKind.node:
        return None
    observe_expiry(session, q, now)
    exp = utc(q.expires_at) if q.expires_at else None
    if exp is None or not pricing.honoured(q.status, exp, now):
        return None
    return QuoteTerms(
        quote_id=q.id,
        sku_id=q.sku_id,
        quantity=q.quantity,
        months=q.months,
        unit_price_cents=q.unit_price_cents,
        expires_at=exp,
        prospect_email=q.prospect_email or "",
        used_order_id=q.used_order_id,
    )


def claim_for_order(session: Session, quote_id: int) -> bool:
    """Checkout's question before it creates an order from a quote: may a new order use
    it? False when another order already did (one quote, one order). The quote row is
    locked until the transaction ends; ``mark_used`` records the order once it exists."""
    q = _locked(session, quote_id)
    return q is not None and q.used_order_id is None


def _locked(session: Session, quote_id: int) -> Quote | None:
    """The quote row, locked until the transaction ends (who holds it is decided here)."""
    return session.exec(select(Quote).where(Quote.id == quote_id).with_for_update()).first()


def _set_holder(
    session: Session, q: Quote, order_id: int | None, now: datetime, action: str, about: int
) -> None:
    """Record which order holds ``q`` (None: none), and say so in the audit log."""
    q.used_order_id = order_id
    q.used_at = now if order_id is not None else None
    session.add(q)
    session.flush()
    audit.record(session, action, now, target=f"quote:{q.id}", order_id=about)


def quote_price_honoured(session: Session, quote_id: int, now: datetime) -> bool:
    """Checkout's question when an order placed from this quote is paid: does the quoted
    price still hold (``pricing.NODE_QUOTE_RULES``)? False once sales withdrew the quote or
    it expired."""
    q = session.get(Quote, quote_id)
    if q is None:
        return False
    exp = utc(q.expires_at) if q.expires_at else None
    return pricing.honoured(q.status, exp, now)


def quoted_list_unit_cents(session: Session, quote_id: int) -> int | None:
    """The list price per node-month a quote discounted from (None: no such quote); an
    order's invoice lines show the discount against it."""
    q = session.get(Quote, quote_id)
    return None if q is None else int(q.list_unit_price_cents)


def release_from_order(session: Session, quote_id: int, order_id: int, now: datetime) -> None:
    """``order_id`` was discarded before it was paid: the quote it held may be used again
    (a link opened by someone else, or an order placed and thrown away, must not cost the
    prospect the quoted price)."""
    q = _locked(session, quote_id)
    if q is not None and q.used_order_id == order_id:
        _set_holder(session, q, None, now, "quote.released", order_id)


def mark_used(session: Session, quote_id: int, order_id: int, now: datetime) -> None:
    """Checkout created ``order_id`` from this quote. One quote, one order."""
    q = _locked(session, quote_id)
    if q is None:
        raise QuoteNotFound()
    if q.used_order_id is not None and q.used_order_id != order_id:
        raise QuoteAlreadyUsed()
    if q.used_order_id != order_id:
        _set_holder(session, q, order_id, now, "quote.used", order_id)
