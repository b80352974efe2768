"""Ops actions on an order: acknowledge, provision, hand over, deliver, delay, end, wipe.

Every action checks the transition with the pure lifecycle, locks the order row, appends
a timeline event, tells the customer where it matters (console notification + email) and
writes an audit record — all in the caller's transaction (services never commit).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from sqlmodel import Session, select

from app import messages
from app.accounts import audit
from app.accounts.models import User
from app.catalog import service as catalog
from app.catalog.service import Node, NodeState
from app.errors import N_, Conflict, InvalidInput, NotFound
from app.ledger import service as ledger
from app.notifications.service import EmailLink, notify
from app.orders.invoice_lines import month_line, receipt_links
from app.orders.lifecycle import (
    LEASE_ACTIVE,
    PRE_DELIVERY,
    OrderStatus,
    TransitionError,
    check_transition,
)
from app.orders.models import Order, OrderEvent, OrderHost
from app.orders.periods import add_months
from app.orders.queries import hosts_of
from app.orders.writes import add_event
from app.text import single_line

FINGERPRINT_RE = re.compile(r"^(?:\d{3,5}\s+)?(SHA256:[A-Za-z0-9+/]{43})(?:\s+\S.*)?$")
SSH_USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
HOSTNAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,118}[A-Za-z0-9])?$")


class OrderStateConflict(Conflict):
    code = "order_state"
    default_message = N_("This order is {status}; that action is not possible now.")


class CredentialsMissing(Conflict):
    code = "credentials_missing"
    default_message = N_(
        "Enter the IP address, SSH user and host-key fingerprints of every node before "
        "marking the order delivered."
    )


# Status names as staff and customers read them.
STATUS_LABELS: dict[str, str] = {
    OrderStatus.awaiting_payment.value: N_("awaiting payment"),
    OrderStatus.paid.value: N_("paid, awaiting provisioning"),
    OrderStatus.provisioning.value: N_("provisioning"),
    OrderStatus.delivered.value: N_("delivered, lease active"),
    OrderStatus.ending.value: N_("ending at period end"),
    OrderStatus.suspended.value: N_("suspended"),
    OrderStatus.ended.value: N_("ended"),
    OrderStatus.wiping.value: N_("wiping"),
    OrderStatus.wiped.value: N_("wiped"),
    OrderStatus.cancelled.value: N_("cancelled"),
    OrderStatus.abandoned.value: N_("abandoned"),
}


# --- helpers -------------------------------------------------------------------------


def load_order(
    session: Session,
    order_id: int,
    *,
    lock: bool = True,
    allowed: frozenset[OrderStatus] | set[OrderStatus] | None = None,
) -> Order:
    """The order (locked for this transaction unless ``lock=False``); 404 when there is no
    such order, 409 when ``allowed`` is given and the order is in none of those states."""
    stmt = select(Order).where(Order.id == order_id)
    if lock:
        stmt = stmt.with_for_update()
    order = session.exec(stmt).first()
    if order is None:
        raise NotFound(N_("No order with that number."))
    if allowed is not None:
        require(order, allowed)
    return order


def move_to(order: Order, target: OrderStatus) -> None:
    try:
        check_transition(order.status, target.value)
    except (TransitionError, ValueError):
        raise OrderStateConflict(status=order.status) from None
    order.status = target.value


def require(order: Order, allowed: frozenset[OrderStatus] | set[OrderStatus]) -> None:
    if OrderStatus(order.status) not in allowed:
        raise OrderStateConflict(status=order.status)


def event(
    session: Session,
    order: Order,
    kind: str,
    msgid: str,
    now: datetime,
    actor: User | None = None,
    *,
    customer_visible: bool = True,
    **params: Any,
) -> OrderEvent:
    """A timeline entry, stored as a code: each reader sees it in their own language."""
    return add_event(
        session, order, kind, msgid, now, actor, customer_visible=customer_visible, params=params
    )


def customer_of(session: Session, order: Order) -> User:
    user = session.get(User, order.user_id)
    assert user is not None
    return user


def tell(
    session: Session,
    order: Order,
    kind: str,
    msgid: str,
    now: datetime,
    *,
    email: bool = False,
    links: Sequence[EmailLink] = (),
    **params: Any,
) -> None:
    """Tell the order's customer (console; by email with ``email``, linking to the order
    and to ``links``: the receipt or credit note the event issued)."""
    customer = customer_of(session, order)
    notify(
        session,
        user_id=customer.id or 0,
        kind=kind,
        message=msgid,
        params={"id": order.id, **params},
        now=now,
        link=f"/console/orders/{order.id}",
        email_to=customer.email if email else None,
        email_subject=N_("Order #{id}: {what}") if email else None,
        links=links,
    )


def audit_order(
    session: Session, action: str, order: Order, actor: User, now: datetime, ip: str, **d: Any
) -> None:
    """The audit record ``order.<action>`` of what ``actor`` did to the order."""
    audit.record(
        session, f"order.{action}", now, actor=actor, target=f"order:{order.id}", ip=ip, **d
    )


def audit_action(
    session: Session, action: str, order: Order, actor: User, now: datetime, ip: str, **d: Any
) -> None:
    """An ops action's audit record, with the status it left the order in."""
    audit_order(session, action, order, actor, now, ip, status=order.status, **d)


