"""Sales quotes: build, approve, share, view, accept, expire, and the checkout seam.

Services take ``session`` and ``now`` and never commit (the request owns the transaction).
Every staff action writes an audit event. The share token is never put in the audit log.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from sqlalchemy import func, or_, update
from sqlmodel import Session, col, select

from app.accounts import audit
from app.accounts.models import Role, User
from app.catalog import service as catalog
from app.catalog.specs import NodeSpec, all_specs, spec
from app.clock import utc
from app.configurator.forms import human_count, parse_query
from app.errors import N_, Conflict, Forbidden, InvalidInput, NotFound
from app.quotes import pricing
from app.quotes.models import ClusterRequest, ClusterRequestStatus, Quote
from app.quotes.pricing import QuoteKind, QuoteStatus
from app.quotes.schemas import ClusterRequestIn, QuoteIn
from app.sizing import PRESETS, SizingError, size
from app.sizing.comm import comm_pattern
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
    # Renewals charge the order's monthly total, fixed at checkout from the quoted price:
    # the discount holds for every renewal of an order placed from the quote.
    renewals_keep_price: bool = True


@dataclass
class QuoteInput:
    prospect_name: str
    prospect_email: str
    prospect_company: str
    sku_id: str
    quantity: int
    months: int
    discount_bp: int
    valid_days: int
    sizing_query: str
    sizing_notes: str
    notes: str
    note_model_size: str = ""
    note_token_budget: str = ""
    note_comm_pattern: str = ""
    sizing_summary: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- helpers


def sku_choices() -> list[NodeSpec]:
    return list(all_specs())


def kind_of(sku_id: str) -> str:
    return QuoteKind.rack.value if spec(sku_id).price_per_gpu else QuoteKind.node.value


def sizing_query_of(text: str) -> str:
    """A pasted /size URL, '?a=b' or 'a=b' → the bare query string ('' if none)."""
    t = text.strip()
    if not t:
        return ""
    if "?" in t:
        t = t.split("?", 1)[1]
    elif t.startswith(("http://", "https://", "/")):
        t = urlsplit(t).query
    return t.split("#", 1)[0]


def size_from_query(query: str, sku_id: str, quantity: int) -> tuple[dict[str, Any], str]:
    """Run the sizing engine on a /size query for the quoted SKU and count.

    Returns (summary, canonical query). Raises InvalidInput(field='sizing').
    """

    params = dict(parse_qsl(query, keep_blank_values=False))
    form = parse_query(params, set(PRESETS))
    if not form.ok or form.request is None:
        fields = ", ".join(sorted(form.errors)) or "?"
        raise InvalidInput(
            N_("The sizing link has problems in: {fields}. Open it on the sizing page to fix it."),
            field="sizing",
            fields=fields,
        )
    req = dict(form.request)
    s = spec(sku_id)
    nodes = quantity // s.gpus_per_node if s.price_per_gpu else quantity
    req["sku"] = sku_id
    req["nodes"] = max(1, nodes)
    try:
        result = size(req)
    except SizingError:
        raise InvalidInput(
            N_("The sizing engine could not size this job on the quoted configuration."),
            field="sizing",
        ) from None
    opt = result["options"][0] if result["options"] else {}
    summary = {
        "params": result["params"],
        "params_human": human_count(result["params"]),
        "tokens": req.get("tokens"),
        "tokens_human": human_count(float(req.get("tokens") or 0)),
        "method": req.get("method", "full"),
        "fits": bool(opt.get("fits")),
        "training_days": opt.get("training_days"),
        "layout": opt.get("layout_description", ""),
        "layout_code": opt.get("layout_description_code"),
        "layout_detail": opt.get("layout") or {},
        "comm_pattern": comm_pattern(opt) if opt else "",
        "effective_mfu": opt.get("effective_mfu"),
        "rental_months": opt.get("months"),
        "recommended_sku": result["recommendation"].get("sku"),
        "recommended_nodes": result["recommendation"].get("nodes"),
    }
    return summary, form.query_string()


def quote_input(session: Session, form: QuoteIn) -> QuoteInput:
    """The rules across fields of a validated builder form: terms per kind of SKU, the
    discount, the sizing link (run through the engine). Raises InvalidInput per field."""
    errors: dict[str, str] = {}
    sku_id = form.sku
    kind = kind_of(sku_id)
    quantity = form.quantity
    default_months = pricing.MIN_RACK_MONTHS if kind == QuoteKind.rack else 1
    months = form.months if form.months is not None else default_months
    for k, v in pricing.check_terms(kind, quantity, months).items():
        errors.setdefault(k, v)
    valid_days = form.valid_days if form.valid_days is not None else pricing.DEFAULT_VALID_DAYS
    raw_sizing = form.sizing
    data = QuoteInput(
        prospect_name=form.prospect_name,
        prospect_email=form.prospect_email,
        prospect_company=form.prospect_company,
        sku_id=sku_id,
        quantity=quantity,
        months=months,
        discount_bp=form.discount_bp,
        valid_days=valid_days,
        sizing_query="",
        sizing_notes=form.sizing_notes,
        notes=form.notes,
        note_model_size=form.note_model_size,
        note_token_budget=form.note_token_budget,
        note_comm_pattern=form.note_comm_pattern,
    )
    query = sizing_query_of(raw_sizing)
    if query and not errors.get("sku") and not errors.get("quantity"):
        try:
            summary, canonical = size_from_query(query, sku_id, quantity)
        except InvalidInput as e:
            errors["sizing"] = e.message
            if e.params:
                errors["sizing"] = e.render_message(lambda s: s)
        else:
            data.sizing_summary = summary
            data.sizing_query = canonical
            data.note_model_size = data.note_model_size or f"{summary['params_human']} params"
            data.note_token_budget = data.note_token_budget or f"{summary['tokens_human']} tokens"
            if quantity > 1 and kind == QuoteKind.node and not data.note_comm_pattern:
                data.note_comm_pattern = str(summary.get("comm_pattern") or "")[:300]
    elif raw_sizing and not query:
        errors["sizing"] = N_("Paste a link to the sizing page (/size?…) or its query string.")
    if errors:
        raise InvalidInput(errors=errors)
    return data


def find_customer(session: Session, email: str) -> User | None:
    if not email:
        return None
    return session.exec(
        select(User).where(
            func.lower(User.email) == email.lower(), User.role == Role.customer.value
        )
    ).first()


def search_customers(session: Session, text: str, limit: int = 8) -> list[User]:
    t = text.strip().lower()
    if len(t) < 2:
        return []
    like = f"%{t.replace('%', '').replace('_', '')}%"
    return list(
        session.exec(
            select(User)
            .where(User.role == Role.customer.value, func.lower(User.email).like(like))
            .order_by(User.email)
            .limit(limit)
        ).all()
    )


def _apply_promise(session: Session, q: Quote, now: datetime) -> None:
    qty = q.quantity if q.kind == QuoteKind.node else max(1, q.quantity // pricing.RACK_GPUS)
    p = catalog.current_promise(session, q.sku_id, qty, now)
    q.promise_available = bool(p.available)
    q.promise_date = p.date if p.available else None
    q.promise_explanation = (p.explanation or "")[:300]
    q.promise_message = (getattr(p, "message", "") or "")[:200]
    params = dict(getattr(p, "params", ()) or ())
    q.promise_params_json = json.dumps(params, default=str, ensure_ascii=False)[:1000]


def _apply_input(session: Session, q: Quote, data: QuoteInput, now: datetime) -> None:
    customer = find_customer(session, data.prospect_email)
    q.customer_user_id = customer.id if customer else None
    q.prospect_email = data.prospect_email
    q.prospect_name = data.prospect_name or (customer.name if customer else "")
    q.prospect_company = data.prospect_company or (customer.company if customer else "")
    if q.id is None or q.sku_id != data.sku_id:
        # The list price is read live from the catalog and frozen on the quote.
        q.list_unit_price_cents = int(catalog.list_price_cents(session, data.sku_id))
    q.sku_id = data.sku_id
    q.kind = kind_of(data.sku_id)
    s = spec(data.sku_id)
    q.image_id = s.images[0] if s.images else ""
    q.quantity = data.quantity
    q.months = data.months
    q.discount_bp = data.discount_bp
    t = pricing.totals(q.list_unit_price_cents, q.discount_bp, q.quantity, q.months)
    q.unit_price_cents = t.unit_cents
    q.monthly_total_cents = t.monthly_cents
    q.total_cents = t.total_cents
    q.valid_days = data.valid_days
    q.sizing_query = data.sizing_query
    q.sizing_notes = data.sizing_notes
    q.sizing_summary_json = json.dumps(data.sizing_summary) if data.sizing_summary else ""
    q.note_model_size = data.note_model_size
    q.note_token_budget = data.note_token_budget
    q.note_comm_pattern = data.note_comm_pattern
    q.notes = data.notes
    q.updated_at = now
    _apply_promise(session, q, now)


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
    _apply_input(session, q, data, now)
    session.add(q)
    session.flush()
    audit.record(
        session,
        action="quote.created",
        now=now,
        actor=actor,
        target=f"quote:{q.id}",
        ip=ip,
        sku=q.sku_id,
        quantity=q.quantity,
        months=q.months,
        discount_bp=q.discount_bp,
        total_cents=q.total_cents,
    )
    return q


def update_quote(
    session: Session, q: Quote, *, actor: User, data: QuoteInput, now: datetime, ip: str = ""
) -> Quote:
    if q.status not in pricing.EDITABLE_STATUSES:
        raise QuoteStateError(N_("Only drafts and quotes waiting for approval can be edited."))
    old_discount = q.discount_bp
    _apply_input(session, q, data, now)
    if q.status == QuoteStatus.pending_approval and q.discount_bp != old_discount:
        q.status = QuoteStatus.draft.value
        q.approval_requested_at = None
    session.add(q)
    session.flush()
    audit.record(
        session,
        action="quote.updated",
        now=now,
        actor=actor,
        target=f"quote:{q.id}",
        ip=ip,
        discount_bp=q.discount_bp,
        total_cents=q.total_cents,
    )
    return q


def approval_covers(q: Quote) -> bool:
    return q.approved_discount_bp is not None and q.discount_bp <= q.approved_discount_bp


def _mark_sent(session: Session, q: Quote, now: datetime) -> None:
    _apply_promise(session, q, now)  # the estimate as of sending
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
    session.add(q)
    session.flush()
    audit.record(
        session,
        action=action,
        now=now,
        actor=actor,
        target=f"quote:{q.id}",
        ip=ip,
        discount_bp=q.discount_bp,
    )
    return q


def approve_quote(
    session: Session, q: Quote, *, actor: User, reason: str, now: datetime, ip: str = ""
) -> Quote:
    """Ops approve a discount above the sales limit; the quote is then sent."""
    if not actor.is_ops:
        raise Forbidden(N_("Only operations staff can approve a discount above 10 %."))
    if q.status != QuoteStatus.pending_approval:
        raise QuoteStateError()
    reason = single_line(reason, 500)
    if not reason:
        raise InvalidInput(N_("Say why this discount is approved."), field="reason")
    q.approved_by_id = actor.id
    q.approved_at = now
    q.approval_reason = reason
    q.approved_discount_bp = q.discount_bp
    _mark_sent(session, q, now)
    session.add(q)
    session.flush()
    audit.record(
        session,
        action="quote.approved",
        now=now,
        actor=actor,
        target=f"quote:{q.id}",
        ip=ip,
        discount_bp=q.discount_bp,
        reason=reason,
    )
    return q


def decline_quote(
    session: Session, q: Quote, *, actor: User, reason: str, now: datetime, ip: str = ""
) -> Quote:
    if not actor.is_ops:
        raise Forbidden(N_("Only operations staff can approve a discount above 10 %."))
    if q.status != QuoteStatus.pending_approval:
        raise QuoteStateError()
    reason = single_line(reason, 500)
    if not reason:
        raise InvalidInput(N_("Say why this discount is declined."), field="reason")
    q.status = QuoteStatus.draft.value
    q.approval_requested_at = None
    q.updated_at = now
    session.add(q)
    session.flush()
    audit.record(
        session,
        action="quote.approval_declined",
        now=now,
        actor=actor,
        target=f"quote:{q.id}",
        ip=ip,
        discount_bp=q.discount_bp,
        reason=reason,
    )
    return q


def withdraw_quote(
    session: Session, q: Quote, *, actor: User, now: datetime, ip: str = ""
) -> Quote:
    if q.status in (QuoteStatus.accepted, QuoteStatus.withdrawn):
        raise QuoteStateError(N_("An accepted or withdrawn quote cannot be withdrawn."))
    q.status = QuoteStatus.withdrawn.value
    q.withdrawn_at = now
    q.updated_at = now
    session.add(q)
    session.flush()
    audit.record(
        session, action="quote.withdrawn", now=now, actor=actor, target=f"quote:{q.id}", ip=ip
    )
    return q


def record_pdf_download(
    session: Session, q: Quote, *, actor: User, now: datetime, ip: str = ""
) -> None:
    audit.record(
        session, action="quote.pdf_downloaded", now=now, actor=actor, target=f"quote:{q.id}", ip=ip
    )


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
        audit.record(session, action="quote.viewed", now=now, target=f"quote:{q.id}", ip=ip)
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
    audit.record(session, action="quote.accepted", now=now, target=f"quote:{q.id}", ip=ip)
    return q


def deploy_url(q: Quote) -> str:
    """Where an accepted node quote lands: the /deploy form, prefilled."""
    pairs: list[tuple[str, str]] = [
        ("sku", q.sku_id),
        ("nodes", str(q.quantity)),
    ]
    if q.image_id:
        pairs.append(("image", q.image_id))
    if q.note_model_size:
        pairs.append(("note_model_size", q.note_model_size))
    if q.note_token_budget:
        pairs.append(("note_token_budget", q.note_token_budget))
    if q.quantity > 1:
        pairs += [("note_node_count", str(q.quantity)), ("note_private_network", "1")]
    if q.note_comm_pattern:
        pairs.append(("note_comm_pattern", q.note_comm_pattern))
    if q.sizing_query:
        pairs.append(("sizing", q.sizing_query))
    pairs.append(("quote", q.token))
    return "/deploy?" + urlencode(pairs)


def share_path(q: Quote) -> str:
    return f"/q/{q.token}"


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
    )


def claim_for_order(session: Session, quote_id: int) -> bool:
    """Checkout's question before it creates an order from a quote: may a new order use
    it? False when another order already did (one quote, one order). The quote row is
    locked until the transaction ends; ``mark_used`` records the order once it exists."""
    q = session.exec(select(Quote).where(Quote.id == quote_id).with_for_update()).first()
    return q is not None and q.used_order_id is None


def mark_used(session: Session, quote_id: int, order_id: int, now: datetime) -> None:
    """Checkout created ``order_id`` from this quote. One quote, one order."""
    q = session.exec(select(Quote).where(Quote.id == quote_id).with_for_update()).first()
    if q is None:
        raise QuoteNotFound()
    if q.used_order_id is not None and q.used_order_id != order_id:
        raise QuoteAlreadyUsed()
    if q.used_order_id == order_id:
        return
    q.used_order_id = order_id
    q.used_at = now
    session.add(q)
    session.flush()
    audit.record(session, action="quote.used", now=now, target=f"quote:{q.id}", order_id=order_id)


# ----------------------------------------------------------------------------- cluster requests
# A "talk to sales" request for any SKU, node count and term. It is a sales conversation:
# created, listed and moved between states only here.

CLUSTER_REQUEST_STATUS_LABELS = {
    ClusterRequestStatus.new.value: N_("New"),
    ClusterRequestStatus.contacted.value: N_("Contacted"),
    ClusterRequestStatus.quoted.value: N_("Quoted"),
    ClusterRequestStatus.closed.value: N_("Closed"),
}
CLUSTER_REQUEST_PAGE_SIZE = 25
CLUSTER_REQUEST_PATH = "/cluster-request"


class ClusterRequestNotFound(NotFound):
    code = "cluster_request_not_found"
    default_message = N_("We could not find that request.")


def cluster_request_path(
    sku: str = "", nodes: int | None = None, months: int | None = None, sizing: str = ""
) -> str:
    """The prefilled cluster request form: the sales path for any SKU and node count."""
    pairs = [
        (k, str(v))
        for k, v in (("sku", sku), ("nodes", nodes), ("months", months), ("sizing", sizing))
        if v not in (None, "")
    ]
    return CLUSTER_REQUEST_PATH + ("?" + urlencode(pairs) if pairs else "")


def create_cluster_request(
    session: Session, data: ClusterRequestIn, *, user_id: int | None, now: datetime
) -> ClusterRequest:
    row = ClusterRequest(
        sku_id=data.sku,
        nodes=data.nodes,
        months=data.months,
        start_date=data.start_date,
        workload=data.workload,
        name=data.name,
        email=data.email,
        company=data.company,
        sizing_query=sizing_query_of(data.sizing),
        user_id=user_id,
        created_at=now,
    )
    session.add(row)
    session.flush()
    return row


def get_cluster_request(session: Session, request_id: int) -> ClusterRequest:
    row = session.get(ClusterRequest, request_id)
    if row is None:
        raise ClusterRequestNotFound()
    return row


def count_new_cluster_requests(session: Session) -> int:
    return int(
        session.exec(
            select(func.count())
            .select_from(ClusterRequest)
            .where(ClusterRequest.status == ClusterRequestStatus.new.value)
        ).one()
    )


@dataclass
class ClusterRequestPage:
    items: list[ClusterRequest]
    page: int
    pages: int
    total: int


def list_cluster_requests(session: Session, *, status: str, page: int) -> ClusterRequestPage:
    stmt = select(ClusterRequest)
    count = select(func.count()).select_from(ClusterRequest)
    if status in CLUSTER_REQUEST_STATUS_LABELS:
        stmt = stmt.where(ClusterRequest.status == status)
        count = count.where(ClusterRequest.status == status)
    total = int(session.exec(count).one())
    size = CLUSTER_REQUEST_PAGE_SIZE
    pages = max(1, (total + size - 1) // size)
    page = min(max(page, 1), pages)
    items = session.exec(
        stmt.order_by(col(ClusterRequest.created_at).desc(), col(ClusterRequest.id).desc())
        .offset((page - 1) * size)
        .limit(size)
    ).all()
    return ClusterRequestPage(list(items), page, pages, total)


def update_cluster_request(
    session: Session,
    request_id: int,
    *,
    status: str,
    staff_note: str | None,
    actor: User,
    now: datetime,
    ip: str = "",
) -> ClusterRequest:
    if status not in CLUSTER_REQUEST_STATUS_LABELS:
        raise InvalidInput(N_("Choose one of the listed statuses."), field="status")
    row = get_cluster_request(session, request_id)
    old = row.status
    row.status = status
    if staff_note is not None:
        row.staff_note = staff_note.strip()[:4000]
    session.add(row)
    audit.record(
        session,
        action="cluster_request.status",
        now=now,
        actor=actor,
        target=f"cluster_request:{row.id}",
        ip=ip,
        old=old,
        status=status,
    )
    return row


def quote_values_from_request(session: Session, request_id: int) -> dict[str, str]:
    """The quote builder's fields prefilled from a cluster request."""
    row = get_cluster_request(session, request_id)
    s = spec(row.sku_id)
    quantity = row.nodes * s.gpus_per_node if s.price_per_gpu else row.nodes
    return {
        "sku": row.sku_id,
        "quantity": str(quantity),
        "months": str(row.months),
        "prospect_name": row.name,
        "prospect_email": row.email,
        "prospect_company": row.company,
        "sizing": row.sizing_query,
        "sizing_notes": row.workload,
        "from_request": str(row.id),
    }


def mark_cluster_request_quoted(
    session: Session, request_id: int, q: Quote, *, actor: User, now: datetime, ip: str = ""
) -> None:
    """A quote was built from this request: it moves to "quoted" (if still open)."""
    row = session.get(ClusterRequest, request_id)
    if row is None or row.status not in (
        ClusterRequestStatus.new.value,
        ClusterRequestStatus.contacted.value,
    ):
        return
    row.status = ClusterRequestStatus.quoted.value
    row.staff_note = (row.staff_note + f"\n{pricing.reference(q.id or 0)}").strip()
    session.add(row)
    audit.record(
        session,
        action="cluster_request.status",
        now=now,
        actor=actor,
        target=f"cluster_request:{row.id}",
        ip=ip,
        status=row.status,
        quote_id=q.id,
    )
