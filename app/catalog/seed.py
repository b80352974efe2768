"""Demo stock: a small fleet per SKU, incoming batches, lead times and list prices.

Idempotent: SKUs that already have stock rows, nodes or prices are left alone.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import Session, select

from app.catalog.models import IncomingBatch, ListPrice, Node, NodeState, SkuStock
from app.catalog.service import DEFAULT_LEAD_DAYS, bump_price_version, subnet_for
from app.catalog.specs import all_specs

# (available, leased, maintenance) per SKU, and incoming batches as (days from now, nodes).
FLEET: dict[str, tuple[int, int, int]] = {
    "hgx-h100": (3, 2, 1),
    "hgx-h200": (2, 3, 0),
    "hgx-b200": (2, 3, 1),
    "hgx-b300": (1, 2, 0),
    "mi355x": (0, 2, 0),
}
BATCHES: dict[str, tuple[tuple[int, int], ...]] = {
    "hgx-h100": ((20, 4),),
    "hgx-h200": ((12, 4),),
    "hgx-b200": ((9, 4), (30, 8)),
    "hgx-b300": ((16, 4),),
    "mi355x": ((24, 2),),
}


def seed(session: Session, now: datetime) -> list[str]:
    lines: list[str] = []
    priced = False
    for s in all_specs():
        if session.get(ListPrice, s.id) is None:
            session.add(ListPrice(sku_id=s.id, cents=s.list_price_cents_month, updated_at=now))
            priced = True
        if not s.self_serve:
            continue
        if session.get(SkuStock, s.id) is None:
            lt = s.lead_time_business_days
            session.add(
                SkuStock(
                    sku_id=s.id,
                    lead_time_business_days=DEFAULT_LEAD_DAYS if lt is None else int(lt),
                    updated_at=now,
                )
            )
        if session.exec(select(Node).where(Node.sku_id == s.id)).first() is not None:
            continue
        avail, leased, maint = FLEET.get(s.id, (2, 0, 0))
        states = (
            [NodeState.available.value] * avail
            + [NodeState.leased.value] * leased
            + [NodeState.maintenance.value] * maint
        )
        hosts = list(subnet_for(s.id).hosts())
        short = s.id.replace("hgx-", "")
        for i, state in enumerate(states, start=1):
            session.add(
                Node(
                    sku_id=s.id,
                    hostname=f"{short}-{i:03d}",
                    state=state,
                    mgmt_ip=str(hosts[10 + i - 1]),
                    note="demo lease" if state == NodeState.leased.value else "",
                    created_at=now,
                    updated_at=now,
                )
            )
        for days, qty in BATCHES.get(s.id, ()):
            session.add(
                IncomingBatch(
                    sku_id=s.id,
                    quantity=qty,
                    expected_on=(now + timedelta(days=days)).date(),
                    note="demo batch",
                    created_at=now,
                )
            )
        lines.append(
            f"catalog: {s.name}: {len(states)} nodes ({avail} available), "
            f"{sum(q for _d, q in BATCHES.get(s.id, ()))} incoming"
        )
    session.flush()
    if priced:
        bump_price_version(session)
    return lines
