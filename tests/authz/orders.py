"""Orders: the deploy form (public: it signs up inline), review/pay/cancel and the console
(owner only; other customers get 404), the ops desk (staff view, ops actions), the API."""

from tests.authz import customer_only, ops_only, owned, public, staff_only
from tests.authz._objects import order_of_a, task_of_a

RULES = [
    public("GET", "/deploy"),
    public("GET", "/deploy/summary"),
    public("POST", "/deploy", note="anonymous visitors sign up inside the form"),
    owned("GET", "/orders/{order_id}/review", order_of_a),
    owned("POST", "/orders/{order_id}/pay", order_of_a),
    owned("POST", "/orders/{order_id}/topup", order_of_a),
    owned("GET", "/orders/{order_id}/cancel", order_of_a),
    owned("POST", "/orders/{order_id}/cancel", order_of_a),
    owned("POST", "/orders/{order_id}/keep", order_of_a),
    owned("POST", "/orders/{order_id}/tasks", order_of_a, data={"kind": "reboot"}),
    ops_only("POST", "/staff/ops/tasks/{task_id}", setup=task_of_a, data={"status": "in_progress"}),
    ops_only(
        "POST",
        "/staff/ops/orders/{order_id}/network",
        setup=order_of_a,
        data={"network_status": "requested"},
    ),
    customer_only("GET", "/console"),
    owned("GET", "/console/orders/{order_id}", order_of_a),
    staff_only("GET", "/staff/ops"),
    staff_only("GET", "/staff/ops/orders/{order_id}", setup=order_of_a),
    ops_only("POST", "/staff/ops/orders/{order_id}/acknowledge", setup=order_of_a),
    ops_only("POST", "/staff/ops/orders/{order_id}/provision", setup=order_of_a),
    ops_only("POST", "/staff/ops/orders/{order_id}/nodes", setup=order_of_a),
    ops_only("POST", "/staff/ops/orders/{order_id}/credentials", setup=order_of_a),
    ops_only("POST", "/staff/ops/orders/{order_id}/deliver", setup=order_of_a),
    ops_only("POST", "/staff/ops/orders/{order_id}/delay", setup=order_of_a),
    ops_only("POST", "/staff/ops/orders/{order_id}/end", setup=order_of_a),
    ops_only("POST", "/staff/ops/orders/{order_id}/wiped", setup=order_of_a),
    customer_only("POST", "/api/v1/orders", json={}),
    customer_only("GET", "/api/v1/orders"),
    owned("GET", "/api/v1/orders/{order_id}", order_of_a),
    owned("POST", "/api/v1/orders/{order_id}/cancel", order_of_a),
    owned("POST", "/api/v1/orders/{order_id}/keep", order_of_a),
]
