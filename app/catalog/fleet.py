"""Fleet admin for ops: nodes (hostnames, management addresses, states), expected batches,
lead times; the per-SKU private subnets."""

from __future__ import annotations

import ipaddress
import json
from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    func,
)
from sqlmodel import Session, col, select

from app.accounts import audit
from app.catalog.models import (
    BatchStatus,
    IncomingBatch,
    Node,
    NodeState,
    SkuStock,
)
from app.catalog.prices import get_spec
from app.catalog.reservations import lock_sku, open_reservations
from app.errors import N_, Conflict, InvalidInput, NotFound

# ------------------------------------------------------------------ IPs

SKU_SUBNETS = {
    "hgx-h100": "10.20.1.0/24",
    "hgx-h200": "10.20.2.0/24",
    "hgx-b200": "10.20.3.0/24",
    "hgx-b300": "10.20.4.0/24",
    "mi355x": "10.20.5.0/24",
    "gb300-nvl72": "10.20.6.0/24",
}


def subnet_for(sku_id: str) -> ipaddress.IPv4Network:
    return ipaddress.ip_network(SKU_SUBNETS.get(sku_id, "10.20.99.0/24"))  # type: ignore[return-value]


def free_ip_pool(session: Session, sku_id: str, limit: int = 16) -> list[str]:
    """Unused management addresses in the SKU's private subnet (first ten reserved)."""
    used = set(session.exec(select(Node.mgmt_ip).where(Node.mgmt_ip != "")).all())
    out = []
    for i, host in enumerate(subnet_for(sku_id).hosts()):
        if i < 10:
            continue
        if str(host) not in used:
            out.append(str(host))
            if len(out) >= limit:
                break
    return out


# ------------------------------------------------------------------ ops: nodes and batches


def _valid_ip(ip: str) -> str:
    ip = ip.strip()
    if not ip:
        return ""
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        raise InvalidInput(N_("Enter an IP address like 10.20.3.14."), field="mgmt_ip") from None


def _next_hostname(session: Session, sku_id: str) -> str:
    short = sku_id.replace("hgx-", "")
    n = session.exec(select(func.count()).select_from(Node).where(Node.sku_id == sku_id)).one()
    k = int(n) + 1
    while session.exec(select(Node).where(Node.hostname == f"{short}-{k:03d}")).first():
        k += 1
    return f"{short}-{k:03d}"


def add_node(
    session: Session,
    *,
    sku_id: str,
    now: datetime,
    actor: Any = None,
    hostname: str = "",
    mgmt_ip: str = "",
    state: str = NodeState.available.value,
    batch_id: int | None = None,
    order_id: int | None = None,
    ip: str = "",
) -> Node:
    s = get_spec(sku_id)
    if not s.self_serve:
        raise InvalidInput(
            N_("Racks are handled by sales; they are not stocked as nodes."), field="sku_id"
        )
    if state not in (NodeState.available.value, NodeState.maintenance.value, NodeState.held.value):
        raise InvalidInput(N_("A new node starts as available or in maintenance."), field="state")
    hostname = hostname.strip() or _next_hostname(session, sku_id)
    if len(hostname) > 80:
        raise InvalidInput(N_("Keep the host name under 80 characters."), field="hostname")
    if session.exec(select(Node).where(Node.hostname == hostname)).first():
        raise InvalidInput(N_("Another node already has this host name."), field="hostname")
    ip_ = _valid_ip(mgmt_ip)
    if not ip_:
        pool = free_ip_pool(session, sku_id, 1)
        ip_ = pool[0] if pool else ""
    elif session.exec(select(Node).where(Node.mgmt_ip == ip_)).first():
        raise InvalidInput(N_("Another node already uses this address."), field="mgmt_ip")
    node = Node(
        sku_id=sku_id,
        hostname=hostname,
        state=state,
        mgmt_ip=ip_,
        batch_id=batch_id,
        order_id=order_id,
        created_at=now,
        updated_at=now,
    )
    session.add(node)
    session.flush()
    audit.record(
        session,
        "catalog.node_added",
        now,
        actor=actor,
        target=f"node:{node.id}",
        ip=ip,
        sku=sku_id,
        hostname=hostname,
        mgmt_ip=ip_,
        state=state,
    )
    return node


