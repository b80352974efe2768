"""Every staff page hangs off this one router, guarded at the router (sales or ops).

Ops-only actions are guarded again with ``OpsUser`` on the route. Each domain contributes
a sub-router from ``app/<domain>/staff_routes.py`` (paths relative to ``/staff``).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from app.accounts import staff_routes as accounts_staff
from app.accounts.deps import StaffUser, get_staff_user
from app.catalog import staff_routes as catalog_staff
from app.ledger import staff_routes as ledger_staff
from app.orders import staff_routes as orders_staff
from app.payments import staff_routes as payments_staff
from app.quotes import staff_routes as quotes_staff
from app.staff import clock_routes
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(
    route_class=AppRoute,
    prefix="/staff",
    dependencies=[Depends(get_staff_user)],
    include_in_schema=False,
)

STAFF_SUBROUTERS = (
    orders_staff.router,  # ops desk: queue, provisioning, leases
    catalog_staff.router,  # nodes, incoming batches, list prices
    ledger_staff.router,  # journal, balances, adjustments
    payments_staff.router,
    quotes_staff.router,  # sales quotes, cluster requests
    accounts_staff.router,  # audit log, users
    clock_routes.router,  # simulation clock
)


@router.get("", response_class=HTMLResponse)
def staff_home(request: Request, user: StaffUser) -> Response:
    return render(request, "staff/home.html", {})


for _sub in STAFF_SUBROUTERS:
    router.include_router(_sub)
