"""Catalog: node pages, price/stock administration (ops)."""

import secrets

from tests.authz import ops_only, public, staff_only
from tests.authz._objects import batch, node, sku

RULES = [
    public("GET", "/nodes"),
    public("GET", "/nodes/{sku_id}", setup=sku),
    public("GET", "/pricing/monthly-vs-hourly"),
    staff_only("GET", "/staff/nodes"),
    ops_only(
        "POST",
        "/staff/nodes/add",
        data=lambda ctx, p: {"sku_id": "hgx-h100", "hostname": "mx-" + secrets.token_hex(4)},
    ),
    ops_only("POST", "/staff/nodes/{node_id}", setup=node),
    ops_only("POST", "/staff/batches/add"),
    ops_only("POST", "/staff/batches/{batch_id}", setup=batch),
    ops_only("POST", "/staff/batches/{batch_id}/arrived", setup=batch),
    ops_only("POST", "/staff/prices/{sku_id}", setup=sku),
    ops_only("POST", "/staff/lead-times/{sku_id}", setup=sku),
]
