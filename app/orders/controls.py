"""Control of a running order: the customer asks, ops carry it out.

A customer with a running lease (delivered, or ending at the period end) can ask for:

- ``ssh_key``  — add a key to the nodes, or replace the keys on them with one;
- ``reboot``   — a power cycle of one node or all of them;
- ``reinstall``— a fresh install of an OS image the SKU supports (erases the disks, so the
                 customer confirms it explicitly);
- ``rescue``   — boot into the rescue system (ops put the access details in their note).

Each request is an ``OrderTask`` (requested → in_progress → done | failed) that ops see on
the desk; every step is audited, written to the order's timeline and told to the customer.
When a key or reinstall task is done the order's record follows (its key snapshot, its
image). Only one open task of a kind per node at a time.

Multi-node orders also get a private network, whose status ops set (requested →
configuring → ready, with the subnet), shown to the customer.
"""

from __future__ import annotations

import ipaddress
import json
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from app import messages
from app.accounts import service as accounts
from app.accounts.models import SshKey, User
from app.accounts.sshkeys import SshKeyError, parse_public_key
from app.catalog import specs
from app.errors import N_, Conflict, InvalidInput, NotFound
from app.orders.lifecycle import LEASE_ACTIVE, OrderStatus
from app.orders.models import Order, OrderHost, OrderTask
from app.orders.ops import audit_order, load_order, tell
from app.orders.queries import get_order_for, ssh_keys_of
from app.orders.writes import add_event
from app.text import multi_line

KINDS = ("ssh_key", "reboot", "reinstall", "rescue")
KIND_LABELS = {
    "ssh_key": N_("SSH key change"),
    "reboot": N_("Reboot"),
    "reinstall": N_("Reinstall"),
    "rescue": N_("Rescue system"),
}
STATUS_LABELS = {
    "requested": N_("Requested"),
    "in_progress": N_("In progress"),
    "done": N_("Done"),
    "failed": N_("Could not be done"),
}
OPEN = frozenset({"requested", "in_progress"})
NEXT = {
    "requested": frozenset({"in_progress", "done", "failed"}),
    "in_progress": frozenset({"done", "failed"}),
    "done": frozenset(),
    "failed": frozenset(),
}
NETWORK_STATES = ("requested", "configuring", "ready")
NETWORK_LABELS = {
    "requested": N_("Requested"),
    "configuring": N_("Being configured"),
    "ready": N_("Ready"),
}
NOTE_MAX = 500


class TaskNotPossible(Conflict):
    code = "task_not_possible"
    default_message = N_("Node controls are available while the lease is running.")


class TaskAlreadyOpen(Conflict):
    code = "task_already_open"
    default_message = N_("The same request for this node is already open; ops will update it here.")


class TaskStateConflict(Conflict):
    code = "task_state"
    default_message = N_("This request is already {status}.")


