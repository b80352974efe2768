"""A payment that waited for the order's lock while the customer discarded the order.

The API's idempotent replay (``POST /api/v1/orders`` with the same key and ``"pay": true``)
reads the order before ``pay_order`` locks it. If a discard commits in between, the locked
read must see the discard: the payment is refused, the order stays abandoned and no money
is held (found by the hprobe session: over two app processes on PostgreSQL the cancel
answered "abandoned" while the racing payment answered "paid" and held the first month).
"""

from __future__ import annotations

import pytest
from sqlmodel import Session

from app.orders import service
from app.orders.models import Order
from tests.orders.test_checkout import B200, place


def test_a_payment_after_a_discard_it_waited_for_is_refused(
    client, engine, clock, make_user, login, stock, fund, balances, ledger_ok
) -> None:
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, B200)
    login(client, u)
    oid = place(client)
    with Session(engine, expire_on_commit=False) as paying:
        # the replay's read of the order (the identity map keeps it) ...
        seen = service.get_order_for(paying, u, oid)
        assert seen.status == "awaiting_payment"
        paying.commit()
        # ... the customer discards it in another process meanwhile ...
        with Session(engine) as other:
            service.cancel_order(other, user=u, order_id=oid, now=clock.now())
            other.commit()
        # ... then the payment takes the lock and must see the discard
        with pytest.raises(service.NotPayable):
            service.pay_order(
                paying, user=u, order_id=oid, idempotency_key=seen.idempotency_key,
                now=clock.now(),
            )  # fmt: skip
        paying.rollback()
    with Session(engine) as s:
        order = s.get(Order, oid)
        assert order is not None
        assert order.status == "abandoned" and order.first_hold_id is None
    assert balances(u) == (B200, 0)
    ledger_ok()
