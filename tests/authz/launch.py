"""Launch files of an order (console): its owner only; another customer and staff get 404,
so nobody sees another customer's host names."""

from tests.authz import owned
from tests.authz._objects import order_of_a

RULES = [
    owned("GET", "/console/orders/{order_id}/launch", order_of_a),
    owned("GET", "/console/orders/{order_id}/launch/file", order_of_a),
]