# The plain ops steps: what the order's timeline says, and what the customer is told.
STEP_TEXTS: dict[str, tuple[str, str]] = {
    "acknowledged": (
        N_("An engineer reviewed the order and its notes."),
        N_("Order #{id}: an engineer has reviewed your order and notes."),
    ),
    "provisioning": (
        N_("Provisioning started."),
        N_("Order #{id}: we started provisioning your nodes."),
    ),
    "wiped": (
        N_("The disks were securely wiped."),
        N_("Order #{id}: the disks of your nodes have been securely wiped."),
    ),
}


def step_done(
    session: Session, order: Order, actor: User, now: datetime, ip: str, step: str
) -> Order:
    """The end of a plain ops step (``STEP_TEXTS``): its timeline entry, the customer's
    console notice (``order.<step>``) and the audit record, written now."""
    timeline, notice = STEP_TEXTS[step]
    event(session, order, step, timeline, now, actor)
    tell(session, order, f"order.{step}", notice, now)
    audit_action(session, step, order, actor, now, ip)
    session.flush()
    return order


# --- actions -------------------------------------------------------------------------


def acknowledge(
    session: Session, *, actor: User, order_id: int, now: datetime, ip: str = ""
) -> Order:
    """An engineer has read the order and its notes."""
    order = load_order(session, order_id, allowed=PRE_DELIVERY)
    if order.acknowledged_at is not None:
        raise OrderStateConflict(N_("This order was already acknowledged."))
    order.acknowledged_at = now
    session.add(order)
    return step_done(session, order, actor, now, ip, "acknowledged")


def start_provisioning(
    session: Session, *, actor: User, order_id: int, now: datetime, ip: str = ""
) -> Order:
    order = load_order(session, order_id)
    move_to(order, OrderStatus.provisioning)
    order.provisioning_at = now
    if order.acknowledged_at is None:
        order.acknowledged_at = now
    session.add(order)
    catalog.mark_nodes(session, order.id or 0, NodeState.provisioning.value, now)
    return step_done(session, order, actor, now, ip, "provisioning")


def candidate_nodes(session: Session, order: Order) -> list[Node]:
    """Nodes ops may assign: those already held for this order, then (when the order is
    not waiting for an incoming batch) the free nodes of the same SKU, to swap one in."""
    own = [
        n
        for n in catalog.nodes_for_order(session, order.id or 0)
        if n.state in (NodeState.held.value, NodeState.provisioning.value)
    ]
    if catalog.waiting_units(session, order.id or 0) > 0:
        return own
    return own + catalog.free_nodes(session, order.sku_id)


