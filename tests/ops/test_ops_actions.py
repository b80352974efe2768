"""Each ops action: its effect on the order, the nodes, the ledger, the audit log and what
the customer sees in the console."""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import Session, col, select

from app.accounts.audit import AuditEvent
from app.catalog.models import Node
from app.clock import utc
from app.notifications.models import Notification, OutboxEmail
from app.orders.models import Order, OrderEvent, OrderHost
from tests.ops.helpers import fingerprint, paid_order, seed_catalog


def _order(engine, order_id: int) -> Order:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        o = s.get(Order, order_id)
        assert o is not None
        return o


def _audits(engine, order_id: int) -> list[str]:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        rows = s.exec(
            select(AuditEvent)
            .where(AuditEvent.target == f"order:{order_id}")
            .order_by(col(AuditEvent.id))
        ).all()
        return [r.action for r in rows]


def _nodes(engine, order_id: int) -> list[Node]:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        return list(s.exec(select(Node).where(Node.order_id == order_id)).all())


def _creds(order_id: int, ips: list[str], *, user: str = "ubuntu", host_ids=None) -> dict:  # type: ignore[no-untyped-def]
    data = {"count": str(len(ips)), "ssh_user": user, "ssh_port": "22"}
    for i, ip in enumerate(ips):
        data[f"ip_{i}"] = ip
        data[f"fp_{i}"] = (
            f"256 {fingerprint(ip + 'ed')} root@node (ED25519)\n{fingerprint(ip + 'rsa')}"
        )
        if host_ids:
            data[f"host_id_{i}"] = str(host_ids[i])
    return data


