"""Object factories for rule setups: each returns path parameters for objects owned by
customer A (``ctx.a``). Rows are inserted directly so the matrix does not depend on the
business rules it is not testing."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from tests.authz import Ctx

SKU = "hgx-h100"


def order_of_a(ctx: Ctx) -> dict[str, Any]:
    from app.orders.models import Order

    row = Order(
        user_id=ctx.a.id,
        idempotency_key=secrets.token_hex(8),
        sku_id=SKU,
        quantity=1,
        image_id="ubuntu-22.04",
        unit_price_cents=100_00,
        monthly_total_cents=100_00,
        created_at=ctx.now,
    )
    ctx.session.add(row)
    ctx.session.flush()
    return {"order_id": row.id}


def invoice_of_a(ctx: Ctx) -> dict[str, Any]:
    from app.payments.models import Invoice

    row = Invoice(
        provider_id=secrets.token_hex(8),
        user_id=ctx.a.id,
        amount_cents=500_00,
        currency="USDC",
        decimals=6,
        rate="1",
        due_units="500000000",
        address="0x" + secrets.token_hex(20),
        payment_uri="ethereum:0x0",
        created_at=ctx.now,
        expires_at=ctx.now + timedelta(minutes=15),
        monitoring_until=ctx.now + timedelta(hours=1),
        updated_at=ctx.now,
    )
    ctx.session.add(row)
    ctx.session.flush()
    return {"invoice_id": row.id}


def quote_for_a(ctx: Ctx, status: str = "sent") -> dict[str, Any]:
    from app.quotes.models import Quote

    row = Quote(
        token=secrets.token_urlsafe(24),
        status=status,
        created_by_id=ctx.sales.id,
        customer_user_id=ctx.a.id,
        prospect_email=ctx.a.email,
        sku_id=SKU,
        quantity=1,
        months=1,
        list_unit_price_cents=100_00,
        unit_price_cents=100_00,
        monthly_total_cents=100_00,
        total_cents=100_00,
        created_at=ctx.now,
        updated_at=ctx.now,
        sent_at=ctx.now,
        expires_at=ctx.now + timedelta(days=7),
    )
    ctx.session.add(row)
    ctx.session.flush()
    return {"quote_id": row.id, "token": row.token}


def draft_quote(ctx: Ctx) -> dict[str, Any]:
    return quote_for_a(ctx, status="draft")


def cluster_request_of_a(ctx: Ctx) -> dict[str, Any]:
    from app.quotes.models import ClusterRequest

    row = ClusterRequest(
        sku_id="gb300-nvl72",
        nodes=1,
        months=12,
        start_date=ctx.now.date(),
        workload="pretraining",
        email=ctx.a.email,
        user_id=ctx.a.id,
        created_at=ctx.now,
    )
    ctx.session.add(row)
    ctx.session.flush()
    return {"request_id": row.id}


def node(ctx: Ctx) -> dict[str, Any]:
    from app.catalog.models import Node

    row = Node(
        sku_id=SKU, hostname="n-" + secrets.token_hex(6), created_at=ctx.now, updated_at=ctx.now
    )
    ctx.session.add(row)
    ctx.session.flush()
    return {"node_id": row.id}


def batch(ctx: Ctx) -> dict[str, Any]:
    from app.catalog.models import IncomingBatch

    row = IncomingBatch(
        sku_id=SKU, quantity=1, expected_on=ctx.now.date() + timedelta(days=30), created_at=ctx.now
    )
    ctx.session.add(row)
    ctx.session.flush()
    return {"batch_id": row.id}


def sku(ctx: Ctx) -> dict[str, Any]:
    return {"sku_id": SKU}


def customer_a(ctx: Ctx) -> dict[str, Any]:
    return {"customer_id": ctx.a.id}


def receipt_of_a(ctx: Ctx) -> dict[str, Any]:
    from app.ledger.models import Receipt

    seq = secrets.randbelow(900_000) + 1
    row = Receipt(
        number=f"R-2099-{seq:06d}",
        year=2099,
        seq=seq,
        user_id=ctx.a.id,
        entry_id=secrets.randbelow(10**9),
        kind="topup",
        amount_cents=100_00,
        bill_email=ctx.a.email,
        created_at=ctx.now,
    )
    ctx.session.add(row)
    ctx.session.flush()
    return {"number": row.number}


def credit_note_of_a(ctx: Ctx) -> dict[str, Any]:
    from app.ledger.models import CreditNote

    seq = secrets.randbelow(900_000) + 1
    row = CreditNote(
        number=f"CN-2099-{seq:06d}",
        year=2099,
        seq=seq,
        user_id=ctx.a.id,
        entry_id=secrets.randbelow(10**9),
        kind="lease_credit",
        amount_cents=100_00,
        bill_email=ctx.a.email,
        created_at=ctx.now,
    )
    ctx.session.add(row)
    ctx.session.flush()
    return {"number": row.number}


def task_of_a(ctx: Ctx) -> dict[str, Any]:
    from app.orders.models import OrderTask

    order_id = order_of_a(ctx)["order_id"]
    row = OrderTask(
        order_id=order_id,
        requested_by=ctx.a.id,
        kind="reboot",
        created_at=ctx.now,
        updated_at=ctx.now,
    )
    ctx.session.add(row)
    ctx.session.flush()
    return {"task_id": row.id}
