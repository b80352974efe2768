"""The simulation clock (mounted under /staff): see simulated "now" and move it forward.

Only in simulation mode (404 otherwise). Sales may look; moving time is for ops and is
audited. With a ``SimulatedClock`` the offset lives in the database, so every process
(app, worker) moves together; a ``FixedClock`` (tests) is advanced in memory.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.accounts import audit
from app.accounts.deps import OpsUser, StaffUser
from app.clock import FixedClock, SimulatedClock
from app.errors import N_, NotFound
from app.web.deps import SessionDep, SettingsDep
from app.web.flash import flash
from app.web.forms import FormModel
from app.web.i18n import gettext as _
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute)

UNITS = {"hours": 1, "days": 24}
MAX_HOURS = 24 * 400


def _require_simulation(settings: SettingsDep) -> None:
    if not settings.simulation:
        raise NotFound(N_("The clock can only be moved in simulation mode."))


def _page(
    request: Request, errors: dict[str, str], form: dict[str, str], status: int = 200
) -> Response:
    clock = request.app.state.clock
    offset = None
    if isinstance(clock, SimulatedClock):
        offset = clock.offset()
    return render(
        request,
        "staff/clock.html",
        {"errors": errors, "form": form, "offset": offset, "sim_now": clock.now()},
        status_code=status,
    )


@router.get("/clock", response_class=HTMLResponse)
def clock_page(request: Request, user: StaffUser, settings: SettingsDep) -> Response:
    _require_simulation(settings)
    return _page(request, {}, {"amount": "1", "unit": "days"})


class ClockForm(FormModel):
    amount: str = ""
    unit: str = "days"


@router.post("/clock")
def clock_advance(
    request: Request,
    user: OpsUser,
    session: SessionDep,
    settings: SettingsDep,
    form: Annotated[ClockForm, Form()],
) -> Response:
    _require_simulation(settings)
    raw_amount = form.amount.strip()
    unit = form.unit
    values = {"amount": raw_amount, "unit": unit}
    errors: dict[str, str] = {}
    if unit not in UNITS:
        errors["unit"] = _("Pick hours or days.")
    try:
        amount = int(raw_amount)
    except ValueError:
        amount = 0
    hours = amount * UNITS.get(unit, 1)
    if amount < 1:
        errors["amount"] = _("A whole number, 1 or more: the clock only moves forward.")
    elif hours > MAX_HOURS:
        errors["amount"] = _("At most 400 days at a time.")
    clock = request.app.state.clock
    if not errors and not isinstance(clock, SimulatedClock | FixedClock):
        errors["amount"] = _("This clock cannot be moved.")
    if errors:
        return _page(request, errors, values, status=422)
    before = clock.now()
    delta = timedelta(hours=hours)
    if isinstance(clock, SimulatedClock):
        clock.advance(session, delta)
    else:
        clock.advance(delta)
    after = before + delta
    audit.record(
        session,
        "clock.advanced",
        after,
        actor=user,
        target="clock",
        ip=audit.client_ip(request),
        hours=hours,
        before=before.isoformat(),
        after=after.isoformat(),
    )
    flash(request, _("The clock moved forward by %(n)s hours.") % {"n": hours}, "success")
    return RedirectResponse("/staff/clock", status_code=303)