def test_ops_work_an_order_from_paid_to_delivered(
    client, new_client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    order = paid_order(engine, customer, clock.now(), sku="hgx-h100", nodes=2)
    assert order.promised_date is not None
    ops = make_user(role="ops")
    login(client, ops)

    # The queue lists it, with the structured notes.
    page = client.get("/staff/ops")
    assert page.status_code == 200
    assert f"#{order.id}" in page.text and customer.email in page.text

    r = client.post(f"/staff/ops/orders/{order.id}/acknowledge", data={})
    assert r.status_code == 303
    assert _order(engine, order.id).acknowledged_at is not None
    # Acknowledging twice is refused, and says why.
    r = client.post(f"/staff/ops/orders/{order.id}/acknowledge", data={})
    assert r.status_code == 303
    assert "already acknowledged" in client.get(r.headers["location"]).text

    r = client.post(f"/staff/ops/orders/{order.id}/provision", data={})
    assert r.status_code == 303
    o = _order(engine, order.id)
    assert o.status == "provisioning" and utc(o.provisioning_at) == clock.now()
    assert {n.state for n in _nodes(engine, order.id)} <= {"provisioning"}

    # Assign nodes of the SKU from the pool (the held ones, topped up with free ones).
    with Session(engine) as s:
        held = [n.id for n in s.exec(select(Node).where(Node.order_id == order.id)).all()]
        free = [
            n.id
            for n in s.exec(
                select(Node).where(Node.sku_id == "hgx-h100", Node.state == "available")
            ).all()
        ]
        other_sku = s.exec(select(Node).where(Node.sku_id == "hgx-b200")).first()
    chosen = (held + free)[:2]
    bad = client.post(
        f"/staff/ops/orders/{order.id}/nodes",
        data={"node_ids": [str(other_sku.id), str(chosen[0])]},
    )
    assert bad.status_code == 422 and "not free for this order" in bad.text
    r = client.post(
        f"/staff/ops/orders/{order.id}/nodes", data={"node_ids": [str(i) for i in chosen]}
    )
    assert r.status_code == 303, r.text
    with Session(engine) as s:
        hosts = s.exec(
            select(OrderHost).where(OrderHost.order_id == order.id).order_by(col(OrderHost.id))
        ).all()
        assert sorted(h.node_id for h in hosts) == sorted(chosen)
        assert all(h.ip.startswith("10.20.1.") for h in hosts)  # from the node's address
        host_ids = [h.id for h in hosts]
    assert sorted(n.id for n in _nodes(engine, order.id)) == sorted(chosen)

    # Credentials: the customer sees them at once, before the promised date.
    r = client.post(
        f"/staff/ops/orders/{order.id}/credentials",
        data=_creds(order.id, ["203.0.113.10", "2001:db8::10"], host_ids=host_ids),
    )
    assert r.status_code == 303, r.text
    assert clock.now().date() < order.promised_date
    buyer = new_client()
    login(buyer, customer)
    console = buyer.get(f"/console/orders/{order.id}")
    assert console.status_code == 200
    assert "203.0.113.10" in console.text and "2001:db8::10" in console.text
    assert fingerprint("203.0.113.10ed") in console.text
    with Session(engine) as s:
        notes = s.exec(select(Notification).where(Notification.user_id == customer.id)).all()
        assert any("SSH login" in n.message for n in notes)

    # Delivered: the first-month hold is posted, the lease runs a month, nodes leased.
    from app.ledger import service as ledger

    with Session(engine) as s:
        held_before = ledger.held_cents(s, customer.id)
        avail_before = ledger.available_cents(s, customer.id)
    assert held_before == order.monthly_total_cents
    r = client.post(f"/staff/ops/orders/{order.id}/deliver", data={})
    assert r.status_code == 303
    o = _order(engine, order.id)
    assert o.status == "delivered" and o.periods_paid == 1
    assert utc(o.period_start) == clock.now()
    assert o.period_end.date() == (clock.now() + timedelta(days=31)).date()  # Dec 1 → Jan 1
    with Session(engine) as s:
        assert ledger.held_cents(s, customer.id) == 0
        assert ledger.available_cents(s, customer.id) == avail_before
    assert {n.state for n in _nodes(engine, order.id)} == {"leased"}
    after = buyer.get(f"/console/orders/{order.id}")
    assert after.status_code == 200 and "203.0.113.10" in after.text

    assert _audits(engine, order.id) == [
        "order.acknowledged",
        "order.provisioning",
        "order.nodes_assigned",
        "order.credentials_set",
        "order.delivered",
    ]
    with Session(engine) as s:
        kinds = [
            e.kind for e in s.exec(select(OrderEvent).where(OrderEvent.order_id == order.id)).all()
        ]
        emails = s.exec(select(OutboxEmail).where(OutboxEmail.to_addr == customer.email)).all()
    assert {"acknowledged", "provisioning", "nodes_assigned", "credentials", "delivered"} <= set(
        kinds
    )
    assert any("delivered" in e.body for e in emails)


def test_bad_credentials_are_refused_and_change_nothing(
    client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    order = paid_order(engine, customer, clock.now())
    login(client, make_user(role="ops"))
    data = _creds(order.id, ["999.1.1.1"])
    data["fp_0"] = "SHA256:tooshort"
    data["ssh_user"] = "Root User"
    r = client.post(f"/staff/ops/orders/{order.id}/credentials", data=data)
    assert r.status_code == 422
    assert "IPv4 or IPv6 address" in r.text
    assert "43 characters" in r.text
    assert "Unix user name" in r.text
    assert 'value="999.1.1.1"' in r.text  # what ops typed is kept
    with Session(engine) as s:
        assert s.exec(select(OrderHost).where(OrderHost.order_id == order.id)).all() == [] or all(
            h.ip != "999.1.1.1" for h in s.exec(select(OrderHost)).all()
        )
    # Two nodes cannot share an address.
    two = paid_order(engine, customer, clock.now(), nodes=2, key="k2")
    r = client.post(
        f"/staff/ops/orders/{two.id}/credentials",
        data=_creds(two.id, ["203.0.113.5", "203.0.113.5"]),
    )
    assert r.status_code == 422 and "its own IP address" in r.text


def test_cannot_deliver_without_login_details(client, engine, make_user, login, clock) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    order = paid_order(engine, customer, clock.now())
    login(client, make_user(role="ops"))
    r = client.post(f"/staff/ops/orders/{order.id}/deliver", data={})
    assert r.status_code == 303
    page = client.get(r.headers["location"])
    assert "before marking the order delivered" in page.text
    o = _order(engine, order.id)
    assert o.status == "paid" and o.delivered_at is None and o.periods_paid == 0
    assert "order.delivered" not in _audits(engine, order.id)


def test_delay_tells_the_customer_and_late_delivery_still_works(
    client, new_client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    order = paid_order(engine, customer, clock.now())
    login(client, make_user(role="ops"))
    # Bad input: no reason, a date in the past.
    r = client.post(
        f"/staff/ops/orders/{order.id}/delay",
        data={"reason": "", "new_estimate": (clock.now() - timedelta(days=1)).date().isoformat()},
    )
    assert r.status_code == 422 and "holding the order up" in r.text and "in the past" in r.text
    assert "at least 4 characters" in r.text
    assert _order(engine, order.id).delay_reason == ""
    # a typo of a year (9999-12-31) is refused; four Chinese characters are a whole reason
    r = client.post(
        f"/staff/ops/orders/{order.id}/delay",
        data={"reason": "供货延误", "new_estimate": "9999-12-31"},
    )
    assert r.status_code == 422 and "within a year" in r.text
    assert "holding the order up" not in r.text
    # dots and invisible characters are not a reason; an impossible date is said as such
    for empty in ("....", "。。。。", "\u200b" * 4):
        r = client.post(
            f"/staff/ops/orders/{order.id}/delay",
            data={"reason": empty, "new_estimate": "2027-02-30"},
        )
        assert r.status_code == 422 and "at least 4 characters" in r.text, repr(empty)
        assert "a real date (YYYY-MM-DD)" in r.text
    assert _order(engine, order.id).delay_estimate is None

    new_date = order.promised_date + timedelta(days=5)
    r = client.post(
        f"/staff/ops/orders/{order.id}/delay",
        data={"reason": "A switch failed its burn-in test", "new_estimate": new_date.isoformat()},
    )
    assert r.status_code == 303
    o = _order(engine, order.id)
    assert o.delay_reason == "A switch failed its burn-in test" and o.delay_estimate == new_date
    with Session(engine) as s:
        email = s.exec(select(OutboxEmail).where(OutboxEmail.kind == "order.delayed")).one()
    assert email.to_addr == customer.email
    assert "burn-in" in email.body and "full refund" in email.body

    # Past the promise: the customer is offered the refund in the console.
    clock.set(
        clock.now().replace(hour=9)
        + timedelta(days=(order.promised_date - clock.now().date()).days + 1)
    )
    buyer = new_client()
    login(buyer, customer)
    console = buyer.get(f"/console/orders/{order.id}")
    assert console.status_code == 200 and "refund" in console.text.lower()
    assert "A switch failed its burn-in test" in console.text
    # Ops may still deliver late.
    client.post(
        f"/staff/ops/orders/{order.id}/credentials", data=_creds(order.id, ["198.51.100.7"])
    )
    r = client.post(f"/staff/ops/orders/{order.id}/deliver", data={})
    assert r.status_code == 303
    assert _order(engine, order.id).status == "delivered"


def _delivered(client, engine, customer, clock, key="k1"):  # type: ignore[no-untyped-def]
    order = paid_order(engine, customer, clock.now(), key=key)
    client.post(f"/staff/ops/orders/{order.id}/credentials", data=_creds(order.id, ["192.0.2.50"]))
    r = client.post(f"/staff/ops/orders/{order.id}/deliver", data={})
    assert r.status_code == 303
    return order


def test_end_lease_then_confirm_wipe(client, new_client, engine, make_user, login, clock) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    login(client, make_user(role="ops"))
    order = _delivered(client, engine, customer, clock)
    # Wipe before the lease ended: refused.
    r = client.post(f"/staff/ops/orders/{order.id}/wiped", data={})
    assert r.status_code == 303 and _order(engine, order.id).status == "delivered"

    clock.advance(timedelta(days=3))
    r = client.post(
        f"/staff/ops/orders/{order.id}/end",
        data={"reason": "customer asked by phone", "confirm": "true"},
    )
    assert r.status_code == 303
    o = _order(engine, order.id)
    assert o.status == "ended" and utc(o.ended_at) == clock.now()
    assert {n.state for n in _nodes(engine, order.id)} == {"wiping"}

    clock.advance(timedelta(hours=6))
    r = client.post(f"/staff/ops/orders/{order.id}/wiped", data={})
    assert r.status_code == 303
    o = _order(engine, order.id)
    assert o.status == "wiped" and utc(o.wiped_at) == clock.now()
    assert _nodes(engine, order.id) == []  # back in the pool
    with Session(engine) as s:
        states = {n.state for n in s.exec(select(Node).where(Node.sku_id == "hgx-h100")).all()}
    assert "wiping" not in states
    buyer = new_client()
    login(buyer, customer)
    console = buyer.get(f"/console/orders/{order.id}")
    assert console.status_code == 200 and "wiped" in console.text.lower()
    assert _audits(engine, order.id)[-2:] == ["order.lease_ended", "order.wiped"]


def test_sales_read_only_and_customers_kept_out(
    client, new_client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    order = paid_order(engine, customer, clock.now())
    login(client, make_user(role="sales"))
    page = client.get("/staff/ops")
    assert page.status_code == 200 and "Read-only" in page.text
    detail = client.get(f"/staff/ops/orders/{order.id}")
    assert detail.status_code == 200
    assert "/acknowledge" not in detail.text and "Mark delivered" not in detail.text
    for action in ("acknowledge", "provision", "deliver", "wiped"):
        assert client.post(f"/staff/ops/orders/{order.id}/{action}", data={}).status_code == 403
    o = _order(engine, order.id)
    assert o.status == "paid" and o.acknowledged_at is None
    assert _audits(engine, order.id) == []

    buyer = new_client()
    login(buyer, customer)
    assert buyer.get("/staff/ops").status_code == 403
    assert buyer.post(f"/staff/ops/orders/{order.id}/acknowledge", data={}).status_code == 403
    anon = new_client()
    assert anon.get("/staff/ops").status_code in (303, 401)


def test_missing_order_is_404(client, make_user, login) -> None:  # type: ignore[no-untyped-def]
    login(client, make_user(role="ops"))
    assert client.get("/staff/ops/orders/999999").status_code == 404
    assert client.post("/staff/ops/orders/999999/acknowledge", data={}).status_code == 404


def test_forms_carry_a_real_csrf_token_and_work_without_js(
    raw_client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    import re

    seed_catalog(engine, clock.now())
    order = paid_order(engine, make_user(), clock.now())
    login(raw_client, make_user(role="ops"))
    page = raw_client.get(f"/staff/ops/orders/{order.id}").text
    form = re.search(
        rf'action="/staff/ops/orders/{order.id}/acknowledge"><input type="hidden" name="csrf_token" value="([^"]+)"',
        page,
    )
    assert form, "the acknowledge form has no CSRF token"
    # Without the token: refused, nothing changes.
    assert raw_client.post(f"/staff/ops/orders/{order.id}/acknowledge", data={}).status_code == 403
    assert _order(engine, order.id).acknowledged_at is None
    r = raw_client.post(
        f"/staff/ops/orders/{order.id}/acknowledge", data={"csrf_token": form.group(1)}
    )
    assert r.status_code == 303
    assert _order(engine, order.id).acknowledged_at is not None


def test_customer_is_told_in_their_own_language(client, engine, make_user, login, clock) -> None:  # type: ignore[no-untyped-def]
    seed_catalog(engine, clock.now())
    customer = make_user()
    with Session(engine) as s:
        from app.accounts.models import User

        u = s.get(User, customer.id)
        u.locale = "zh_CN"
        s.add(u)
        s.commit()
    order = paid_order(engine, customer, clock.now())
    login(client, make_user(role="ops"))  # the ops person reads English
    client.post(f"/staff/ops/orders/{order.id}/provision", data={})
    with Session(engine) as s:
        n = s.exec(select(Notification).where(Notification.kind == "order.provisioning")).one()
    assert "部署" in n.message


def test_order_waiting_for_a_batch_cannot_be_assigned_or_delivered_yet(
    client, engine, make_user, login, clock
) -> None:  # type: ignore[no-untyped-def]
    from app.catalog import service as catalog

    seed_catalog(engine, clock.now())
    with Session(engine) as s:
        free = catalog.available_count(s, "hgx-h100")
    order = paid_order(engine, make_user(), clock.now(), nodes=free + 1)
    with Session(engine) as s:
        assert catalog.waiting_units(s, order.id) == 1
    login(client, make_user(role="ops"))
    page = client.get(f"/staff/ops/orders/{order.id}").text
    assert "still waiting for an incoming batch" in page
    r = client.post(f"/staff/ops/orders/{order.id}/nodes", data={"node_ids": ["1"]})
    assert r.status_code == 422 and "still waiting for an incoming batch" in r.text
    ips = [f"203.0.113.{i + 20}" for i in range(free + 1)]
    assert (
        client.post(
            f"/staff/ops/orders/{order.id}/credentials", data=_creds(order.id, ips)
        ).status_code
        == 303
    )
    r = client.post(f"/staff/ops/orders/{order.id}/deliver", data={})
    assert "still waiting for an incoming batch" in client.get(r.headers["location"]).text
    assert _order(engine, order.id).status == "paid"
