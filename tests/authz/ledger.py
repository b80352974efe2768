"""Ledger: the customer's own balance; journal and balances for staff, adjustments ops."""

from tests.authz import OK, customer_only, ops_only, owned, staff_only
from tests.authz._objects import credit_note_of_a, customer_a, receipt_of_a

RULES = [
    customer_only("GET", "/balance"),
    customer_only("GET", "/receipts"),
    owned("GET", "/receipts/{number}", receipt_of_a, staff=OK, note="staff read receipts"),
    owned("GET", "/receipts/{number}/pdf", receipt_of_a, staff=OK),
    owned("GET", "/credit-notes/{number}", credit_note_of_a, staff=OK, note="staff read them"),
    owned("GET", "/credit-notes/{number}/pdf", credit_note_of_a, staff=OK),
    customer_only("GET", "/api/v1/balance"),
    staff_only("GET", "/staff/ledger"),
    staff_only("GET", "/staff/ledger/customers/{customer_id}", setup=customer_a),
    ops_only("POST", "/staff/ledger/customers/{customer_id}/adjust", setup=customer_a),
]
