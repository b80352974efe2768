"""The orders domain's seam: what routes, the API, the simulator and other domains call.

The work lives in one module per job: ``draft`` (the deploy form parsed and checked),
``create`` (an order awaiting payment, idempotent per key), ``checkout`` (the paid
checkout), ``cancel`` (the customer's cancel), ``queries`` (reads that know who asks) and
``writes`` (this domain's rows as plain statements). Services never commit: the caller owns
the transaction.
"""

from __future__ import annotations

from app.orders.cancel import can_keep_renewing, cancel_action, cancel_order, keep_renewing
from app.orders.checkout import pay_order
from app.orders.create import (
    Created,
    PriceTerms,
    create_order,
    create_order_for_checkout,
    find_existing,
    price_terms,
)
from app.orders.draft import (
    FREE_TEXT_MAX,
    MAX_NODES,
    NOTE_MAX,
    OrderDraft,
    check_draft,
    new_idempotency_key,
    parse_count,
    parse_draft,
)
from app.orders.errors import (
    ABOVE_SELF_SERVE,
    AboveSelfServe,
    IdempotencyConflict,
    NotCancellable,
    NotPayable,
    NotPromisable,
    NotRenewable,
    OrderChangedMeanwhile,
    OrderNotFound,
    PriceChanged,
    PromiseChanged,
    QuoteNotApplied,
)
from app.orders.queries import (
    Review,
    balance_of,
    get_order_for,
    hosts_of,
    is_order_late,
    review,
    ssh_keys_of,
    timeline,
    visible_orders,
)
from app.orders.writes import add_event

__all__ = [
    "ABOVE_SELF_SERVE",
    "FREE_TEXT_MAX",
    "MAX_NODES",
    "NOTE_MAX",
    "AboveSelfServe",
    "Created",
    "IdempotencyConflict",
    "NotCancellable",
    "NotRenewable",
    "NotPayable",
    "NotPromisable",
    "OrderChangedMeanwhile",
    "QuoteNotApplied",
    "OrderDraft",
    "OrderNotFound",
    "PriceChanged",
    "PriceTerms",
    "PromiseChanged",
    "Review",
    "add_event",
    "balance_of",
    "can_keep_renewing",
    "cancel_action",
    "cancel_order",
    "keep_renewing",
    "check_draft",
    "create_order",
    "create_order_for_checkout",
    "find_existing",
    "get_order_for",
    "hosts_of",
    "is_order_late",
    "new_idempotency_key",
    "parse_count",
    "parse_draft",
    "pay_order",
    "price_terms",
    "review",
    "ssh_keys_of",
    "timeline",
    "visible_orders",
]