def assign_nodes(
    session: Session,
    *,
    actor: User,
    order_id: int,
    node_ids: list[int],
    now: datetime,
    ip: str = "",
) -> list[OrderHost]:
    """Pick the physical nodes of the SKU (and so their addresses) for the order.

    The nodes held for the order at payment are the default; ops may swap in free nodes of
    the same SKU (a faulty one swapped out goes back to the pool). The hand-over rows
    (``OrderHost``) take each node's address, which ops may still change when they enter
    the credentials.
    """
    order = load_order(session, order_id, allowed=PRE_DELIVERY)
    waiting = catalog.waiting_units(session, order.id or 0)
    if waiting > 0:
        raise InvalidInput(
            N_(
                "{n} node(s) of this order are still waiting for an incoming batch: mark the "
                "batch arrived on the Nodes page first."
            ),
            field="node_ids",
            n=waiting,
        )
    wanted = list(dict.fromkeys(int(n) for n in node_ids))
    if len(wanted) != order.quantity:
        raise InvalidInput(
            N_("Pick exactly {n} node(s) for this order."), field="node_ids", n=order.quantity
        )
    pool = {n.id: n for n in candidate_nodes(session, order)}
    unknown = [n for n in wanted if n not in pool]
    if unknown:
        raise InvalidInput(
            N_("Node {node} is not free for this order (another model, or in use)."),
            field="node_ids",
            node=unknown[0],
        )
    chosen = catalog.swap_nodes(
        session,
        order_id=order.id or 0,
        wanted=wanted,
        provisioning=order.status == OrderStatus.provisioning.value,
        now=now,
    )
    locked = {n.id: n for n in chosen}
    existing = {h.node_id: h for h in hosts_of(session, order.id or 0)}
    out: list[OrderHost] = []
    for h in existing.values():
        if h.node_id not in wanted:
            session.delete(h)
    for nid in wanted:
        n = locked[nid]
        host = existing.get(nid)
        if host is None:
            host = OrderHost(order_id=order.id or 0, node_id=nid, ip=n.mgmt_ip or "")
        host.hostname = n.hostname
        if not host.ip:
            host.ip = n.mgmt_ip or ""
        session.add(host)
        out.append(host)
    event(
        session,
        order,
        "nodes_assigned",
        N_("Nodes assigned: {names}."),
        now,
        actor,
        customer_visible=False,
        names=", ".join(locked[nid].hostname for nid in wanted),
    )
    audit_action(session, "nodes_assigned", order, actor, now, ip, node_ids=wanted)
    session.flush()
    return out


@dataclass
class HostInput:
    ip: str
    fingerprints: str
    host_id: int | None = None
    hostname: str = ""


@dataclass
class CredentialsInput:
    ssh_user: str
    hosts: list[HostInput] = field(default_factory=list)
    ssh_port: int = 22


def parse_fingerprints(text: str) -> list[str] | None:
    """One ``SHA256:<43 base64 chars>`` per line (``ssh-keygen -lf`` lines accepted)."""
    lines = [ln.strip() for ln in text.replace("\r", "").split("\n") if ln.strip()]
    if not lines:
        return None
    out = []
    for ln in lines:
        if not FINGERPRINT_RE.match(ln):
            return None
        out.append(ln)
    return out


