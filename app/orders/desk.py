"""Read side of the ops desk: the queue, its filters, search and pagination.

Every query is indexed (status, promised_date, sku_id, user email) and paginated with
LIMIT/OFFSET, so the desk stays fast with thousands of orders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import func
from sqlmodel import Session, col, select

from app.accounts.models import User
from app.orders.lifecycle import PRE_DELIVERY, OrderStatus, is_late
from app.orders.models import Order
from app.orders.ops import is_rocm
from app.orders.periods import at_risk_cutoff

PAGE_SIZE = 50

VIEWS: dict[str, tuple[str, ...]] = {
    "queue": tuple(s.value for s in PRE_DELIVERY),
    "leases": (OrderStatus.delivered.value, OrderStatus.ending.value, OrderStatus.suspended.value),
    "wipe": (OrderStatus.ended.value, OrderStatus.wiping.value),
    "closed": (
        OrderStatus.wiped.value,
        OrderStatus.cancelled.value,
        OrderStatus.abandoned.value,
    ),
    "unpaid": (OrderStatus.awaiting_payment.value,),
}


@dataclass
class Filters:
    view: str = "queue"
    status: str = ""
    sku: str = ""
    at_risk: bool = False
    private: bool = False
    q: str = ""
    page: int = 1

    @classmethod
    def from_query(cls, params: Any) -> Filters:
        def flag(name: str) -> bool:
            return str(params.get(name, "")).lower() in ("1", "on", "true", "yes")

        view = str(params.get("view", "queue"))
        status = str(params.get("status", ""))
        try:
            page = max(1, min(int(params.get("page", 1)), 100000))
        except (TypeError, ValueError):
            page = 1
        return cls(
            view=view if view in VIEWS or view == "all" else "queue",
            status=status if status in {s.value for s in OrderStatus} else "",
            sku=str(params.get("sku", ""))[:32],
            at_risk=flag("at_risk"),
            private=flag("private"),
            q=str(params.get("q", "")).strip()[:254],
            page=page,
        )

    def query(self, **change: Any) -> str:
        data = {
            "view": self.view,
            "status": self.status,
            "sku": self.sku,
            "at_risk": "1" if self.at_risk else "",
            "private": "1" if self.private else "",
            "q": self.q,
            "page": str(self.page),
        }
        data.update({k: str(v) for k, v in change.items()})
        return urlencode({k: v for k, v in data.items() if v and not (k == "page" and v == "1")})


@dataclass
class QueueRow:
    order: Order
    email: str
    days_left: int | None
    late: bool
    at_risk: bool
    rocm: bool


@dataclass
class QueuePage:
    rows: list[QueueRow]
    total: int
    page: int
    pages: int
    filters: Filters
    groups: list[dict[str, Any]] = field(default_factory=list)


def _where(f: Filters, today: date) -> list[Any]:
    conds: list[Any] = []
    if f.status:
        conds.append(Order.status == f.status)
    elif f.view != "all":
        conds.append(col(Order.status).in_(VIEWS[f.view]))
    if f.sku:
        conds.append(Order.sku_id == f.sku)
    if f.at_risk:
        conds.append(col(Order.status).in_([s.value for s in PRE_DELIVERY]))
        conds.append(col(Order.promised_date).is_not(None))
        conds.append(col(Order.promised_date) <= at_risk_cutoff(today))
    if f.private:
        conds.append(col(Order.note_private_network).is_(True))
    q = f.q.lstrip("#").strip()
    if q:
        if q.isascii() and q.isdigit() and len(q) < 19:
            conds.append(Order.id == int(q))
        else:
            conds.append(func.lower(User.email).like(q.lower().replace("%", "") + "%"))
    return conds


def queue(session: Session, f: Filters, now: datetime) -> QueuePage:
    today = now.date()
    conds = _where(f, today)
    base = select(Order, User.email).join(User, col(User.id) == Order.user_id).where(*conds)
    total = session.exec(
        select(func.count())
        .select_from(Order)
        .join(User, col(User.id) == Order.user_id)
        .where(*conds)
    ).one()
    pre = f.view == "queue" or f.status in {s.value for s in PRE_DELIVERY} or f.at_risk
    if pre:
        # Promised date ascending puts the at-risk ones first (late, then due within one
        # business day); orders with no promise yet go last.
        order_by = [col(Order.promised_date).is_(None), col(Order.promised_date), col(Order.id)]
    elif f.view == "leases":
        order_by = [col(Order.period_end).is_(None), col(Order.period_end), col(Order.id)]
    else:
        order_by = [col(Order.id).desc()]
    pages = max(1, -(-int(total) // PAGE_SIZE))
    page = min(f.page, pages)
    rows = session.exec(
        base.order_by(*order_by).offset((page - 1) * PAGE_SIZE).limit(PAGE_SIZE)
    ).all()
    cutoff = at_risk_cutoff(today)
    out = []
    for order, email in rows:
        pending = OrderStatus(order.status) in PRE_DELIVERY
        days = (order.promised_date - today).days if order.promised_date and pending else None
        out.append(
            QueueRow(
                order=order,
                email=email,
                days_left=days,
                late=is_late(order.status, order.promised_date, now),
                at_risk=bool(pending and order.promised_date and order.promised_date <= cutoff),
                rocm=is_rocm(order),
            )
        )
    return QueuePage(rows=out, total=int(total), page=page, pages=pages, filters=f)


def private_network_groups(
    session: Session, *, user_id: int | None = None, limit: int = 300
) -> list[dict[str, Any]]:
    """Private-network requests of open orders, grouped per customer (one network each)."""
    open_states = [s.value for s in PRE_DELIVERY] + list(VIEWS["leases"])
    stmt = (
        select(Order, User.email)
        .join(User, col(User.id) == Order.user_id)
        .where(col(Order.note_private_network).is_(True), col(Order.status).in_(open_states))
    )
    if user_id is not None:
        stmt = stmt.where(Order.user_id == user_id)
    stmt = stmt.order_by(col(Order.user_id), col(Order.id)).limit(limit)
    groups: dict[int, dict[str, Any]] = {}
    for order, email in session.exec(stmt).all():
        g = groups.setdefault(
            order.user_id, {"user_id": order.user_id, "email": email, "orders": [], "nodes": 0}
        )
        g["orders"].append(order)
        g["nodes"] += order.quantity
    return sorted(groups.values(), key=lambda g: (-g["nodes"], g["email"]))


def risk_counts(session: Session, now: datetime) -> dict[str, int]:
    """How many orders awaiting provisioning are late, and how many are due within one
    business day (the desk's headline)."""
    today = now.date()
    pending = col(Order.status).in_([s.value for s in PRE_DELIVERY])

    def count(*conds: Any) -> int:
        return int(
            session.exec(select(func.count()).select_from(Order).where(pending, *conds)).one()
        )

    return {
        "late": count(col(Order.promised_date) < today),
        "due_soon": count(
            col(Order.promised_date) >= today, col(Order.promised_date) <= at_risk_cutoff(today)
        ),
    }
