"""Control of a running order: SSH keys, reboot, reinstall, rescue as ops tasks, and the
private network's status — through the customer's and the ops desk's pages."""

from __future__ import annotations

import json
from typing import Any

from sqlmodel import Session, select

from app.accounts.audit import AuditEvent
from app.notifications.models import Notification
from app.orders import ops
from app.orders.models import Order, OrderEvent, OrderTask
from tests.orders.conftest import new_public_key
from tests.orders.test_checkout import B200, deliver, order_of, pay_form, place


def _delivered(
    client: Any, engine: Any, clock: Any, make_user: Any, login: Any, stock: Any, fund: Any
) -> tuple[Any, int]:
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, B200)
    login(client, u)
    oid = place(client)
    client.post(f"/orders/{oid}/pay", data=pay_form(client, oid))
    deliver(engine, clock, make_user, oid)
    return u, oid


def _tasks(engine: Any, oid: int) -> list[OrderTask]:
    with Session(engine) as s:
        return list(
            s.exec(select(OrderTask).where(OrderTask.order_id == oid).order_by(OrderTask.id)).all()
        )


def _flash_error(client: Any, oid: int) -> str:
    return client.get(f"/console/orders/{oid}").text


def test_reboot_request_goes_through_ops_and_back(
    client, new_client, engine, clock, make_user, login, stock, fund
) -> None:
    u, oid = _delivered(client, engine, clock, make_user, login, stock, fund)
    page = client.get(f"/console/orders/{oid}").text
    assert "Node controls" in page and f'action="/orders/{oid}/tasks"' in page
    r = client.post(
        f"/orders/{oid}/tasks", data={"kind": "reboot", "note": "GPU 3 hangs\x00\u202e"}
    )
    assert r.status_code == 303
    [task] = _tasks(engine, oid)
    assert task.status == "requested" and task.customer_note == "GPU 3 hangs"
    # The same request again while it is open: refused, nothing new.
    client.post(f"/orders/{oid}/tasks", data={"kind": "reboot"})
    assert "already open" in client.get(f"/console/orders/{oid}").text
    assert len(_tasks(engine, oid)) == 1

    ops_user = make_user(role="ops")
    desk = login(new_client(), ops_user)
    assert f"/staff/ops/orders/{oid}#tasks" in desk.get("/staff/ops").text
    assert "GPU 3 hangs" in desk.get(f"/staff/ops/orders/{oid}").text
    sales = login(new_client(), make_user(role="sales"))
    assert sales.post(f"/staff/ops/tasks/{task.id}", data={"status": "done"}).status_code == 403
    # Failed needs a note for the customer.
    desk.post(f"/staff/ops/tasks/{task.id}", data={"status": "failed", "ops_note": ""})
    assert _tasks(engine, oid)[0].status == "requested"
    assert (
        desk.post(f"/staff/ops/tasks/{task.id}", data={"status": "in_progress"}).status_code == 303
    )
    assert (
        desk.post(
            f"/staff/ops/tasks/{task.id}", data={"status": "done", "ops_note": "Power-cycled"}
        ).status_code
        == 303
    )
    assert _tasks(engine, oid)[0].status == "done"
    # Done is final.
    desk.post(f"/staff/ops/tasks/{task.id}", data={"status": "failed", "ops_note": "x"})
    assert _tasks(engine, oid)[0].status == "done"
    page = client.get(f"/console/orders/{oid}").text
    assert "Power-cycled" in page and "Request done" in page
    with Session(engine) as s:
        kinds = [e.kind for e in s.exec(select(OrderEvent).where(OrderEvent.order_id == oid))]
        assert {"task_requested", "task_in_progress", "task_done"} <= set(kinds)
        actions = [a.action for a in s.exec(select(AuditEvent))]
        assert "order.task.reboot.requested" in actions and "order.task.reboot.done" in actions
        assert s.exec(
            select(Notification).where(
                Notification.user_id == u.id, Notification.kind == "task_done"
            )
        ).first()


def test_reinstall_needs_a_supported_image_and_a_confirmation(
    client, new_client, engine, clock, make_user, login, stock, fund
) -> None:
    _u, oid = _delivered(client, engine, clock, make_user, login, stock, fund)
    client.post(f"/orders/{oid}/tasks", data={"kind": "reinstall", "image": "ubuntu-22.04-cuda"})
    assert "tick the box" in _flash_error(client, oid) and _tasks(engine, oid) == []
    client.post(
        f"/orders/{oid}/tasks", data={"kind": "reinstall", "image": "rocm-6", "confirm": "yes"}
    )
    assert "image this node supports" in _flash_error(client, oid) and _tasks(engine, oid) == []
    client.post(
        f"/orders/{oid}/tasks",
        data={"kind": "reinstall", "image": "ubuntu-22.04-cuda", "confirm": "yes"},
    )
    [task] = _tasks(engine, oid)
    desk = login(new_client(), make_user(role="ops"))
    desk.post(f"/staff/ops/tasks/{task.id}", data={"status": "done", "ops_note": "Reinstalled"})
    assert order_of(engine, oid).image_id == "ubuntu-22.04-cuda"


