"""Checkout and the customer's side of an order's life.

``create_order`` records the deploy form (idempotent per user and key), ``review`` shows
what paying would do, ``pay_order`` turns the first month into a ledger hold in the same
transaction as the node hold, ``cancel_order`` applies the refund-on-miss rule (and
cancel-at-period-end for running leases). Services never commit: the caller owns the
transaction. Customer-facing reads go through ``visible_orders`` / ``get_order_for``.

Early cancel (ours): a paid order whose promised date has not passed yet cannot be
cancelled by the customer. The product promises a full refund only when we miss the date;
before that the nodes are being prepared for the customer, so the customer talks to ops
(who may cancel it by hand). Once the date has passed without delivery, the customer can
cancel in one click and the first month goes back to the balance in full.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from typing import Any, cast

from sqlalchemy import Date, Integer, Table, bindparam, literal, union_all
from sqlalchemy import insert as sa_insert
from sqlalchemy import select as sa_select
from sqlalchemy import update as sa_update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import make_transient_to_detached
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select

from app import messages
from app.accounts.models import User
from app.catalog.service import promise_reads
from app.catalog.specs import SELF_SERVE_MAX_NODES
from app.clock import utc
from app.db import is_postgres, pg_type_name
from app.errors import N_, Conflict, InvalidInput, NotFound
from app.numbers import NumberError, parse_int
from app.orders.lifecycle import (
    LEASE_ACTIVE,
    PRE_DELIVERY,
    OrderStatus,
    check_transition,
    is_late,
)
from app.orders.models import Order, OrderEvent, OrderHost

MAX_NODES = SELF_SERVE_MAX_NODES  # more is a cluster request (app.quotes)
NOTE_MAX = 80
FREE_TEXT_MAX = 4000


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------


class OrderNotFound(NotFound):
    code = "order_not_found"
    default_message = N_("We could not find that order.")


ABOVE_SELF_SERVE = N_("More than 16 nodes is a cluster we plan with you: talk to sales.")


class AboveSelfServe(InvalidInput):
    """More nodes than one self-serve order takes: the answer is the sales path."""

    code = "above_self_serve"
    default_message = ABOVE_SELF_SERVE

    def __init__(self, cluster_request_url: str) -> None:
        super().__init__(field="nodes")
        self.extra = {"cluster_request_url": cluster_request_url}


class IdempotencyConflict(Conflict):
    code = "idempotency_conflict"
    default_message = N_(
        "This idempotency key was already used for a different order (#{order_id})."
    )


class PromiseChanged(Conflict):
    code = "promise_changed"
    default_message = N_("The delivery date changed to {date}; check it and pay again.")

    def __init__(self, new_date: date, explanation: str = "") -> None:
        super().__init__(date=messages.format_day(new_date))
        self.new_date = new_date
        self.explanation = explanation


class PriceChanged(Conflict):
    code = "price_changed"
    default_message = N_(
        "The quoted price expired, so the list price applies now; check it and pay again."
    )


class NotPayable(Conflict):
    code = "not_payable"
    default_message = N_("This order cannot be paid in its current state.")


class NotPromisable(Conflict):
    code = "not_promisable"
    default_message = N_(
        "We cannot promise a delivery date for this configuration right now. "
        "Choose fewer nodes or talk to our sales team."
    )


class NotCancellable(Conflict):
    code = "not_cancellable"
    default_message = N_("This order cannot be cancelled in its current state.")


class OrderChangedMeanwhile(Conflict):
    """The customer confirmed one kind of cancel, but the order moved on meanwhile (e.g. ops
    delivered it a moment earlier): nothing is done, the customer looks again."""

    code = "order_changed"
    default_message = N_(
        "This order changed while you were deciding (it may have just been delivered). "
        "Nothing was cancelled: please look at it again."
    )


# ---------------------------------------------------------------------------------------
# The draft: what the deploy form (or the API) asks for, validated
# ---------------------------------------------------------------------------------------


@dataclass
class OrderDraft:
    sku_id: str = ""
    quantity: int = 1
    image_id: str = ""
    ssh_key_ids: list[int] = field(default_factory=list)
    new_key_name: str = ""
    new_key_text: str = ""
    note_model_size: str = ""
    note_token_budget: str = ""
    note_node_count: int | None = None
    note_private_network: bool = False
    note_comm_pattern: str = ""
    note_free_text: str = ""
    sizing_query: str = ""
    quote_token: str = ""

    def fingerprint(self) -> str:
        d = asdict(self)
        d["ssh_key_ids"] = sorted(set(self.ssh_key_ids))
        d["new_key_text"] = " ".join(self.new_key_text.split())
        raw = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(raw.encode()).hexdigest()


def new_idempotency_key() -> str:
    return secrets.token_urlsafe(18)


def _int(value: Any) -> int | None:
    """A whole number by the one number rule (app.numbers); None when absent or refused."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    try:
        return parse_int(value, max_value=10**9)
    except NumberError:
        return None


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "on", "yes") if value is not None else False


def parse_draft(data: dict[str, Any]) -> tuple[OrderDraft, dict[str, str]]:
    """Raw input (the deploy form's text, the simulator) → a typed draft, then
    ``check_draft``. A number that does not parse becomes 0 ("not a valid count or key"),
    which ``check_draft`` refuses with the field's message. Never touches the database."""
    raw_ids = data.get("ssh_key_ids") or []
    if isinstance(raw_ids, (str, int)):
        raw_ids = [raw_ids]
    raw_nc = data.get("note_node_count")
    d = OrderDraft(
        sku_id=str(data.get("sku") or ""),
        quantity=_int(data.get("nodes")) or 0,
        image_id=str(data.get("image") or ""),
        ssh_key_ids=[_int(v) or 0 for v in raw_ids],
        new_key_name=str(data.get("new_key_name") or ""),
        new_key_text=str(data.get("new_key_text") or ""),
        note_model_size=str(data.get("note_model_size") or ""),
        note_token_budget=str(data.get("note_token_budget") or ""),
        note_node_count=None if raw_nc in (None, "") else (_int(raw_nc) or 0),
        note_private_network=_truthy(data.get("note_private_network")),
        note_comm_pattern=str(data.get("note_comm_pattern") or ""),
        note_free_text=str(data.get("note_free_text") or ""),
        sizing_query=str(data.get("sizing") or ""),
        quote_token=str(data.get("quote") or ""),
    )
    return d, check_draft(d)


