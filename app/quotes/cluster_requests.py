"""Cluster requests: the sales path for what self-serve does not sell (any SKU, node
count and term, the ``/size`` query attached). A request changes state only here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import func
from sqlmodel import Session, col, select

from app.accounts import audit
from app.accounts.models import User
from app.catalog.specs import spec
from app.errors import N_, InvalidInput, NotFound
from app.quotes import pricing
from app.quotes.inputs import sizing_query_of
from app.quotes.models import ClusterRequest, ClusterRequestStatus, Quote
from app.quotes.schemas import ClusterRequestIn

# ----------------------------------------------------------------------------- cluster requests
# A "talk to sales" request for any SKU, node count and term. It is a sales conversation:
# created, listed and moved between states only here.

CLUSTER_REQUEST_STATUS_LABELS = {
    ClusterRequestStatus.new.value: N_("New"),
    ClusterRequestStatus.contacted.value: N_("Contacted"),
    ClusterRequestStatus.quoted.value: N_("Quoted"),
    ClusterRequestStatus.closed.value: N_("Closed"),
}
CLUSTER_REQUEST_PAGE_SIZE = 25
CLUSTER_REQUEST_PATH = "/cluster-request"


class ClusterRequestNotFound(NotFound):
    code = "cluster_request_not_found"
    default_message = N_("We could not find that request.")


def cluster_request_path(
    sku: str = "", nodes: int | None = None, months: int | None = None, sizing: str = ""
) -> str:
    """The prefilled cluster request form: the sales path for any SKU and node count."""
    pairs = [
        (k, str(v))
        for k, v in (("sku", sku), ("nodes", nodes), ("months", months), ("sizing", sizing))
        if v not in (None, "")
    ]
    return CLUSTER_REQUEST_PATH + ("?" + urlencode(pairs) if pairs else "")


def create_cluster_request(
    session: Session, data: ClusterRequestIn, *, user_id: int | None, now: datetime
) -> ClusterRequest:
    row = ClusterRequest(
        sku_id=data.sku,
        nodes=data.nodes,
        months=data.months,
        start_date=data.start_date,
        workload=data.workload,
        name=data.name,
        email=data.email,
        company=data.company,
        sizing_query=sizing_query_of(data.sizing),
        user_id=user_id,
        created_at=now,
    )
    session.add(row)
    session.flush()
    return row


def get_cluster_request(session: Session, request_id: int) -> ClusterRequest:
    row = session.get(ClusterRequest, request_id)
    if row is None:
        raise ClusterRequestNotFound()
    return row


def count_new_cluster_requests(session: Session) -> int:
    return int(
        session.exec(
            select(func.count())
            .select_from(ClusterRequest)
            .where(ClusterRequest.status == ClusterRequestStatus.new.value)
        ).one()
    )


@dataclass
class ClusterRequestPage:
    items: list[ClusterRequest]
    page: int
    pages: int
    total: int


def list_cluster_requests(session: Session, *, status: str, page: int) -> ClusterRequestPage:
    stmt = select(ClusterRequest)
    count = select(func.count()).select_from(ClusterRequest)
    if status in CLUSTER_REQUEST_STATUS_LABELS:
        stmt = stmt.where(ClusterRequest.status == status)
        count = count.where(ClusterRequest.status == status)
    total = int(session.exec(count).one())
    size = CLUSTER_REQUEST_PAGE_SIZE
    pages = max(1, (total + size - 1) // size)
    page = min(max(page, 1), pages)
    items = session.exec(
        stmt.order_by(col(ClusterRequest.created_at).desc(), col(ClusterRequest.id).desc())
        .offset((page - 1) * size)
        .limit(size)
    ).all()
    return ClusterRequestPage(list(items), page, pages, total)


def update_cluster_request(
    session: Session,
    request_id: int,
    *,
    status: str,
    staff_note: str | None,
    actor: User,
    now: datetime,
    ip: str = "",
) -> ClusterRequest:
    if status not in CLUSTER_REQUEST_STATUS_LABELS:
        raise InvalidInput(N_("Choose one of the listed statuses."), field="status")
    row = get_cluster_request(session, request_id)
    old = row.status
    row.status = status
    if staff_note is not None:
        row.staff_note = staff_note.strip()[:4000]
    _status_changed(session, row, actor=actor, now=now, ip=ip, old=old, status=status)
    return row


def _status_changed(
    session: Session, row: ClusterRequest, *, actor: User, now: datetime, ip: str, **details: Any
) -> None:
    """Write the request and the audit event of its new status."""
    session.add(row)
    audit.record(
        session,
        "cluster_request.status",
        now,
        actor=actor,
        target=f"cluster_request:{row.id}",
        ip=ip,
        **details,
    )


def quote_values_from_request(session: Session, request_id: int) -> dict[str, str]:
    """The quote builder's fields prefilled from a cluster request."""
    row = get_cluster_request(session, request_id)
    s = spec(row.sku_id)
    quantity = row.nodes * s.gpus_per_node if s.price_per_gpu else row.nodes
    return {
        "sku": row.sku_id,
        "quantity": str(quantity),
        "months": str(row.months),
        "prospect_name": row.name,
        "prospect_email": row.email,
        "prospect_company": row.company,
        "sizing": row.sizing_query,
        "sizing_notes": row.workload,
        "from_request": str(row.id),
    }


def mark_cluster_request_quoted(
    session: Session, request_id: int, q: Quote, *, actor: User, now: datetime, ip: str = ""
) -> None:
    """A quote was built from this request: it moves to "quoted" (if still open)."""
    row = session.get(ClusterRequest, request_id)
    if row is None or row.status not in (
        ClusterRequestStatus.new.value,
        ClusterRequestStatus.contacted.value,
    ):
        return
    row.status = ClusterRequestStatus.quoted.value
    row.staff_note = (row.staff_note + f"\n{pricing.reference(q.id or 0)}").strip()
    _status_changed(session, row, actor=actor, now=now, ip=ip, status=row.status, quote_id=q.id)
