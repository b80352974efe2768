"""Create an order: the deploy form's draft becomes an order awaiting payment, idempotent per
customer and key (the same key with the same body answers with the first order; another
body → 409), its price frozen (the list price, or a quote's while it is valid)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Date, Integer, bindparam, literal, union_all
from sqlalchemy import select as sa_select
from sqlmodel import Session

from app.accounts import service as accounts
from app.accounts.models import User
from app.accounts.sshkeys import SshKeyError, parse_public_key
from app.catalog import service as catalog
from app.catalog import specs
from app.errors import N_, InvalidInput
from app.orders.draft import OrderDraft
from app.orders.errors import IdempotencyConflict
from app.orders.lifecycle import OrderStatus
from app.orders.models import Order
from app.orders.writes import ORDERS, event_values, insert_new_order
from app.quotes import service as quotes


@dataclass
class PriceTerms:
    unit_price_cents: int
    quote_id: int | None = None
    quote_expires_at: datetime | None = None
    quote_months: int | None = None  # the quoted term, shown on /deploy
    quote_renewals_keep_price: bool = False  # monthly renewals charge the quoted price too
    quote_note: str = ""  # an English msgid when a quote was given but not honoured
    quote_note_params: dict[str, Any] = field(default_factory=dict)


QUOTE_USED = N_("This quote was already used for another order, so the list price applies.")
QUOTE_HELD_BY_YOURS = N_(
    "Your order #{id} holds this quote and is waiting for payment: pay it from your console "
    "at the quoted price. A new order here would be at the list price."
)


def price_terms(
    session: Session,
    sku_id: str,
    quantity: int,
    quote_token: str,
    now: datetime,
    *,
    list_price: int | None = None,
    user_id: int | None = None,
) -> PriceTerms:
    """The list price, or the quoted unit price while a matching quote is valid.
    ``list_price``: the SKU's list price as the caller read it in this transaction;
    ``user_id``: the reader, whose own unpaid order holding the quote is named as theirs."""

    if list_price is None:
        list_price = catalog.list_price_cents(session, sku_id)
    if not quote_token:
        return PriceTerms(unit_price_cents=list_price)

    terms = quotes.quote_for_checkout(session, quote_token, now)
    if terms is None:
        return PriceTerms(
            unit_price_cents=list_price,
            quote_note=N_("This quote link is not valid any more, so the list price applies."),
        )
    if terms.used_order_id is not None:  # claimed by an order placed and not discarded
        held = session.get(Order, terms.used_order_id)
        if (
            held is not None
            and user_id is not None
            and held.user_id == user_id
            and held.status == OrderStatus.awaiting_payment.value
        ):  # the reader's own order: pay that one, not "another order"'s list price
            return PriceTerms(
                unit_price_cents=list_price,
                quote_note=QUOTE_HELD_BY_YOURS,
                quote_note_params={"id": held.id},
            )
        return PriceTerms(unit_price_cents=list_price, quote_note=QUOTE_USED)
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

    try:
        return specs.spec(sku_id).name
    except KeyError:
        return sku_id


_BY_KEY = sa_select(ORDERS.c.id, ORDERS.c.request_hash).where(
    ORDERS.c.user_id == bindparam("uid"), ORDERS.c.idempotency_key == bindparam("key")
)


# The same look-up as a branch of the promise's UNION ALL: (kind, order id, NULL, NULL).
_KEY_BRANCH = sa_select(
    literal("o"), ORDERS.c.id, literal(None, Date), literal(None, Integer)
).where(ORDERS.c.user_id == bindparam("uid"), ORDERS.c.idempotency_key == bindparam("key"))
# the catalog's promise reads (its typed builder) and the key's order, in one round trip
_PROMISE_AND_KEY: Any = union_all(*catalog.promise_reads().selects, _KEY_BRANCH)


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

    assert user.id is not None
    key = (idempotency_key or "").strip()
    if not key or len(key) > 80:
        raise InvalidInput(
            N_("A request key of 1 to 80 characters is needed."), field="idempotency_key"
        )

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
    order = Order(
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
    created = event_values(
        order, "created", N_("Order placed; waiting for payment."), now, user, True, None
    )
    new = insert_new_order(session, order, created)
    if new is None:
        # A concurrent submit with the same key won the race: answer with its order.
        again = find_existing(session, user, key, draft)
        if again is None:  # pragma: no cover - the conflict was on this very key
            raise IdempotencyConflict()
        return Created(again, False)
    if new.quote_id is not None:
        assert new.id is not None
        quotes.mark_used(session, new.quote_id, new.id, now)
    return Created(new, True, seen)


def _claim_quote(
    session: Session, terms: PriceTerms, draft: OrderDraft, now: datetime
) -> PriceTerms:
    """One quote, one order: a quote another order already used gives the list price."""

    if terms.quote_id is not None and not quotes.claim_for_order(session, terms.quote_id):
        return PriceTerms(
            unit_price_cents=catalog.list_price_cents(session, draft.sku_id), quote_note=QUOTE_USED
        )
    return terms