def check_draft(d: OrderDraft) -> dict[str, str]:
    """The one validation of a draft, however it arrived (the form via ``parse_draft``, the
    API's typed ``OrderCreate``): field errors as English msgids (translate at render
    time). Trims ``d`` in place and clamps what would be echoed back. No database."""
    from app.catalog import specs

    errors: dict[str, str] = {}
    d.sku_id = d.sku_id.strip()
    try:
        sku = specs.spec(d.sku_id)
    except KeyError:
        sku = None
        errors["sku"] = N_("Choose a node type.")
    if sku is not None and not sku.self_serve:
        errors["sku"] = N_(
            "This rack is sold through our sales team, not self-serve checkout. Ask for a quote."
        )
    if d.quantity > MAX_NODES:
        errors["nodes"] = ABOVE_SELF_SERVE
        d.quantity = 1
    elif d.quantity < 1:
        errors["nodes"] = N_("Enter a node count between 1 and 16.")
        d.quantity = 1
    d.image_id = d.image_id.strip()
    image_ids = {i.id for i in specs.all_images()}
    if d.image_id not in image_ids:
        errors["image"] = N_("Choose an operating system image.")
    elif sku is not None and not specs.image_fits(sku.id, d.image_id):
        errors["image"] = (
            N_("This image is for NVIDIA nodes; MI355X needs a ROCm image.")
            if sku.vendor == "amd"
            else N_("ROCm images run only on AMD MI355X; choose an Ubuntu image with CUDA.")
        )
    if any(i < 1 for i in d.ssh_key_ids):
        errors["ssh_keys"] = N_("Choose one of your saved keys.")
        d.ssh_key_ids = [i for i in d.ssh_key_ids if i >= 1]
    d.new_key_name = d.new_key_name.strip()[:80]
    d.new_key_text = d.new_key_text.strip()
    if d.new_key_text and not d.new_key_name:
        errors["new_key_name"] = N_("Give the new key a name, for example “laptop”.")
    if d.new_key_text:
        from app.accounts.sshkeys import SshKeyError, looks_private, parse_public_key

        try:
            parse_public_key(d.new_key_text)
        except SshKeyError as e:
            errors["new_key_text"] = e.message
            if looks_private(d.new_key_text):
                d.new_key_text = ""  # never echo a private key back into the page
    if "new_key_text" in errors:
        errors.pop("new_key_name", None)  # one clear message about the key itself
    if (
        not d.ssh_key_ids
        and not d.new_key_text
        and "ssh_keys" not in errors
        and "new_key_text" not in errors  # a private key was pasted: that message says it
    ):
        errors["ssh_keys"] = N_(
            "Add at least one SSH public key: choose a saved key or paste a new one."
        )
    for name in ("note_model_size", "note_token_budget"):
        value = str(getattr(d, name)).strip()
        if len(value) > NOTE_MAX:
            errors[name] = N_("Keep this under 80 characters.")
        setattr(d, name, value[:NOTE_MAX])
    if d.note_node_count is not None and not 1 <= d.note_node_count <= 10000:
        errors["note_node_count"] = N_("Enter a whole number of nodes, or leave it empty.")
        d.note_node_count = None
    d.note_comm_pattern = d.note_comm_pattern.strip()
    if len(d.note_comm_pattern) > 300:
        errors["note_comm_pattern"] = N_("Keep this under 300 characters.")
        d.note_comm_pattern = d.note_comm_pattern[:300]
    nodes_meant = max(d.quantity, d.note_node_count or 0)
    if d.note_private_network and nodes_meant > 1 and not d.note_comm_pattern:
        errors["note_comm_pattern"] = N_(
            "Describe the job's communication pattern so we can plan the private network "
            "(for example: data parallel all-reduce across nodes, tensor parallel inside)."
        )
    d.note_free_text = d.note_free_text.strip()
    if len(d.note_free_text) > FREE_TEXT_MAX:
        errors["note_free_text"] = N_("Keep the notes under 4,000 characters.")
        d.note_free_text = d.note_free_text[:FREE_TEXT_MAX]
    d.sizing_query = d.sizing_query.strip().lstrip("?")[:2000]
    d.quote_token = d.quote_token.strip()[:200]
    return errors


# ---------------------------------------------------------------------------------------
# Prices and promises for a draft (deploy summary, review)
# ---------------------------------------------------------------------------------------


@dataclass
class PriceTerms:
    unit_price_cents: int
    quote_id: int | None = None
    quote_expires_at: datetime | None = None
    quote_months: int | None = None  # the quoted term, shown on /deploy
    quote_renewals_keep_price: bool = False  # monthly renewals charge the quoted price too
    quote_note: str = ""  # an English msgid when a quote was given but not honoured
    quote_note_params: dict[str, Any] = field(default_factory=dict)


def price_terms(
    session: Session,
    sku_id: str,
    quantity: int,
    quote_token: str,
    now: datetime,
    *,
    list_price: int | None = None,
) -> PriceTerms:
    """The list price, or the quoted unit price while a matching quote is valid.
    ``list_price``: the SKU's list price as the caller read it in this transaction."""
    from app.catalog import service as catalog

    if list_price is None:
        list_price = catalog.list_price_cents(session, sku_id)
    if not quote_token:
        return PriceTerms(unit_price_cents=list_price)
    from app.quotes import service as quotes

    terms = quotes.quote_for_checkout(session, quote_token, now)
    if terms is None:
        return PriceTerms(
            unit_price_cents=list_price,
            quote_note=N_("This quote link is not valid any more, so the list price applies."),
        )
    if terms.sku_id != sku_id or int(terms.quantity) != quantity:
        return PriceTerms(
            unit_price_cents=list_price,
            quote_note=N_(
                "The quote covers {quantity} × {sku}; for another configuration the list "
                "price applies."
            ),
            quote_note_params={"quantity": terms.quantity, "sku": _sku_name(terms.sku_id)},
        )
    return PriceTerms(
        unit_price_cents=int(terms.unit_price_cents),
        quote_id=getattr(terms, "quote_id", None) or getattr(terms, "id", None),
        quote_expires_at=terms.expires_at,
        quote_months=getattr(terms, "months", None),
        quote_renewals_keep_price=bool(getattr(terms, "renewals_keep_price", False)),
    )