# Which states ops may set by hand on the stock page. Nodes tied to an order move with the
# order (mark_nodes); by hand only free nodes move between available and maintenance, and a
# node whose wipe finished goes back to available.
MANUAL_STATES = (NodeState.available.value, NodeState.maintenance.value)


def update_node(
    session: Session,
    node_id: int,
    *,
    now: datetime,
    actor: Any = None,
    state: str | None = None,
    mgmt_ip: str | None = None,
    note: str | None = None,
    ip: str = "",
) -> Node:
    node = session.get(Node, node_id)
    if node is None:
        raise NotFound(N_("There is no such node."))
    lock_sku(session, node.sku_id, now)
    session.refresh(node)
    before = {"state": node.state, "mgmt_ip": node.mgmt_ip}
    if state is not None and state != node.state:
        if state not in MANUAL_STATES:
            raise InvalidInput(
                N_("By hand, a node can only be made available or put in maintenance."),
                field="state",
            )
        if node.order_id is not None and node.state != NodeState.wiping.value:
            raise Conflict(N_("This node belongs to an order; change it from the order."))
        node.state = state
        if state == NodeState.available.value:
            node.order_id = None
    if mgmt_ip is not None:
        new_ip = _valid_ip(mgmt_ip)
        if new_ip and new_ip != node.mgmt_ip:
            clash = session.exec(
                select(Node).where(Node.mgmt_ip == new_ip, Node.id != node.id)
            ).first()
            if clash:
                raise InvalidInput(N_("Another node already uses this address."), field="mgmt_ip")
        node.mgmt_ip = new_ip
    if note is not None:
        node.note = note.strip()[:300]
    node.updated_at = now
    session.add(node)
    audit.record(
        session,
        "catalog.node_changed",
        now,
        actor=actor,
        target=f"node:{node.id}",
        ip=ip,
        before=before,
        after={"state": node.state, "mgmt_ip": node.mgmt_ip},
    )
    session.flush()
    return node


def add_batch(
    session: Session,
    *,
    sku_id: str,
    quantity: int,
    expected_on: date,
    now: datetime,
    actor: Any = None,
    note: str = "",
    ip: str = "",
) -> IncomingBatch:
    s = get_spec(sku_id)
    errors = {}
    if not s.self_serve:
        errors["sku_id"] = N_("Racks are handled by sales; they are not stocked as nodes.")
    if not 1 <= quantity <= 500:
        errors["quantity"] = N_("A batch has between 1 and 500 nodes.")
    if expected_on < now.date():
        errors["expected_on"] = N_("The expected date cannot be in the past.")
    if errors:
        raise InvalidInput(errors=errors)
    b = IncomingBatch(
        sku_id=sku_id,
        quantity=quantity,
        expected_on=expected_on,
        note=note.strip()[:300],
        created_at=now,
    )
    session.add(b)
    session.flush()
    audit.record(
        session,
        "catalog.batch_added",
        now,
        actor=actor,
        target=f"batch:{b.id}",
        ip=ip,
        sku=sku_id,
        quantity=quantity,
        expected_on=expected_on.isoformat(),
    )
    return b


def _expected_batch(session: Session, batch_id: int, now: datetime) -> IncomingBatch:
    """The batch, its SKU's stock row locked and the row read again; still expected."""
    b = session.get(IncomingBatch, batch_id)
    if b is None:
        raise NotFound(N_("There is no such batch."))
    lock_sku(session, b.sku_id, now)
    session.refresh(b)
    if b.status != BatchStatus.expected.value:
        raise Conflict(N_("This batch has already arrived."))
    return b


