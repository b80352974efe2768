"""The catalog's seam: what other domains (and the catalog's own pages) call.

The work lives in one module per job: ``prices`` (live list prices, their history and
version), ``stock`` (what can be promised: one read), ``reservations`` (nodes and batch
units held for orders, under the SKU's stock-row lock), ``fleet`` (ops: nodes, batches,
lead times, subnets). This module names the functions other domains may call (see
docs/architecture.md "Seams"); services take ``session`` and ``now`` and never commit.
"""

from __future__ import annotations

from app.catalog import promise as pr
from app.catalog.fleet import (
    MANUAL_STATES,
    SKU_SUBNETS,
    add_batch,
    add_node,
    all_batches,
    all_nodes,
    free_ip_pool,
    mark_batch_arrived,
    set_lead_time,
    subnet_for,
    update_batch,
    update_node,
)
from app.catalog.models import Node, NodeState
from app.catalog.prices import (
    MAX_PRICE_CENTS,
    PriceCache,
    UnknownSku,
    bump_price_version,
    get_spec,
    list_price_cents,
    list_prices,
    price_cache_of,
    price_history,
    price_version,
    price_version_now,
    set_list_price,
)
from app.catalog.reservations import (
    ALLOWED_ORDER_STATES,
    free_nodes,
    frozen_promise,
    mark_nodes,
    nodes_for_order,
    release_for_order,
    reserve_for_order,
    swap_nodes,
    waiting_units,
)
from app.catalog.stock import (
    DEFAULT_LEAD_DAYS,
    PROMISE_KINDS,
    StockChanged,
    StockRows,
    TalkToSales,
    available_count,
    current_promise,
    lead_time_days,
    open_batches,
    promise_from_rows,
    promise_reads,
    promises_for_all,
    stock_rows,
    stock_summary,
)

Promise = pr.Promise

__all__ = [
    "ALLOWED_ORDER_STATES",
    "DEFAULT_LEAD_DAYS",
    "MANUAL_STATES",
    "MAX_PRICE_CENTS",
    "PROMISE_KINDS",
    "SKU_SUBNETS",
    "Node",
    "NodeState",
    "PriceCache",
    "Promise",
    "StockChanged",
    "StockRows",
    "TalkToSales",
    "UnknownSku",
    "add_batch",
    "add_node",
    "all_batches",
    "all_nodes",
    "available_count",
    "bump_price_version",
    "current_promise",
    "free_ip_pool",
    "free_nodes",
    "frozen_promise",
    "get_spec",
    "lead_time_days",
    "list_price_cents",
    "list_prices",
    "mark_batch_arrived",
    "mark_nodes",
    "nodes_for_order",
    "open_batches",
    "price_cache_of",
    "price_history",
    "price_version",
    "price_version_now",
    "promise_from_rows",
    "promise_reads",
    "promises_for_all",
    "release_for_order",
    "reserve_for_order",
    "set_lead_time",
    "set_list_price",
    "stock_rows",
    "stock_summary",
    "subnet_for",
    "swap_nodes",
    "update_batch",
    "update_node",
    "waiting_units",
]