def validate_credentials(data: CredentialsInput, quantity: int) -> dict[str, str]:
    errors: dict[str, str] = {}
    if not SSH_USER_RE.match(data.ssh_user or ""):
        errors["ssh_user"] = N_(
            "A Unix user name: lower-case letters, digits, _ or -, starting with a letter."
        )
    if not 1 <= data.ssh_port <= 65535:
        errors["ssh_port"] = N_("A port between 1 and 65535.")
    if len(data.hosts) != quantity:
        errors["hosts"] = N_("Enter the details of every node of the order.")
    seen: set[str] = set()
    for i, h in enumerate(data.hosts):
        try:
            addr = str(ipaddress.ip_address(h.ip.strip()))
        except ValueError:
            errors[f"ip_{i}"] = N_("An IPv4 or IPv6 address, like 203.0.113.10 or 2001:db8::10.")
        else:
            if addr in seen:
                errors[f"ip_{i}"] = N_("Each node needs its own IP address.")
            seen.add(addr)
        if h.hostname and not HOSTNAME_RE.match(h.hostname):
            errors[f"hostname_{i}"] = N_("Letters, digits, dots and dashes only.")
        if parse_fingerprints(h.fingerprints) is None:
            errors[f"fp_{i}"] = N_(
                "One fingerprint per line, as ssh-keygen -lf prints it: SHA256: followed "
                "by 43 characters."
            )
    return errors


def set_credentials(
    session: Session,
    *,
    actor: User,
    order_id: int,
    data: CredentialsInput,
    now: datetime,
    ip: str = "",
) -> list[OrderHost]:
    """Enter IPs, SSH user and host keys; the customer sees them at once in the console."""
    order = load_order(session, order_id, allowed=PRE_DELIVERY | LEASE_ACTIVE)
    errors = validate_credentials(data, order.quantity)
    if errors:
        raise InvalidInput(errors=errors)
    existing = hosts_of(session, order.id or 0)
    by_id = {h.id: h for h in existing}
    used: set[int] = set()
    out: list[OrderHost] = []
    spare = [h for h in existing]
    for h_in in data.hosts:
        host = by_id.get(h_in.host_id) if h_in.host_id else None
        if host is not None and host.id in used:
            host = None  # the same row twice in one form: give the second its own row
        if host is None:
            host = next(
                (
                    h
                    for h in spare
                    if h.id not in used and h.id not in {x.host_id for x in data.hosts}
                ),
                None,
            )
        if host is None:
            host = OrderHost(order_id=order.id or 0, ip="")
        if host.id is not None:
            used.add(host.id)
        host.ip = str(ipaddress.ip_address(h_in.ip.strip()))
        if h_in.hostname:
            host.hostname = h_in.hostname.strip()
        host.ssh_user = data.ssh_user
        host.ssh_port = data.ssh_port
        host.host_key_fingerprints = "\n".join(parse_fingerprints(h_in.fingerprints) or [])
        session.add(host)
        out.append(host)
    for h in existing:
        if h.id not in used and h not in out:
            session.delete(h)
    event(
        session,
        order,
        "credentials",
        N_("Login details ready: {ips}."),
        now,
        actor,
        ips=", ".join(h.ip for h in out),
    )
    tell(
        session,
        order,
        "order.credentials",
        N_("Order #{id}: the IP addresses and SSH login of your nodes are in the console."),
        now,
        email=True,
    )
    audit_action(session, "credentials_set", order, actor, now, ip, ips=[h.ip for h in out])
    session.flush()
    return out


