"""JSON API for the prepaid balance and crypto top-ups (bearer token or session cookie).

- ``GET /api/v1/balance``: available and on-hold cents, and the latest statement lines;
- ``POST /api/v1/topups``: ``{"amount_cents": 250000, "currency": "USDC"}`` → a new invoice;
- ``GET /api/v1/topups/{id}``: the invoice, its status and what it credited.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import fastapi
from pydantic import BaseModel, Field, StrictInt

from app.accounts.deps import CurrentUser
from app.api.jsonbody import StrictJSONRoute
from app.clock import utc
from app.ledger import service as ledger
from app.payments import service as payments
from app.payments.rates import CURRENCIES, format_units
from app.web.deps import NowDep, SessionDep
from app.web.params import Limit, Offset, RowId

if TYPE_CHECKING:  # a type only: reads go through the service
    from app.payments.models import Invoice

router = fastapi.APIRouter(prefix="/api/v1", tags=["balance"], route_class=StrictJSONRoute)


class TopupIn(BaseModel):
    amount_cents: StrictInt = Field(  # JSON numbers only: true is not one cent
        description="US cents to add to the balance", examples=[250000]
    )
    currency: str = Field(description="BTC, ETH, USDT or USDC", examples=["USDC"])
    return_to: str | None = Field(default=None, description="a same-site path to link back to")


def invoice_json(inv: Invoice, *, simulated: bool) -> dict[str, Any]:
    cur = CURRENCIES[inv.currency]
    return {
        "id": inv.id,
        "provider_id": inv.provider_id,
        "status": inv.status,
        "exception_status": inv.exception_status or None,
        "final": inv.final,
        "amount_cents": inv.amount_cents,
        "currency": inv.currency,
        "decimals": cur.decimals,
        "rate_usd": inv.rate,
        "due_units": inv.due_units,
        "due": format_units(int(inv.due_units), cur.decimals),
        "received_units": inv.received_units,
        "address": inv.address,
        "payment_uri": inv.payment_uri,
        "expires_at": utc(inv.expires_at).isoformat(),
        "monitoring_until": utc(inv.monitoring_until).isoformat(),
        "credited_cents": inv.credited_cents,
        "created_at": utc(inv.created_at).isoformat(),
        "url": f"/topups/{inv.id}",
        # The deployment's provider made every invoice: a real one never says "simulated".
        "simulated": simulated,
    }


@router.get("/balance")
def get_balance(
    session: SessionDep, user: CurrentUser, limit: Limit = 20, offset: Offset = 0
) -> dict[str, Any]:
    """Available and on-hold balance in US cents, with the latest statement lines."""
    assert user.id is not None
    available, held, lines = ledger.balance_and_statement(
        session, user.id, max(1, min(limit, 100)), max(0, offset)
    )
    return {
        "currency": "USD",
        "available_cents": available,
        "held_cents": held,
        "statement": [
            {
                "entry_id": ln.entry_id,
                "at": utc(ln.at).isoformat(),
                "kind": ln.kind,
                "available_delta_cents": ln.available_delta,
                "held_delta_cents": ln.held_delta,
                "available_after_cents": ln.available_after,
                "order_id": ln.order_id,
                "invoice_id": ln.invoice_id,
                "reason": ln.reason,
            }
            for ln in lines
        ],
    }


@router.post("/topups", status_code=201)
def post_topup(
    body: TopupIn, request: fastapi.Request, session: SessionDep, user: CurrentUser, now: NowDep
) -> dict[str, Any]:
    """Create a crypto top-up invoice; the rate is locked for 15 minutes."""
    assert user.id is not None
    inv = payments.create_topup(
        session,
        user_id=user.id,
        amount_cents=body.amount_cents,
        currency=body.currency.upper(),
        now=now,
        return_to=body.return_to,
        provider=request.app.state.payment_provider,
    )
    return invoice_json(inv, simulated=_simulated(request))


@router.get("/topups/{invoice_id}")
def get_topup(
    invoice_id: RowId, request: fastapi.Request, session: SessionDep, user: CurrentUser
) -> dict[str, Any]:
    inv = payments.invoice_visible_to(session, user, invoice_id)
    return invoice_json(inv, simulated=_simulated(request))


def _simulated(request: fastapi.Request) -> bool:
    return bool(request.app.state.settings.payment_provider == "simulated")
