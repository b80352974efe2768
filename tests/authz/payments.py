"""Payments: top-up invoices (owner only), the signed webhook (no session counts)."""

from tests.authz import (
    FORBIDDEN,
    LOGIN,
    NOT_FOUND,
    OK,
    Rule,
    customer_only,
    owned,
    staff_only,
    status,
)
from tests.authz._objects import invoice_of_a

UNSIGNED = status(401)

RULES = [
    customer_only("GET", "/topups/new"),
    customer_only("POST", "/topups/new"),
    # Staff may look at a customer's invoice for support; paying it (simulation) is ops only.
    owned("GET", "/topups/{invoice_id}", invoice_of_a, staff=OK),
    owned("GET", "/topups/{invoice_id}/status", invoice_of_a, staff=OK),
    Rule(
        "POST",
        "/topups/{invoice_id}/simulate",
        anon=LOGIN,
        customer=OK,
        other_customer=NOT_FOUND,
        sales=FORBIDDEN,
        ops=OK,
        setup=invoice_of_a,
        note="credits the customer's balance: ops only, audited",
    ),
    customer_only("POST", "/api/v1/topups", json={}),
    owned("GET", "/api/v1/topups/{invoice_id}", invoice_of_a, staff=OK),
    Rule(
        "POST",
        "/payments/webhook",
        anon=UNSIGNED,
        customer=UNSIGNED,
        sales=UNSIGNED,
        ops=UNSIGNED,
        json={"type": "InvoiceSettled"},
        note="only the HMAC signature counts, never a login",
    ),
    staff_only("GET", "/staff/payments"),
]