def _sku_name(sku_id: str) -> str:
    """The node's name for people ("HGX B300"), not its id ("hgx-b300")."""
    from app.catalog import specs

    try:
        return specs.spec(sku_id).name
    except KeyError:
        return sku_id


def balance_of(session: Session, user: User | None) -> tuple[int | None, int | None]:
    """(available, held) in cents, or (None, None) for a visitor."""
    if user is None or user.id is None:
        return None, None
    from app.ledger import service as ledger

    return ledger.available_cents(session, user.id), ledger.held_cents(session, user.id)


# ---------------------------------------------------------------------------------------
# Timeline
# ---------------------------------------------------------------------------------------


def _event_values(
    order: Order,
    kind: str,
    message: str,
    now: datetime,
    actor: User | int | None,
    customer_visible: bool,
    params: dict[str, Any] | None,
) -> dict[str, Any]:
    """An event's column values (``order_id`` None for an order not inserted yet)."""
    return {
        "order_id": order.id,
        "at": now,
        "kind": kind[:40],
        "message": messages.render(message, params, locale="en")[:1000],
        "msgid": message,
        "params": messages.encode(params),
        "actor_id": actor.id if isinstance(actor, User) else actor,
        "customer_visible": customer_visible,
    }


def add_event(
    session: Session,
    order: Order,
    kind: str,
    message: str,
    now: datetime,
    actor: User | int | None = None,
    *,
    customer_visible: bool = True,
    params: dict[str, Any] | None = None,
    flush: bool = True,
) -> OrderEvent:
    """Append a timeline entry (shared with the ops desk).

    ``message`` is an English msgid (``N_``) with ``{name}`` parameters: the event is
    stored as that code and rendered in the reader's language (app/notifications/
    messages.py); the English text is kept as well, for logs and exports."""
    ev = OrderEvent(**_event_values(order, kind, message, now, actor, customer_visible, params))
    session.add(ev)
    if flush:  # flush=False: the next flush writes it (with the checkout's other rows)
        session.flush()
    return ev


_EVENTS = cast(Table, OrderEvent.__table__)  # type: ignore[attr-defined]
_ORDERS = cast(Table, Order.__table__)  # type: ignore[attr-defined]


def timeline(session: Session, order_id: int, *, customer: bool = True) -> list[OrderEvent]:
    stmt = select(OrderEvent).where(OrderEvent.order_id == order_id)
    if customer:
        stmt = stmt.where(col(OrderEvent.customer_visible).is_(True))
    stmt = stmt.order_by(col(OrderEvent.at), col(OrderEvent.id))
    return list(session.exec(stmt).all())


def hosts_of(session: Session, order_id: int) -> list[OrderHost]:
    stmt = select(OrderHost).where(OrderHost.order_id == order_id).order_by(col(OrderHost.id))
    return list(session.exec(stmt).all())


# ---------------------------------------------------------------------------------------
# Reads that know who asks
# ---------------------------------------------------------------------------------------


def visible_orders(session: Session, user: User, limit: int = 200) -> list[Order]:
    stmt = (
        select(Order)
        .where(Order.user_id == user.id)
        .order_by(col(Order.created_at).desc(), col(Order.id).desc())
        .limit(limit)
    )
    return list(session.exec(stmt).all())


def get_order_for(session: Session, user: User, order_id: int, *, lock: bool = False) -> Order:
    """The user's own order, or 404 (also for other customers' ids). With ``lock`` the row
    as it is once locked, even when this session read it before (an idempotent replay):
    the identity map's older copy would let a payment overwrite a discard committed while
    it waited for the lock."""
    stmt = select(Order).where(Order.id == order_id, Order.user_id == user.id)
    if lock:
        stmt = stmt.with_for_update().execution_options(populate_existing=True)
    order = session.exec(stmt).first()
    if order is None:
        raise OrderNotFound()
    return order


def is_order_late(order: Order, now: datetime) -> bool:
    return is_late(order.status, order.promised_date, now)


def ssh_keys_of(order: Order) -> list[dict[str, str]]:
    try:
        data = json.loads(order.ssh_keys_json or "[]")
    except ValueError:
        return []
    return [k for k in data if isinstance(k, dict)]


# ---------------------------------------------------------------------------------------
# Create
# ---------------------------------------------------------------------------------------


_BY_KEY = sa_select(_ORDERS.c.id, _ORDERS.c.request_hash).where(
    _ORDERS.c.user_id == bindparam("uid"), _ORDERS.c.idempotency_key == bindparam("key")
)


# The same look-up as a branch of the promise's UNION ALL: (kind, order id, NULL, NULL).
_KEY_BRANCH = sa_select(
    literal("o"), _ORDERS.c.id, literal(None, Date), literal(None, Integer)
).where(_ORDERS.c.user_id == bindparam("uid"), _ORDERS.c.idempotency_key == bindparam("key"))
# the catalog's promise reads (its typed builder) and the key's order, in one round trip
_PROMISE_AND_KEY: Any = union_all(*promise_reads().selects, _KEY_BRANCH)


def find_existing(session: Session, user: User, key: str, draft: OrderDraft) -> Order | None:
    """The order this key already made: same body → it; different body → 409. The usual
    answer (a new key: none) comes from one plain read, without the ORM."""
    assert user.id is not None
    row = session.connection().execute(_BY_KEY, {"uid": user.id, "key": key}).first()
    if row is None:
        return None
    if row[1] and row[1] != draft.fingerprint():
        raise IdempotencyConflict(order_id=row[0])
    existing = session.get(Order, int(row[0]))
    assert existing is not None  # read in this transaction a moment ago; orders are kept
    return existing


