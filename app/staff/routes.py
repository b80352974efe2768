"""Every staff page hangs off this one router, guarded at the router (sales or ops).

Ops-only actions are guarded again with ``OpsUser`` on the route. Each domain contributes
a sub-router from ``app/<domain>/staff_routes.py`` (paths relative to ``/staff``).
"""

from __future__ import annotations

import importlib

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from app.accounts.deps import StaffUser, get_staff_user
from app.web.templating import render

router = APIRouter(prefix="/staff", dependencies=[Depends(get_staff_user)], include_in_schema=False)

STAFF_SUBROUTERS = (
    "app.orders.staff_routes",  # ops desk: queue, provisioning, leases
    "app.catalog.staff_routes",  # nodes, incoming batches, list prices
    "app.ledger.staff_routes",  # journal, balances, adjustments
    "app.payments.staff_routes",
    "app.quotes.staff_routes",  # sales quotes, GB300 requests
    "app.accounts.staff_routes",  # audit log, users
    "app.staff.clock_routes",  # simulation clock
)


@router.get("", response_class=HTMLResponse)
def staff_home(request: Request, user: StaffUser) -> Response:
    return render(request, "staff/home.html", {})


for _name in STAFF_SUBROUTERS:
    try:
        _module = importlib.import_module(_name)
    except ModuleNotFoundError as _e:
        if _e.name != _name:
            raise
        continue
    router.include_router(_module.router)
