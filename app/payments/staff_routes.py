"""Staff: top-up invoices, with those needing review (money after the window) first."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.accounts.deps import StaffUser
from app.payments import service as payments
from app.web.deps import SessionDep
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute)


@router.get("/payments", response_class=HTMLResponse)
def invoices_page(
    request: Request, session: SessionDep, user: StaffUser, page: int = 1
) -> Response:
    page = max(1, page)
    return render(
        request,
        "payments/staff_invoices.html",
        {
            "review": payments.review_queue(session),
            "invoices": payments.recent_invoices(session, 50, (page - 1) * 50),
            "page": page,
        },
    )
