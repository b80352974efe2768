"""Issue 19, defect 6: the console shows a login only for handed-over hosts of a living
lease — not an assigned node's inventory address, not after the lease ended."""

from __future__ import annotations

from sqlmodel import Session

from app.orders.models import Order
from tests.ops.helpers import fingerprint, paid_order, seed_catalog


def test_access_appears_with_credentials_and_goes_when_the_lease_ends(
    client, new_client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    from app.orders import ops

    seed_catalog(engine, clock.now())
    customer = make_user()
    login(client, make_user(role="ops"))
    order = paid_order(engine, customer, clock.now(), key="acc")
    with Session(engine) as s:
        o = s.get(Order, order.id)
        assert o is not None
        node = ops.candidate_nodes(s, o)[0]
    r = client.post(f"/staff/ops/orders/{order.id}/nodes", data={"node_ids": str(node.id)})
    assert r.status_code == 303
    buyer = new_client()
    login(buyer, customer)
    page = buyer.get(f"/console/orders/{order.id}").text
    assert "ssh ubuntu@" not in page  # nodes assigned, no login handed over yet
    assert "Before your first long run" in page

    creds = {
        "count": "1",
        "ssh_user": "ubuntu",
        "ssh_port": "22",
        "ip_0": "198.51.100.7",
        "fp_0": fingerprint("acc"),
    }
    assert client.post(f"/staff/ops/orders/{order.id}/credentials", data=creds).status_code == 303
    page = buyer.get(f"/console/orders/{order.id}").text
    assert "ssh ubuntu@198.51.100.7" in page and fingerprint("acc") in page

    assert client.post(f"/staff/ops/orders/{order.id}/deliver", data={}).status_code == 303
    r = client.post(
        f"/staff/ops/orders/{order.id}/end",
        data={"reason": "Customer asked us to stop it.", "confirm": "true"},
    )
    assert r.status_code == 303
    for _ in range(2):  # ended, then wiped
        page = buyer.get(f"/console/orders/{order.id}").text
        assert "ssh ubuntu@" not in page and fingerprint("acc") not in page
        assert "Before your first long run" not in page
        assert 'id="access-ended"' in page
        client.post(f"/staff/ops/orders/{order.id}/wiped", data={})


def test_a_failed_renewal_is_explained_on_the_order_with_a_top_up(
    client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from app.clock import utc
    from tests.ops.test_renewals import deliver, run

    seed_catalog(engine, clock.now())
    customer = make_user()
    order = deliver(engine, customer, clock.now())  # the balance covers only the first month
    end = utc(order.period_end)
    assert run(engine, end + timedelta(minutes=5)).short == 1
    clock.set(end + timedelta(hours=2))  # the next renewal date is already past
    login(client, customer)
    page = client.get(f"/console/orders/{order.id}").text
    assert "Renewal unpaid" in page and ">Active<" not in page
    assert "Next renewal" not in page and "Renewal due since" in page
    assert 'id="renewal-short"' in page
    short = order.monthly_total_cents
    assert (
        f'href="/topups/new?amount_cents={short}&amp;return_to=/console/orders/{order.id}"' in page
    )
    assert "Renewal unpaid" in client.get("/console").text
    client.cookies.set("lang", "zh_CN")
    page = client.get(f"/console/orders/{order.id}").text
    assert "续费未能支付" in page and "续费未支付" in page