def _key_dict(k: Any) -> dict[str, str]:
    return {
        "name": str(getattr(k, "name", "") or ""),
        "public_key": str(getattr(k, "public_key", None) or getattr(k, "text", "") or ""),
        "fingerprint": str(getattr(k, "fingerprint", "") or ""),
    }


def _new_or_saved_key(
    session: Session, user: User, draft: OrderDraft, saved: list[Any], now: datetime
) -> Any:
    """A pasted key that is already saved is simply used; a new one is parsed and saved."""
    from app.accounts import service as accounts
    from app.accounts.sshkeys import SshKeyError, parse_public_key

    try:
        fp = parse_public_key(draft.new_key_text).fingerprint
    except SshKeyError:
        fp = None  # add_ssh_key explains what is wrong with it
    for k in saved:
        if fp is not None and k.fingerprint == fp:
            return k
    return accounts.add_ssh_key(session, user, draft.new_key_name, draft.new_key_text, now)


@dataclass
class Created:
    """What ``create_order_for_checkout`` did: the order, whether this call made it, and the
    delivery promise it checked (read moments ago in the same transaction: the checkout
    tells the customer that date and confirms it under the SKU lock)."""

    order: Order
    created: bool
    promise: Any = None  # app.catalog.service.Promise; None for a replayed key


def create_order(
    session: Session, *, user: User, draft: OrderDraft, idempotency_key: str, now: datetime
) -> tuple[Order, bool]:
    """Record the order (awaiting payment, price frozen). Returns (order, created).

    The same key with the same body returns the existing order; a different body → 409.
    """
    made = create_order_for_checkout(
        session, user=user, draft=draft, idempotency_key=idempotency_key, now=now
    )
    session.flush()
    return made.order, made.created


def create_order_for_checkout(
    session: Session, *, user: User, draft: OrderDraft, idempotency_key: str, now: datetime
) -> Created:
    """``create_order`` for a caller that pays next (``pay_order(order=…, seen_promise=…)``),
    so the payment neither locks the new row again nor reads the promise again."""
    from app.accounts import service as accounts

    assert user.id is not None
    key = (idempotency_key or "").strip()
    if not key or len(key) > 80:
        raise InvalidInput(
            N_("A request key of 1 to 80 characters is needed."), field="idempotency_key"
        )
    from app.catalog import service as catalog

    # The key's order (usually none) is looked up in the promise's own round trip; a
    # replay is answered before anything is checked or written, as if looked up first.
    # The statement is composed here, from the catalog's typed part and our own.
    rows = (
        session.connection()
        .execute(_PROMISE_AND_KEY, {"sku": draft.sku_id, "uid": user.id, "key": key})
        .all()
    )
    seen, list_price = catalog.promise_from_rows(draft.sku_id, draft.quantity, now, rows)
    if any(r[0] == "o" for r in rows):
        existing = find_existing(session, user, key, draft)
        if existing is not None:
            return Created(existing, False)
    if not seen.available:
        raise InvalidInput(
            field="nodes",
            errors={
                "nodes": N_(
                    "We cannot promise a delivery date for this many nodes right now. "
                    "Choose fewer nodes or talk to our sales team."
                )
            },
        )

    # SSH keys: saved ones must be the user's; a pasted one is parsed and saved by accounts.
    saved = {k.id: k for k in accounts.ssh_key_choices(session, user.id)}
    chosen = []
    for kid in dict.fromkeys(draft.ssh_key_ids):
        if kid not in saved:
            raise InvalidInput(
                field="ssh_keys", errors={"ssh_keys": N_("Choose one of your saved keys.")}
            )
        chosen.append(_key_dict(saved[kid]))
    if draft.new_key_text:
        chosen.append(_key_dict(_new_or_saved_key(session, user, draft, list(saved.values()), now)))
    if not chosen:
        raise InvalidInput(
            field="ssh_keys",
            errors={
                "ssh_keys": N_(
                    "Add at least one SSH public key: choose a saved key or paste a new one."
                )
            },
        )

    terms = price_terms(
        session, draft.sku_id, draft.quantity, draft.quote_token, now, list_price=list_price
    )
    if terms.quote_id is not None:
        terms = _claim_quote(session, terms, draft, now)
    order = _new_order_object(
        user_id=user.id,
        idempotency_key=key,
        request_hash=draft.fingerprint(),
        status=OrderStatus.awaiting_payment.value,
        sku_id=draft.sku_id,
        quantity=draft.quantity,
        image_id=draft.image_id,
        ssh_keys_json=json.dumps(chosen),
        note_model_size=draft.note_model_size,
        note_token_budget=draft.note_token_budget,
        note_node_count=draft.note_node_count,
        note_private_network=draft.note_private_network,
        note_comm_pattern=draft.note_comm_pattern,
        note_free_text=draft.note_free_text,
        sizing_query=draft.sizing_query,
        unit_price_cents=terms.unit_price_cents,
        monthly_total_cents=terms.unit_price_cents * draft.quantity,
        quote_id=terms.quote_id,
        quote_expires_at=terms.quote_expires_at,
        created_at=now,
    )
    created = _event_values(
        order, "created", N_("Order placed; waiting for payment."), now, user, True, None
    )
    new_id = _insert_new_order(session, order, created)
    if new_id is None:
        # A concurrent submit with the same key won the race: answer with its order.
        again = find_existing(session, user, key, draft)
        if again is None:  # pragma: no cover - the conflict was on this very key
            raise IdempotencyConflict()
        return Created(again, False)
    if order.quote_id is not None:
        from app.quotes import service as quotes

        assert order.id is not None
        quotes.mark_used(session, order.quote_id, order.id, now)
    return Created(order, True, seen)


_ORDER_DEFAULTS: dict[str, Any] = {}


def _new_order_object(**values: Any) -> Order:
    """An ``Order`` for a row inserted with Core: every column's value (the model's defaults
    for the rest) set straight into the object, without the model's ``__init__`` (its
    per-attribute events are most of its cost; a table model does not validate anyway)."""
    if not _ORDER_DEFAULTS:
        for name, info in Order.model_fields.items():
            if name in _ORDERS.c and not info.is_required():
                _ORDER_DEFAULTS[name] = info.get_default(call_default_factory=True)
    order = Order._sa_class_manager.new_instance()  # type: ignore[attr-defined]
    order.__dict__.update(_ORDER_DEFAULTS)
    order.__dict__.update(values)
    return cast(Order, order)