def update_batch(
    session: Session,
    batch_id: int,
    *,
    now: datetime,
    actor: Any = None,
    quantity: int | None = None,
    expected_on: date | None = None,
    ip: str = "",
) -> IncomingBatch:
    b = _expected_batch(session, batch_id, now)
    errors = {}
    if quantity is not None and not max(1, b.reserved) <= quantity <= 500:
        errors["quantity"] = N_("Between the units already promised to orders and 500.")
    if expected_on is not None and expected_on < now.date():
        errors["expected_on"] = N_("The expected date cannot be in the past.")
    if errors:
        raise InvalidInput(errors=errors)
    before = {"quantity": b.quantity, "expected_on": b.expected_on.isoformat()}
    if quantity is not None:
        b.quantity = quantity
    if expected_on is not None:
        b.expected_on = expected_on
    session.add(b)
    audit.record(
        session,
        "catalog.batch_changed",
        now,
        actor=actor,
        target=f"batch:{b.id}",
        ip=ip,
        before=before,
        after={"quantity": b.quantity, "expected_on": b.expected_on.isoformat()},
    )
    session.flush()
    return b


def mark_batch_arrived(
    session: Session, batch_id: int, *, now: datetime, actor: Any = None, ip: str = ""
) -> list[Node]:
    """The batch is in the data centre: create its nodes; units promised to orders become
    nodes held for those orders (oldest reservation first), the rest are available."""
    b = _expected_batch(session, batch_id, now)
    # Orders waiting on this batch, oldest first.
    waiting: list[tuple[Any, int]] = []
    for r in open_reservations(session, b.sku_id):
        units = json.loads(r.batch_units_json or "[]")
        for bid, u in units:
            if int(bid) == b.id:
                waiting.append((r, int(u)))
    nodes = []
    for r, units in waiting:
        for _ in range(units):
            nodes.append(
                add_node(
                    session,
                    sku_id=b.sku_id,
                    now=now,
                    actor=actor,
                    state=NodeState.held.value,
                    batch_id=b.id,
                    order_id=r.order_id,
                    ip=ip,
                )
            )
        rest = [[bid, u] for bid, u in json.loads(r.batch_units_json or "[]") if int(bid) != b.id]
        r.batch_units_json = json.dumps(rest)
        r.from_stock += units
        session.add(r)
    for _ in range(b.quantity - len(nodes)):
        nodes.append(add_node(session, sku_id=b.sku_id, now=now, actor=actor, batch_id=b.id, ip=ip))
    b.status = BatchStatus.arrived.value
    b.arrived_at = now
    b.reserved = 0
    session.add(b)
    audit.record(
        session,
        "catalog.batch_arrived",
        now,
        actor=actor,
        target=f"batch:{b.id}",
        ip=ip,
        nodes=len(nodes),
    )
    session.flush()
    return nodes


def set_lead_time(
    session: Session, sku_id: str, days: int, *, now: datetime, actor: Any = None, ip: str = ""
) -> SkuStock:
    get_spec(sku_id)
    if not 1 <= days <= 60:
        raise InvalidInput(N_("Lead time is between 1 and 60 business days."), field="lead_time")
    row = lock_sku(session, sku_id, now)
    old = row.lead_time_business_days
    row.lead_time_business_days = days
    row.updated_at = now
    session.add(row)
    audit.record(
        session,
        "catalog.lead_time_changed",
        now,
        actor=actor,
        target=f"sku:{sku_id}",
        ip=ip,
        old=old,
        new=days,
    )
    session.flush()
    return row


def all_nodes(session: Session) -> list[Node]:
    return list(session.exec(select(Node).order_by(col(Node.sku_id), col(Node.hostname))).all())


def all_batches(session: Session, include_done: bool = False) -> list[IncomingBatch]:
    q = select(IncomingBatch).order_by(col(IncomingBatch.expected_on), col(IncomingBatch.id))
    if not include_done:
        q = q.where(IncomingBatch.status == BatchStatus.expected.value)
    return list(session.exec(q).all())
