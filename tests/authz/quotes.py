"""Quotes: share links (the token is the capability), cluster requests, the sales desk,
ops approvals."""

from tests.authz import ops_only, public, staff_only
from tests.authz._objects import cluster_request_of_a, quote_for_a

RULES = [
    public("GET", "/q/{token}", setup=quote_for_a),
    public(
        "POST",
        "/q/{token}/accept",
        setup=quote_for_a,
        note="continues to /deploy, which signs up inline",
    ),
    public("GET", "/q/{token}/pdf", setup=quote_for_a),
    public("GET", "/cluster-request"),
    public("POST", "/cluster-request", note="anonymous prospects may ask sales"),
    public("GET", "/nodes/gb300-nvl72/request", note="old GB300 form: 308 to /cluster-request"),
    staff_only("GET", "/staff/quotes"),
    staff_only("GET", "/staff/quotes/new"),
    staff_only("GET", "/staff/quotes/customers"),
    staff_only("POST", "/staff/quotes/new"),
    staff_only("GET", "/staff/quotes/requests"),
    staff_only("POST", "/staff/quotes/requests/{request_id}", setup=cluster_request_of_a),
    staff_only("GET", "/staff/quotes/{quote_id}/edit", setup=quote_for_a),
    staff_only("POST", "/staff/quotes/{quote_id}/edit", setup=quote_for_a),
    staff_only("GET", "/staff/quotes/{quote_id}", setup=quote_for_a),
    staff_only("POST", "/staff/quotes/{quote_id}/send", setup=quote_for_a),
    ops_only("POST", "/staff/quotes/{quote_id}/approve", setup=quote_for_a),
    staff_only("POST", "/staff/quotes/{quote_id}/withdraw", setup=quote_for_a),
    staff_only("GET", "/staff/quotes/{quote_id}/pdf", setup=quote_for_a),
]