def _insert_new_order(session: Session, order: Order, created: dict[str, Any]) -> int | None:
    """INSERT … ON CONFLICT (user, key) DO NOTHING RETURNING id, and the order's "created"
    timeline event (``created``: its values, the order id aside): the new order's id, or
    None when an order with this key exists (no savepoint, no retry; no event either). The
    object becomes the session's persistent copy of the row, as if loaded. On PostgreSQL
    both rows are one statement (a data-modifying WITH: the event is inserted only for an
    order this statement inserted)."""
    values = {c.key: getattr(order, c.key) for c in _ORDERS.columns if c.key != "id"}
    conn = session.connection()
    if is_postgres(session):
        params = {**{f"o_{k}": v for k, v in values.items()}}
        params.update({f"e_{k}": v for k, v in created.items() if k != "order_id"})
        new_id = conn.execute(_ORDER_AND_EVENT_PG, params).scalar()
    else:
        new_id = conn.execute(_ORDER_INSERT_SQLITE, values).scalar()
        if new_id is not None:
            conn.execute(sa_insert(_EVENTS), {**created, "order_id": int(new_id)})
    if new_id is None:
        return None
    order.id = int(new_id)
    make_transient_to_detached(order)
    session.add(order)
    return order.id


_EVENT_COLUMNS = [c for c in _EVENTS.columns if c.key not in ("id", "order_id")]
_NEW_ORDER = (
    pg_insert(_ORDERS)
    .values(
        {c.key: bindparam(f"o_{c.key}", type_=c.type) for c in _ORDERS.columns if c.key != "id"}
    )
    .on_conflict_do_nothing(index_elements=["user_id", "idempotency_key"])
    .returning(_ORDERS.c.id)
    .cte("new_order")
)
_ORDER_AND_EVENT_PG = sa_select(_NEW_ORDER.c.id).add_cte(
    sa_insert(_EVENTS)
    .from_select(
        ["order_id", *(c.key for c in _EVENT_COLUMNS)],
        sa_select(
            _NEW_ORDER.c.id,
            *(bindparam(f"e_{c.key}", type_=c.type) for c in _EVENT_COLUMNS),
        ),
    )
    .cte("created_event")
)
_ORDER_INSERT_SQLITE = (
    sqlite_insert(_ORDERS)
    .on_conflict_do_nothing(index_elements=["user_id", "idempotency_key"])
    .returning(_ORDERS.c.id)
)


def _claim_quote(
    session: Session, terms: PriceTerms, draft: OrderDraft, now: datetime
) -> PriceTerms:
    """One quote, one order: a quote another order already used gives the list price."""
    from app.quotes import service as quotes

    if terms.quote_id is not None and not quotes.claim_for_order(session, terms.quote_id):
        from app.catalog import service as catalog

        return PriceTerms(
            unit_price_cents=catalog.list_price_cents(session, draft.sku_id),
            quote_note=N_(
                "This quote was already used for another order, so the list price applies."
            ),
        )
    return terms


# ---------------------------------------------------------------------------------------
# Review
# ---------------------------------------------------------------------------------------


@dataclass
class Review:
    order: Order
    promise_date: date | None
    promise_explanation: str
    promise_available: bool
    available_cents: int
    shortfall_cents: int
    quote_expired: bool


def review(session: Session, order: Order, now: datetime) -> Review:
    """What paying now would do: the promise recomputed now, balance and shortfall."""
    from app.catalog import service as catalog
    from app.ledger import service as ledger

    if order.status == OrderStatus.awaiting_payment.value:
        p = catalog.current_promise(session, order.sku_id, order.quantity, now)
        pdate, expl, ok = p.date, p.explanation, bool(p.available)
    else:
        pdate, expl, ok = order.promised_date, order.promise_explanation, True
    available = ledger.available_cents(session, order.user_id)
    need = order.monthly_total_cents if order.status == OrderStatus.awaiting_payment.value else 0
    quote_expired = bool(order.quote_expires_at is not None and utc(order.quote_expires_at) <= now)
    return Review(
        order=order,
        promise_date=pdate,
        promise_explanation=expl,
        promise_available=ok,
        available_cents=available,
        shortfall_cents=max(0, need - available),
        quote_expired=quote_expired,
    )


# ---------------------------------------------------------------------------------------
# Pay
# ---------------------------------------------------------------------------------------


def _order_link(order: Order) -> str:
    return f"/console/orders/{order.id}"


