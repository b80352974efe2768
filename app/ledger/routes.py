"""``/balance``: available and on-hold balance, and a statement explaining every line."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.accounts.deps import CurrentUser
from app.errors import N_
from app.ledger import service as ledger
from app.payments import service as payments
from app.payments.rates import CURRENCIES, format_units
from app.web.deps import SessionDep
from app.web.templating import render

router = APIRouter(include_in_schema=False)
PAGE = 25

KIND_TEXT = {
    "topup": N_("Crypto top-up"),
    "promotion": N_("Promotional credit"),
    "hold": N_("Reserved for an order"),
    "hold_post": N_("Reservation charged"),
    "hold_void": N_("Reservation released (refund)"),
    "charge": N_("Charge"),
    "adjustment": N_("Adjustment by our staff"),
    "lease_credit": N_("Unused days credited"),
}
KIND_EXPLAIN = {
    "topup": N_("Converted once at the invoice's locked rate."),
    "promotion": N_("Credit given by us."),
    "hold": N_(
        "Moved from available to on hold; charged when the node is delivered, released if the order is cancelled."
    ),
    "hold_post": N_("The reserved amount was charged: your node was delivered."),
    "hold_void": N_("The reserved amount went back to your available balance."),
    "charge": N_("Paid directly from your available balance (for example a monthly renewal)."),
    "adjustment": N_("A correction made by our operations staff."),
    "lease_credit": N_(
        "Our operations team ended the lease early: the unused whole days of the paid month "
        "came back to your balance, pro rata."
    ),
}


def statement_context(session: SessionDep, user_id: int, page: int) -> dict[str, object]:
    page = max(1, page)
    available, held = ledger.balance_summary(session, user_id)
    total = ledger.statement_count(session, user_id)
    return {
        "available": available,
        "held": held,
        "lines": ledger.statement(session, user_id, PAGE, (page - 1) * PAGE),
        "page": page,
        "has_next": page * PAGE < total,
        "total": total,
        "kind_text": KIND_TEXT,
        "kind_explain": KIND_EXPLAIN,
        "coin": coin,
        "pending": ledger.pending_holds(session, user_id),
    }


def coin(units: str, currency: str) -> str:
    """Smallest units of a crypto receipt as whole coins (e.g. 2584732 sat → 0.02584732)."""
    cur = CURRENCIES.get(currency)
    try:
        return format_units(int(units), cur.decimals) if cur else units
    except ValueError:
        return units


@router.get("/balance", response_class=HTMLResponse)
def balance_page(
    request: Request, session: SessionDep, user: CurrentUser, page: int = 1
) -> Response:
    ctx = statement_context(session, user.id, page)  # type: ignore[arg-type]
    ctx["invoices"] = [i for i in payments.invoices_for(session, user.id, 10)]  # type: ignore[arg-type]
    return render(request, "ledger/balance.html", ctx)
