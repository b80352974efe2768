"""Payments: top-up invoices (owner only), the signed webhook (no session counts)."""

from tests.authz import OK, Rule, customer_only, owned, staff_only, status
from tests.authz._objects import invoice_of_a

UNSIGNED = status(401)

RULES = [
    customer_only("GET", "/topups/new"),
    customer_only("POST", "/topups/new"),
    # Staff may look at (and, in simulation, pay) a customer's invoice for support.
    owned("GET", "/topups/{invoice_id}", invoice_of_a, staff=OK),
    owned("GET", "/topups/{invoice_id}/status", invoice_of_a, staff=OK),
    owned("POST", "/topups/{invoice_id}/simulate", invoice_of_a, staff=OK),
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