def pay_order(
    session: Session,
    *,
    user: User,
    order_id: int,
    idempotency_key: str,
    now: datetime,
    expected_promise: date | None = None,
    order: Order | None = None,
    seen_promise: Any = None,
) -> Order:
    """awaiting_payment → paid in one transaction: node hold, promise frozen, first-month
    ledger hold, timeline event, notification. Idempotent: an order already paid is
    returned as it is. On any failure nothing of it stays (a savepoint is rolled back), so
    a caller may catch the error and still commit other work.

    ``order``: the order as ``create_order_for_checkout`` just inserted it in this
    transaction (its new row is invisible to others until commit, so it needs no lock
    read); ``seen_promise``: the promise that call checked. Both only save round trips."""
    from app.catalog import service as catalog
    from app.ledger import service as ledger

    new_order = order is not None and order.id == order_id and order.user_id == user.id
    if order is None or not new_order:
        order = get_order_for(session, user, order_id, lock=True)
        seen_promise = None
    if order.status != OrderStatus.awaiting_payment.value:
        if order.paid_at is not None:
            return order  # paid already: a double click or a resubmitted form pays once
        raise NotPayable()
    check_transition(order.status, OrderStatus.paid.value)

    # A quote's price holds until the quote expires; after that the list price applies.
    if order.quote_expires_at is not None and utc(order.quote_expires_at) <= now:
        list_price = catalog.list_price_cents(session, order.sku_id)
        order.unit_price_cents = list_price
        order.monthly_total_cents = list_price * order.quantity
        order.quote_expires_at = None
        order.quote_id = None
        order.pay_attempts += 1
        session.add(order)
        add_event(session, order, "repriced", N_("The quote expired; the list price applies."), now)
        session.flush()
        raise PriceChanged()

    assert order.id is not None and user.id is not None
    amount = order.monthly_total_cents
    attempts = order.pay_attempts + 1
    try:
        return _pay_twice(
            session, order, user, amount, now, expected_promise, attempts, seen_promise, new_order
        )
    except ledger.InsufficientBalance as short:
        # Short: the savepoint took the ledger's record of the refused attempt with it.
        # Record the refusal again outside it (no new attempt at a hold: one that succeeded
        # because a top-up landed this very moment would stay held if the payment then
        # failed), so the caller may commit it; the same key works again after a top-up.
        order.pay_attempts = attempts
        session.add(order)
        raise ledger.record_declined_hold(
            session,
            user_id=user.id,
            key=_first_month_key(order),
            amount_cents=amount,
            available=short.available_cents,
            now=now,
            order_id=order.id,
            reason=f"order #{order.id}: first month",
        ) from None
    except Exception:
        order.pay_attempts = attempts  # the attempt counts, whatever refused it
        session.add(order)
        raise


def _pay_twice(
    session: Session,
    order: Order,
    user: User,
    amount: int,
    now: datetime,
    expected_promise: date | None,
    attempts: int,
    seen: Any,
    new_order: bool,
) -> Order:
    try:
        return _pay_held(
            session, order, user, amount, now, expected_promise, attempts,
            seen=seen, new_order=new_order,
        )  # fmt: skip
    except _DateMoved:
        # Another order took the stock between the read and the lock (rare): everything of
        # the first try was rolled back with its savepoint; write the messages after the lock.
        return _pay_held(
            session, order, user, amount, now, expected_promise, attempts,
            early=False, new_order=new_order,
        )  # fmt: skip


def _first_month_key(order: Order) -> str:
    return f"order:{order.id}:first-month"


class _DateMoved(Exception):
    """The promise read before the SKU lock differs from the one made under it."""


def _paid_messages(session: Session, order: Order, user: User, day: date, now: datetime) -> None:
    """The paid event and notification (with its email), as codes (each reader sees their
    language), written at once as plain INSERTs."""
    conn = session.connection()
    for table, row in _paid_message_rows(session, order, user, day, now):
        conn.execute(sa_insert(table), row)


def _paid_message_rows(
    session: Session, order: Order, user: User, day: date, now: datetime
) -> list[tuple[Table, dict[str, Any]]]:
    """``_paid_messages``' rows (timeline event, notification, email), to be written by the
    hold's statement on PostgreSQL."""
    from app.notifications.service import notification_rows

    assert user.id is not None
    event = _event_values(
        order,
        "paid",
        N_("First month paid from the balance; delivery promised by {date}."),
        now,
        user,
        True,
        {"date": messages.day(day)},
    )
    return [
        (_EVENTS, event),
        *notification_rows(
            session,
            user_id=user.id,
            kind="order_paid",
            message=N_(
                "Order #{id} is paid. We promise delivery by {date}; if we miss it you can "
                "cancel for a full refund."
            ),
            params={"id": order.id, "date": messages.day(day)},
            now=now,
            link=_order_link(order),
            email_to=user.email,
            email_subject=N_("Order #{id} paid"),
            locale=user.locale or "en",
        ),
    ]


_ORDER_UPDATE = sa_update(_ORDERS).where(_ORDERS.c.id == bindparam("order_pk"))


def _update_order_now(
    session: Session, order: Order, changes: dict[str, Any], before: dict[str, Any]
) -> None:
    """One plain UPDATE of the order's row; the object shows the values as loaded (no second
    UPDATE at the next flush). ``before`` collects the old values, for a rollback."""
    for k in changes:
        before.setdefault(k, getattr(order, k))
    # the SET clause is the parameters' columns (statement built once)
    session.connection().execute(_ORDER_UPDATE, {"order_pk": order.id, **changes})
    for k, v in changes.items():
        set_committed_value(order, k, v)


def _pay_held(
    session: Session,
    order: Order,
    user: User,
    amount: int,
    now: datetime,
    expected_promise: date | None,
    attempts: int,
    *,
    seen: Any = None,
    early: bool = True,
    new_order: bool = False,
) -> Order:
    """The savepoint of a payment: messages, money held, the order paid, nodes reserved.

    Every buyer of the SKU waits on its stock row, and every payment of this customer on
    the balance row, until this transaction commits; so the work is ordered by what needs
    which lock (lock order as cancel: balance row first, stock row last):

    1. no lock: the promise the customer is told (``seen_promise``, read by create, or
       read now);
    2. balance row: the ledger hold, the order's UPDATE (paid, hold, promised date) and
       the timeline event, notification and email rows — on PostgreSQL ONE statement whose
       balance UPDATE takes the lock and decides every other write (a short balance writes
       nothing); elsewhere messages, hold and UPDATE one after another;
    3. SKU stock row: the lock, the promise confirmed under it (a statement of its own: it
       must see what the previous holder committed), the batch units and the reservation
       (PostgreSQL: one statement) — and COMMIT (which releases the savepoint).

    Without ``early`` (the second try after ``_DateMoved``: stock taken between the read
    and the lock) the messages carry the date made under the lock."""

    assert order.id is not None and user.id is not None
    before: dict[str, Any] = {}
    try:
        with _pay_savepoint(session):
            return _pay_in_savepoint(
                session, order, user, amount, now, expected_promise, attempts,
                seen=seen, early=early, new_order=new_order, before=before,
            )  # fmt: skip
    except BaseException:
        for k, v in before.items():  # rolled back with the savepoint: the object says so too
            set_committed_value(order, k, v)
        raise