def test_ssh_key_add_then_replace(
    client, new_client, engine, clock, make_user, login, stock, fund
) -> None:
    _u, oid = _delivered(client, engine, clock, make_user, login, stock, fund)
    first = json.loads(order_of(engine, oid).ssh_keys_json)
    assert len(first) == 1
    client.post(f"/orders/{oid}/tasks", data={"kind": "ssh_key", "key_mode": "add"})
    assert "paste a public key" in _flash_error(client, oid)
    client.post(
        f"/orders/{oid}/tasks",
        data={
            "kind": "ssh_key",
            "key_mode": "add",
            "public_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc",
        },
    )
    assert _tasks(engine, oid) == []  # a private key is refused and never stored
    key = new_public_key("colleague@desk")
    client.post(
        f"/orders/{oid}/tasks",
        data={"kind": "ssh_key", "key_mode": "add", "public_key": key, "key_name": "colleague"},
    )
    desk = login(new_client(), make_user(role="ops"))
    desk.post(f"/staff/ops/tasks/{_tasks(engine, oid)[0].id}", data={"status": "done"})
    keys = json.loads(order_of(engine, oid).ssh_keys_json)
    assert [k["name"] for k in keys] == [first[0]["name"], "colleague"]
    # Replace with a saved key (the one just added is saved on the account now).
    page = client.get(f"/console/orders/{oid}").text
    import re

    saved = re.findall(r'<option value="(\d+)">colleague', page)
    assert saved
    client.post(
        f"/orders/{oid}/tasks",
        data={"kind": "ssh_key", "key_mode": "replace", "saved_key_id": saved[0]},
    )
    desk.post(f"/staff/ops/tasks/{_tasks(engine, oid)[1].id}", data={"status": "done"})
    assert [k["name"] for k in json.loads(order_of(engine, oid).ssh_keys_json)] == ["colleague"]


def test_controls_only_on_a_running_lease_and_only_for_the_owner(
    client, new_client, engine, clock, make_user, login, stock, fund
) -> None:
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, B200)
    login(client, u)
    oid = place(client)
    client.post(f"/orders/{oid}/pay", data=pay_form(client, oid))
    client.post(f"/orders/{oid}/tasks", data={"kind": "reboot"})
    assert "while the lease is running" in _flash_error(client, oid) and _tasks(engine, oid) == []
    other = login(new_client(), make_user())
    assert other.post(f"/orders/{oid}/tasks", data={"kind": "reboot"}).status_code == 404
    client.post(f"/orders/{oid}/tasks", data={"kind": "format-disk"})
    assert _tasks(engine, oid) == []


def test_private_network_status_set_by_ops(
    client, new_client, engine, clock, make_user, login, stock, fund
) -> None:
    stock("hgx-b200", 2)
    u = make_user()
    fund(u, 2 * B200)
    login(client, u)
    oid = place(
        client, nodes="2", note_private_network="1", note_comm_pattern="FSDP across 2 nodes"
    )
    client.post(f"/orders/{oid}/pay", data=pay_form(client, oid))
    ops_user = make_user(role="ops")
    fp = "256 SHA256:" + "A" * 43 + " root@node (ED25519)"
    with Session(engine, expire_on_commit=False) as s:
        ops.set_credentials(
            s,
            actor=ops_user,
            order_id=oid,
            data=ops.CredentialsInput(
                ssh_user="ubuntu",
                hosts=[
                    ops.HostInput(ip="10.20.0.5", fingerprints=fp),
                    ops.HostInput(ip="10.20.0.6", fingerprints=fp),
                ],
            ),
            now=clock.now(),
        )
        ops.mark_delivered(s, actor=ops_user, order_id=oid, now=clock.now())
        s.commit()
    assert "Private network" in client.get(f"/console/orders/{oid}").text
    desk = login(new_client(), ops_user)
    desk.post(
        f"/staff/ops/orders/{oid}/network", data={"network_status": "ready", "network_subnet": ""}
    )
    assert order_of(engine, oid).network_status == ""
    desk.post(
        f"/staff/ops/orders/{oid}/network",
        data={"network_status": "ready", "network_subnet": "8.8.8.0/24"},
    )
    assert order_of(engine, oid).network_status == ""
    desk.post(
        f"/staff/ops/orders/{oid}/network",
        data={"network_status": "configuring", "network_subnet": ""},
    )
    assert order_of(engine, oid).network_status == "configuring"
    desk.post(
        f"/staff/ops/orders/{oid}/network",
        data={"network_status": "ready", "network_subnet": " 10.40.2.0/24 "},
    )
    o: Order = order_of(engine, oid)
    assert (o.network_status, o.network_subnet) == ("ready", "10.40.2.0/24")
    page = client.get(f"/console/orders/{oid}").text
    assert "10.40.2.0/24" in page
    # A node-specific request on a multi-node order.
    with Session(engine, expire_on_commit=False) as s:
        hosts = ops.hosts_of(s, oid)
        s.commit()
    client.post(f"/orders/{oid}/tasks", data={"kind": "rescue", "host_id": str(hosts[1].id)})
    client.post(f"/orders/{oid}/tasks", data={"kind": "rescue", "host_id": str(hosts[0].id)})
    client.post(f"/orders/{oid}/tasks", data={"kind": "rescue", "host_id": "999999"})
    assert sorted(t.host_id for t in _tasks(engine, oid)) == sorted(h.id for h in hosts)