def params_of(task: OrderTask) -> dict[str, Any]:
    try:
        data = json.loads(task.params_json or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def network_status(order: Order) -> str:
    """What the customer sees: ops' status, or "requested" for a multi-node order that asked."""
    if order.network_status:
        return order.network_status
    return "requested" if order.note_private_network and order.quantity > 1 else ""


def tasks_for(session: Session, order_id: int) -> list[OrderTask]:
    stmt = (
        select(OrderTask)
        .where(OrderTask.order_id == order_id)
        .order_by(col(OrderTask.created_at).desc(), col(OrderTask.id).desc())
    )
    return list(session.exec(stmt).all())


def open_tasks(session: Session, limit: int = 100) -> list[OrderTask]:
    stmt = (
        select(OrderTask)
        .where(col(OrderTask.status).in_(OPEN))
        .order_by(col(OrderTask.created_at), col(OrderTask.id))
        .limit(limit)
    )
    return list(session.exec(stmt).all())


def _host(session: Session, order: Order, host_id: int | None) -> OrderHost | None:
    if host_id is None:
        return None
    host = session.get(OrderHost, host_id)
    if host is None or host.order_id != order.id:
        raise InvalidInput(N_("Choose one of this order's nodes."), field="host_id")
    return host


def _key(
    session: Session,
    user: User,
    saved_key_id: int | None,
    new_key_text: str,
    new_key_name: str,
    now: datetime,
) -> dict[str, str]:

    key: SshKey | None
    if new_key_text.strip():
        try:
            fp = parse_public_key(new_key_text).fingerprint
        except SshKeyError:
            fp = None  # add_ssh_key explains what is wrong with it
        key = next(
            (k for k in accounts.ssh_keys_for(session, user.id or 0) if k.fingerprint == fp), None
        )
        if key is None:
            key = accounts.add_ssh_key(session, user, new_key_name, new_key_text, now)
    elif saved_key_id is not None:
        key = session.get(SshKey, saved_key_id)
        if key is None or key.user_id != user.id:
            raise InvalidInput(N_("Choose one of your saved keys."), field="saved_key_id")
    else:
        raise InvalidInput(N_("Choose a saved key or paste a public key."), field="saved_key_id")
    return {"name": key.name, "public_key": key.public_key, "fingerprint": key.fingerprint}


def request_task(
    session: Session,
    *,
    user: User,
    order_id: int,
    kind: str,
    now: datetime,
    host_id: int | None = None,
    image: str = "",
    key_mode: str = "add",
    saved_key_id: int | None = None,
    new_key_text: str = "",
    new_key_name: str = "",
    confirm: bool = False,
    note: str = "",
    ip: str = "",
) -> OrderTask:
    """The customer's request (their own order only: others get 404)."""
    order = get_order_for(session, user, order_id, lock=True)
    if OrderStatus(order.status) not in LEASE_ACTIVE:
        raise TaskNotPossible()
    if kind not in KINDS:
        raise InvalidInput(N_("Choose what you need done."), field="kind")
    host = _host(session, order, host_id)
    note = multi_line(note)
    if len(note) > NOTE_MAX:
        raise InvalidInput(N_("Use at most {n} characters."), field="note", n=NOTE_MAX)
    params: dict[str, Any] = {}
    if kind == "reinstall":
        if not (image and specs.image_fits(order.sku_id, image)):
            raise InvalidInput(N_("Choose an OS image this node supports."), field="image")
        if not confirm:
            raise InvalidInput(
                N_("A reinstall erases the disks: tick the box to confirm."), field="confirm"
            )
        params["image"] = image
    if kind == "ssh_key":
        if key_mode not in ("add", "replace"):
            raise InvalidInput(
                N_("Choose whether to add the key or replace the keys."), field="key_mode"
            )
        params["mode"] = key_mode
        params["key"] = _key(session, user, saved_key_id, new_key_text, new_key_name, now)
    duplicate = session.exec(
        select(OrderTask).where(
            OrderTask.order_id == order.id,
            OrderTask.kind == kind,
            col(OrderTask.status).in_(OPEN),
            OrderTask.host_id == host_id
            if host_id is not None
            else col(OrderTask.host_id).is_(None),
        )
    ).first()
    if duplicate is not None:
        raise TaskAlreadyOpen()
    task = OrderTask(
        order_id=order.id or 0,
        requested_by=user.id or 0,
        kind=kind,
        host_id=host.id if host else None,
        params_json=json.dumps(params, ensure_ascii=False, sort_keys=True),
        customer_note=note,
        created_at=now,
        updated_at=now,
    )
    session.add(task)
    session.flush()
    target = host.hostname or host.ip if host else None
    add_event(
        session,
        order,
        "task_requested",
        N_("You asked for: {what} ({where})."),
        now,
        user,
        params={
            "what": messages.msg(KIND_LABELS[kind]),
            "where": target or messages.msg(N_("all nodes")),
        },
    )
    audit_order(
        session,
        f"task.{kind}.requested",
        order,
        user,
        now,
        ip,
        task=task.id,
        host=host_id,
        image=params.get("image"),
        key=params.get("key", {}).get("fingerprint"),
    )
    return task


def update_task(
    session: Session,
    *,
    actor: User,
    task_id: int,
    status: str,
    now: datetime,
    ops_note: str = "",
    ip: str = "",
) -> OrderTask:
    """Ops move a request along. ``done`` applies its effect on the order's record."""
    task = session.get(OrderTask, task_id)
    if task is None:
        raise NotFound(N_("No such request."))
    order = load_order(session, task.order_id)
    session.refresh(task)  # re-read under the order's lock
    if status not in NEXT.get(task.status, frozenset()):
        raise TaskStateConflict(status=STATUS_LABELS.get(task.status, task.status))
    note = multi_line(ops_note)
    if len(note) > NOTE_MAX:
        raise InvalidInput(N_("Use at most {n} characters."), field="ops_note", n=NOTE_MAX)
    if status == "failed" and not note:
        raise InvalidInput(N_("Tell the customer why it could not be done."), field="ops_note")
    params = params_of(task)
    if status == "done":
        if task.kind == "ssh_key":
            key = params.get("key") or {}
            keys = [] if params.get("mode") == "replace" else ssh_keys_of(order)
            if all(k.get("fingerprint") != key.get("fingerprint") for k in keys):
                keys.append(key)
            order.ssh_keys_json = json.dumps(keys, ensure_ascii=False)
        elif task.kind == "reinstall" and params.get("image"):
            order.image_id = str(params["image"])
        session.add(order)
        task.done_at = now
    task.status = status
    task.ops_note = note
    task.updated_at = now
    task.acted_by = actor.id
    session.add(task)
    session.flush()
    what = messages.msg(KIND_LABELS.get(task.kind, task.kind))
    msgid = {
        "in_progress": N_("Ops started on your request: {what}."),
        "done": N_("Done: {what}."),
        "failed": N_("Could not be done: {what}. {note}"),
    }[status]
    add_event(
        session, order, f"task_{status}", msgid, now, actor, params={"what": what, "note": note}
    )
    tell(
        session,
        order,
        f"task_{status}",
        msgid,
        now,
        email=status in ("done", "failed"),
        what=what,
        note=note,
    )
    audit_order(session, f"task.{task.kind}.{status}", order, actor, now, ip, task=task.id)
    return task


def set_network(
    session: Session,
    *,
    actor: User,
    order_id: int,
    status: str,
    subnet: str,
    now: datetime,
    ip: str = "",
) -> Order:
    """Ops set the private network's status; ``ready`` needs its (private) subnet."""
    order = load_order(session, order_id)
    if status not in NETWORK_STATES:
        raise InvalidInput(N_("Choose a network status."), field="network_status")
    cleaned = ""
    if subnet.strip():
        try:
            net = ipaddress.ip_network(subnet.strip(), strict=True)
        except ValueError:
            raise InvalidInput(
                N_("Enter the subnet as an address and prefix, e.g. 10.40.2.0/24."),
                field="network_subnet",
            ) from None
        if not net.is_private:
            raise InvalidInput(
                N_("The private network needs a private address range."), field="network_subnet"
            )
        cleaned = str(net)
    if status == "ready" and not cleaned:
        raise InvalidInput(N_("A ready network needs its subnet."), field="network_subnet")
    if order.network_status == status and order.network_subnet == cleaned:
        return order
    order.network_status = status
    order.network_subnet = cleaned
    session.add(order)
    session.flush()
    label = messages.msg(NETWORK_LABELS[status])
    if status == "ready":
        msgid = N_("Private network ready: {subnet}.")
    else:
        msgid = N_("Private network: {state}.")
    add_event(
        session,
        order,
        f"network_{status}",
        msgid,
        now,
        actor,
        params={"subnet": cleaned, "state": label},
    )
    tell(session, order, f"network_{status}", msgid, now, subnet=cleaned, state=label)
    audit_order(session, "network", order, actor, now, ip, network_status=status, subnet=cleaned)
    return order