@contextmanager
def _pay_savepoint(session: Session) -> Iterator[None]:
    """The payment's savepoint. On PostgreSQL a plain ``SAVEPOINT`` that is rolled back on
    failure and otherwise left to the COMMIT (which releases it): no ``RELEASE`` round trip
    while the SKU's stock row is locked. What the ORM holds is made true again on failure
    as ``begin_nested`` does: rows inserted inside are forgotten, the rest is reloaded when
    next read. Elsewhere (SQLite) ``begin_nested``."""
    if not is_postgres(session):
        with session.begin_nested():
            yield
        return
    session.flush()  # nothing pending may be written inside (it would not be undone)
    known = set(session.identity_map.keys())
    conn = session.connection()
    conn.exec_driver_sql("SAVEPOINT checkout_pay")
    try:
        yield
    except BaseException:
        conn.exec_driver_sql("ROLLBACK TO SAVEPOINT checkout_pay")
        for key in set(session.identity_map.keys()) - known:
            obj = session.identity_map.get(key)
            if obj is not None:
                session.expunge(obj)
        session.expire_all()
        raise


def _pay_in_savepoint(
    session: Session,
    order: Order,
    user: User,
    amount: int,
    now: datetime,
    expected_promise: date | None,
    attempts: int,
    *,
    seen: Any,
    early: bool,
    new_order: bool,
    before: dict[str, Any],
) -> Order:
    from app.catalog import service as catalog

    assert order.id is not None and user.id is not None
    told: date | None = None
    if early and seen is None:
        seen = catalog.current_promise(session, order.sku_id, order.quantity, now)
    if (
        early
        and seen is not None
        and seen.available
        and seen.date is not None
        and (expected_promise is None or seen.date == expected_promise)
    ):
        told = seen.date
    session.flush()  # anything pending: written before any lock is taken
    if is_postgres(session):
        _hold_pg(session, order, user, amount, now, attempts, told, seen, before)
    else:
        _hold_generic(session, order, user, amount, now, attempts, told, seen, before)
    return _reserve(session, order, user, now, expected_promise, told, new_order, before)


def _paid_changes(now: datetime, attempts: int, told: date | None, seen: Any) -> dict[str, Any]:
    changes: dict[str, Any] = {
        "status": OrderStatus.paid.value,
        "paid_at": now,
        "pay_attempts": attempts,
    }
    if told is not None:
        changes["promised_date"] = told
        changes["promise_explanation"] = (seen.explanation or "")[:300]
    return changes


def _hold_generic(
    session: Session,
    order: Order,
    user: User,
    amount: int,
    now: datetime,
    attempts: int,
    told: date | None,
    seen: Any,
    before: dict[str, Any],
) -> None:
    """SQLite: the messages, the hold, the order's UPDATE, one after another."""
    from app.ledger import service as ledger

    assert order.id is not None and user.id is not None
    if told is not None:
        _paid_messages(session, order, user, told, now)
    hold_id = ledger.place_hold_id(
        session,
        user_id=user.id,
        amount_cents=amount,
        idempotency_key=_first_month_key(order),
        now=now,
        order_id=order.id,
        reason=f"order #{order.id}: first month",
        actor_id=user.id,
    )
    changes = {"first_hold_id": hold_id, **_paid_changes(now, attempts, told, seen)}
    _update_order_now(session, order, changes, before)  # before the SKU lock


def _hold_pg(
    session: Session,
    order: Order,
    user: User,
    amount: int,
    now: datetime,
    attempts: int,
    told: date | None,
    seen: Any,
    before: dict[str, Any],
) -> None:
    """PostgreSQL: the hold, the order's UPDATE (paid, the hold's id, the date told) and,
    with ``told``, the paid event, notification and email in ONE statement, each written
    only when the balance covered the amount (``ledger.place_hold_with``). A short balance
    writes nothing here; the ledger then takes its locked path (declined, replayed, or
    held after all), and the order and messages follow as separate statements."""
    from app.ledger import service as ledger

    assert order.id is not None and user.id is not None
    changes = _paid_changes(now, attempts, told, seen)
    rows = _paid_message_rows(session, order, user, told, now) if told is not None else []
    also = _paid_also_pg(tuple(changes), tuple((t, tuple(r)) for t, r in rows))
    params: dict[str, Any] = {"o_id": order.id}
    params.update({f"o_{k}": _db_value(v) for k, v in changes.items()})
    for i, (_t, row) in enumerate(rows):
        params.update({f"m{i}_{k}": _db_value(v) for k, v in row.items()})
    hold_id, written = ledger.place_hold_with(
        session,
        user_id=user.id,
        amount_cents=amount,
        idempotency_key=_first_month_key(order),
        now=now,
        order_id=order.id,
        reason=f"order #{order.id}: first month",
        actor_id=user.id,
        also=also,
        also_params=params,
    )
    changes["first_hold_id"] = hold_id
    if not written:
        if told is not None:
            _paid_messages(session, order, user, told, now)
        _update_order_now(session, order, changes, before)
        return
    for k, v in changes.items():  # written by the hold's statement: the object shows them
        before.setdefault(k, getattr(order, k))
        set_committed_value(order, k, v)


def _db_value(v: Any) -> Any:
    """A value for a plain text statement: timestamps as aware UTC (as ``UTCDateTime``)."""
    return utc(v) if isinstance(v, datetime) else v


_PAID_ALSO_PG: dict[Any, tuple[tuple[str, str], ...]] = {}


def _pg_cast(table: Table, column: str, param: str) -> str:
    """``CAST(:param AS <the column's type>)``."""
    return f"CAST(:{param} AS {pg_type_name(table.c[column].type)})"