def mark_delivered(
    session: Session, *, actor: User, order_id: int, now: datetime, ip: str = ""
) -> Order:
    """Hand-over: the first month's hold is posted and the lease starts now."""

    order = load_order(session, order_id, allowed=PRE_DELIVERY)
    waiting = catalog.waiting_units(session, order.id or 0)
    if waiting > 0:
        raise OrderStateConflict(
            N_(
                "{n} node(s) of this order are still waiting for an incoming batch: mark the "
                "batch arrived on the Nodes page first."
            ),
            n=waiting,
        )
    hosts = hosts_of(session, order.id or 0)
    if len(hosts) < order.quantity or any(not h.ip or not h.host_key_fingerprints for h in hosts):
        raise CredentialsMissing()
    if order.first_hold_id is None:
        raise OrderStateConflict(N_("This order has no payment hold to post."))
    late = order.promised_date is not None and now.date() > order.promised_date
    move_to(order, OrderStatus.delivered)
    charged = ledger.post_hold(
        session,
        order.first_hold_id,
        now=now,
        actor_id=actor.id,
        lines=[month_line(session, order, now, add_months(now, 1))],
    )
    order.delivered_at = now
    order.period_start = now
    order.period_end = add_months(now, 1)
    order.periods_paid = 1
    order.grace_until = None
    session.add(order)
    catalog.mark_nodes(session, order.id or 0, "leased", now)
    event(session, order, "delivered", N_("Delivered; the lease is active."), now, actor)
    tell(
        session,
        order,
        "order.delivered",
        N_("Order #{id} is delivered. Your lease runs until {end}; it renews monthly."),
        now,
        email=True,
        links=receipt_links(session, charged),
        end=messages.day(order.period_end),
    )
    audit_action(session, "delivered", order, actor, now, ip, late=late)
    session.flush()
    return order


MAX_DELAY = timedelta(days=365)  # a new estimate further out than this is a typo (9999-12-31)


def mark_delayed(
    session: Session,
    *,
    actor: User,
    order_id: int,
    reason: str,
    new_estimate: date | None,
    now: datetime,
    ip: str = "",
) -> Order:
    """Tell the customer why and when; after the promise has passed they may cancel for a
    full refund (the console offers it)."""
    order = load_order(session, order_id, allowed=PRE_DELIVERY)
    errors: dict[str, str] = {}
    reason = single_line(reason)  # it reaches an email subject
    # letters and digits, not dots or invisible characters ("....", "。。。。", four U+200B
    # reached the customer as "Delayed: ."); "供货延误" is a whole reason in four
    if sum(ch.isalnum() for ch in reason) < 4:
        errors["reason"] = N_(
            "Tell the customer what is holding the order up (at least 4 characters)."
        )
    elif len(reason) > 500:
        errors["reason"] = N_("At most 500 characters.")
    if new_estimate is None:
        errors["new_estimate"] = N_(
            "Give the new estimated delivery date, a real date (YYYY-MM-DD)."
        )  # empty, or not a date (2027-02-30)
    elif new_estimate < now.date():
        errors["new_estimate"] = N_("The new estimate cannot be in the past.")
    elif new_estimate > now.date() + MAX_DELAY:
        errors["new_estimate"] = N_(
            "Give an estimate within a year; a longer wait is a cancellation, not a delay."
        )
    if errors:
        raise InvalidInput(errors=errors)
    assert new_estimate is not None
    order.delay_reason = reason
    order.delay_estimate = new_estimate
    session.add(order)
    # The reason goes inside a sentence that ends with its own full stop ("…below..").
    sentence_part = reason.rstrip(" .。!！")
    event(
        session,
        order,
        "delayed",
        N_("Delayed: {reason}. New estimate: {estimate}."),
        now,
        actor,
        reason=sentence_part,
        estimate=messages.day(new_estimate),
    )
    promise_passed = order.promised_date is not None and new_estimate > order.promised_date
    if promise_passed:
        msgid = N_(
            "Order #{id} is delayed: {reason}. New estimate: {estimate}. This is after the "
            "date we promised, so you may cancel it for a full refund to your balance in the "
            "console once {promised} has passed, or keep waiting."
        )
    else:
        msgid = N_("Order #{id} is delayed: {reason}. New estimate: {estimate}.")
    tell(
        session,
        order,
        "order.delayed",
        msgid,
        now,
        email=True,
        reason=sentence_part,
        estimate=messages.day(new_estimate),
        promised=messages.day(order.promised_date) if order.promised_date else "",
    )
    audit_action(
        session, "delayed", order, actor, now, ip, reason=reason, estimate=new_estimate.isoformat()
    )
    session.flush()
    return order


def is_rocm(order: Order) -> bool:
    return order.sku_id.startswith("mi") or "rocm" in order.image_id