def _paid_also_pg(
    changes: tuple[str, ...], rows: tuple[tuple[Table, tuple[str, ...]], ...]
) -> tuple[tuple[str, str], ...]:
    """The checkout's CTEs for ``ledger.place_hold_with``, built once per shape: the order's
    UPDATE (``first_hold_id`` the new hold) and each message row, all ``FROM ids``."""
    key = (changes, tuple((t.name, cols) for t, cols in rows))
    made = _PAID_ALSO_PG.get(key)
    if made is not None:
        return made
    sets = ", ".join(f"{k} = {_pg_cast(_ORDERS, k, f'o_{k}')}" for k in changes)
    out = [
        (
            "paid_order",
            f"UPDATE orders SET {sets}, first_hold_id = ids.hid FROM ids "
            f"WHERE orders.id = CAST(:o_id AS INTEGER)",
        )
    ]
    for i, (table, cols) in enumerate(rows):
        values = ", ".join(_pg_cast(table, c, f"m{i}_{c}") for c in cols)
        out.append(
            (
                f"paid_row{i}",
                f"INSERT INTO {table.name} ({', '.join(cols)}) SELECT {values} FROM ids",
            )
        )
    made = _PAID_ALSO_PG[key] = tuple(out)
    return made


def _reserve(
    session: Session,
    order: Order,
    user: User,
    now: datetime,
    expected_promise: date | None,
    told: date | None,
    new_order: bool,
    before: dict[str, Any],
) -> Order:
    """Under the SKU lock (taken last): the promise confirmed, the nodes reserved."""
    from app.catalog import service as catalog

    assert order.id is not None
    try:
        promise = catalog.reserve_for_order(
            session,
            order_id=order.id,
            sku_id=order.sku_id,
            quantity=order.quantity,
            now=now,
            new_order=new_order,
        )
    except catalog.TalkToSales:
        raise NotPromisable() from None
    if not promise.available or promise.date is None:
        raise NotPromisable()
    if expected_promise is not None and promise.date != expected_promise:
        raise PromiseChanged(promise.date, promise.explanation)
    if told is not None and promise.date != told:
        raise _DateMoved()
    frozen = {
        "promised_date": promise.date,
        "promise_explanation": (promise.explanation or "")[:300],
    }
    if any(getattr(order, k) != v for k, v in frozen.items()):
        _update_order_now(session, order, frozen, before)
    if told is None:
        _paid_messages(session, order, user, promise.date, now)
    return order


# ---------------------------------------------------------------------------------------
# Cancel
# ---------------------------------------------------------------------------------------


def cancel_action(order: Order, now: datetime) -> str:
    """Which cancel the customer is offered: refund | period_end | discard | wait | none."""
    status = OrderStatus(order.status)
    if status == OrderStatus.awaiting_payment:
        return "discard"
    if status in PRE_DELIVERY:
        return "refund"  # before delivery: cancel any time, the first month back in full
    if status == OrderStatus.delivered and not order.cancel_at_period_end:
        return "period_end"
    return "none"


def cancel_order(
    session: Session,
    *,
    user: User,
    order_id: int,
    now: datetime,
    reason: str = "",
    expected_action: str | None = None,
) -> Order:
    """The customer's cancel.

    - awaiting payment → abandoned (nothing was charged);
    - paid, not delivered yet (late or not) → cancelled, the first-month hold voided back to
      the balance in full, the nodes released. Race-safe against ops delivering the same
      order: both lock the order row first, and whichever commits second sees the other's
      state (a delivered order is no longer cancellable for a refund);
    - delivered → ending: the lease runs to the end of the paid month, no renewal, no fee.
    Repeating a cancel that already happened returns the order unchanged.
    """
    from app.catalog import service as catalog
    from app.ledger import service as ledger
    from app.notifications.service import notify

    assert user.id is not None
    order = get_order_for(session, user, order_id, lock=True)
    status = OrderStatus(order.status)
    if status in (OrderStatus.cancelled, OrderStatus.abandoned) or (
        status in LEASE_ACTIVE and order.cancel_at_period_end
    ):
        return order
    action = cancel_action(order, now)
    if expected_action is not None and action != expected_action:
        raise OrderChangedMeanwhile()
    if action == "none":
        raise NotCancellable()

    if action == "discard":
        check_transition(order.status, OrderStatus.abandoned.value)
        order.status = OrderStatus.abandoned.value
        order.cancelled_at = now
        session.add(order)
        add_event(session, order, "abandoned", N_("Order discarded before payment."), now, user)
        return order

    if action == "refund":
        check_transition(order.status, OrderStatus.cancelled.value)
        late = is_order_late(order, now)
        with session.begin_nested():
            if order.first_hold_id is not None:
                ledger.void_hold(
                    session,
                    order.first_hold_id,
                    now=now,
                    reason=(
                        f"order #{order.id}: delivery date missed, cancelled by the customer"
                        if late
                        else f"order #{order.id}: cancelled by the customer before delivery"
                    ),
                    actor_id=user.id,
                )
            assert order.id is not None
            catalog.release_for_order(session, order.id, now)
            order.status = OrderStatus.cancelled.value
            order.cancelled_at = now
            session.add(order)
            session.flush()
            amount = order.monthly_total_cents
            add_event(
                session,
                order,
                "cancelled",
                N_(
                    "Cancelled after the promised date was missed; the first month went back to the balance in full."
                )
                if late
                else N_(
                    "Cancelled by the customer before delivery; the first month went back to the balance in full."
                ),
                now,
                user,
            )
            notify(
                session,
                user_id=user.id,
                kind="order_refunded",
                message=N_("Order #{id} is cancelled and {amount} is back in your balance."),
                params={"id": order.id, "amount": messages.money(amount)},
                now=now,
                link=_order_link(order),
                email_to=user.email,
                email_subject=N_("Order #{id} cancelled and refunded"),
            )
        return order

    # action == "period_end": a running lease ends at the end of the paid month, for free.
    check_transition(order.status, OrderStatus.ending.value)
    order.status = OrderStatus.ending.value
    order.cancel_at_period_end = True
    session.add(order)
    session.flush()
    end = messages.day(order.period_end) if order.period_end else ""
    add_event(
        session,
        order,
        "cancel_at_period_end",
        N_("Cancelled by the customer: the lease runs until {date} and will not renew."),
        now,
        user,
        params={"date": end},
    )
    notify(
        session,
        user_id=user.id,
        kind="order_ending",
        message=N_("Order #{id} will end on {date}; nothing more will be charged."),
        params={"id": order.id, "date": end},
        now=now,
        link=_order_link(order),
        email_to=user.email,
        email_subject=N_("Order #{id} will end at the period end"),
    )
    return order
