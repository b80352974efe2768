"""Public catalog pages: /nodes, /nodes/{sku}, the GB300 request form, monthly vs hourly."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.accounts.deps import OptionalUser
from app.catalog import pricing
from app.catalog import service as svc
from app.catalog.models import RackRequest
from app.catalog.promise import zone
from app.catalog.specs import NodeSpec, all_specs
from app.errors import N_
from app.money import parse_amount
from app.numbers import parse_int
from app.web.deps import NowDep, SessionDep
from app.web.flash import flash
from app.web.i18n import gettext as _
from app.web.templating import is_htmx, render

router = APIRouter(include_in_schema=False)

RACK_SKU = "gb300-nvl72"
SOURCE_LEGEND = (
    ("P", N_("the product page")),
    ("V", N_("vendor-published")),
    ("T", N_("third-party measurement or listing")),
    ("E", N_("our list price, set by us and changed by staff")),
)

# Catalog data strings shown on the pages (translated with _() in the templates).
DATA_STRINGS = (
    N_("≈ 480 GB/s with NVLS (≈ 370 without)"),
    N_("≈ 475–480 GB/s"),
    N_("≈ 830 GB/s"),
    N_("≈ 845 GB/s"),
    N_("Ubuntu 22.04 + NVIDIA driver, CUDA, Docker, NVIDIA Container Toolkit"),
    N_("Ubuntu 24.04 + NVIDIA driver, CUDA, Docker, NVIDIA Container Toolkit"),
    N_("Ubuntu 22.04 + ROCm, Docker"),
    N_("Ubuntu 24.04 + ROCm, Docker"),
)


def customer_tz(request: Request) -> str:
    """The browser's time zone (cookie set by static/app.js), UTC when unknown."""
    name = request.cookies.get("tz") or "UTC"
    return zone(name).key


def src(value: str) -> str:
    """Source classes of a figure for a superscript: "P,V (FP8: V)" → "P,V";
    "assumed equal to HGX B300 (T)" → "T"; "-" → ""."""
    seen: list[str] = []
    for c in re.findall(r"\b[PVTE]\b", value):
        if c not in seen:
            seen.append(c)
    return ",".join(seen)


def gpu_hour_cents(s: NodeSpec, price_cents: int) -> float:
    if s.price_per_gpu:
        return price_cents / pricing.HOURS_PER_MONTH
    return pricing.per_gpu_hour_cents(price_cents, s.gpus_per_node, pricing.HOURS_PER_MONTH)


def what_fits(sku_id: str) -> dict[str, Any] | None:
    """The sizing engine's largest full-training model at 4k context; None if unavailable."""
    try:
        from app.sizing import largest_full_training_model
    except ImportError:
        return None
    try:
        return largest_full_training_model(sku_id, seq_len=4096)
    except Exception:  # the page shows nothing rather than a made-up figure
        return None


@router.get("/nodes", response_class=HTMLResponse)
def nodes_index(request: Request, session: SessionDep, now: NowDep) -> Response:
    specs = all_specs()
    prices = svc.list_prices(session)
    promises = svc.promises_for_all(session, now, customer_tz(request))
    rows = [
        {
            "s": s,
            "price": prices[s.id],
            "gpu_hour": gpu_hour_cents(s, prices[s.id]),
            "promise": promises[s.id],
        }
        for s in specs
    ]
    return render(
        request,
        "catalog/nodes.html",
        {"rows": rows, "src": src, "legend": SOURCE_LEGEND},
    )


@router.get("/nodes/{sku_id}", response_class=HTMLResponse)
def node_detail(request: Request, sku_id: str, session: SessionDep, now: NowDep) -> Response:
    s = svc.get_spec(sku_id)
    price = svc.list_price_cents(session, s.id)
    p = svc.current_promise(session, s.id, 1, now, customer_tz(request))
    from app.catalog.specs import all_images

    images = [i for i in all_images() if i.id in s.images]
    return render(
        request,
        "catalog/node.html",
        {
            "s": s,
            "price": price,
            "gpu_hour": gpu_hour_cents(s, price),
            "promise": p,
            "fits": what_fits(s.id),
            "images": images,
            "src": src,
            "legend": SOURCE_LEGEND,
            "nvme_raw_tb": (s.nvme_drives or 0) * (s.nvme_drive_tb or 0),
        },
    )


# ------------------------------------------------------------------ GB300 request


def _rack_form_defaults(now_date: date) -> dict[str, str]:
    return {
        "gpus": "72",
        "term_months": "12",
        "start_date": (now_date + timedelta(days=60)).isoformat(),
        "workload": "",
        "name": "",
        "email": "",
        "company": "",
    }


EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def validate_rack_request(
    form: dict[str, str], today: date
) -> tuple[dict[str, Any], dict[str, str]]:
    errors: dict[str, str] = {}
    clean: dict[str, Any] = {}
    try:
        gpus = parse_int(form.get("gpus", ""))
        if not 72 <= gpus <= 100_000 or gpus % 72:
            raise ValueError
        clean["gpus"] = gpus
    except ValueError:
        errors["gpus"] = _("Whole racks of 72 GPUs: enter 72, 144, 216, …")
    try:
        term = parse_int(form.get("term_months", ""))
        if not 12 <= term <= 36:
            raise ValueError
        clean["term_months"] = term
    except ValueError:
        errors["term_months"] = _("The term is 12 to 36 months.")
    try:
        start = date.fromisoformat(form.get("start_date", "").strip())
        if start < today:
            errors["start_date"] = _("Pick a start date from today on.")
        elif start > today + timedelta(days=730):
            errors["start_date"] = _("Pick a start date within two years.")
        else:
            clean["start_date"] = start
    except ValueError:
        errors["start_date"] = _("Enter a date (YYYY-MM-DD).")
    workload = form.get("workload", "").strip()
    if len(workload) < 10:
        errors["workload"] = _("Tell us about the workload in a sentence or two.")
    elif len(workload) > 4000:
        errors["workload"] = _("Keep it under 4,000 characters.")
    else:
        clean["workload"] = workload
    email = form.get("email", "").strip()
    if not EMAIL_RE.match(email) or len(email) > 254:
        errors["email"] = _("Enter an email address we can reply to.")
    else:
        clean["email"] = email.lower()
    for key, limit in (("name", 120), ("company", 120)):
        v = form.get(key, "").strip()
        if len(v) > limit:
            errors[key] = _("Keep it under 120 characters.")
        clean[key] = v[:limit]
    return clean, errors


@router.get("/nodes/gb300-nvl72/request", response_class=HTMLResponse)
def rack_request_form(
    request: Request, session: SessionDep, now: NowDep, user: OptionalUser
) -> Response:
    values = _rack_form_defaults(now.date())
    if user is not None:
        values["email"] = user.email
        values["name"] = user.name
        values["company"] = user.company
    return _render_rack_form(request, session, values, {})


def _render_rack_form(
    request: Request,
    session: Any,
    values: dict[str, str],
    errors: dict[str, str],
    status: int = 200,
) -> Response:
    s = svc.get_spec(RACK_SKU)
    return render(
        request,
        "catalog/rack_request.html",
        {
            "s": s,
            "price": svc.list_price_cents(session, RACK_SKU),
            "values": values,
            "errors": errors,
            "terms": list(range(12, 37, 6)),
        },
        status_code=status,
    )


@router.post("/nodes/gb300-nvl72/request", response_class=HTMLResponse)
async def rack_request_submit(
    request: Request, session: SessionDep, now: NowDep, user: OptionalUser
) -> Response:
    form = await request.form()
    values = {k: str(form.get(k, "")) for k in _rack_form_defaults(now.date())}
    clean, errors = validate_rack_request(values, now.date())
    if errors:
        return _render_rack_form(request, session, values, errors, status=422)
    rr = RackRequest(sku_id=RACK_SKU, user_id=getattr(user, "id", None), created_at=now, **clean)
    session.add(rr)
    session.flush()
    flash(
        request,
        _("Thank you. Sales received your request (no. {id}) and will reply by email.").format(
            id=rr.id
        ),
        "success",
    )
    return RedirectResponse(f"/nodes/{RACK_SKU}?requested={rr.id}", status_code=303)


# ------------------------------------------------------------------ monthly vs hourly


@router.get("/pricing/monthly-vs-hourly", response_class=HTMLResponse)
def monthly_vs_hourly(request: Request, session: SessionDep) -> Response:
    q = request.query_params
    self_serve = [s for s in all_specs() if s.self_serve]
    errors: dict[str, str] = {}
    sku_id = q.get("sku") or "hgx-b200"
    s = next((x for x in self_serve if x.id == sku_id), None)
    if s is None:
        errors["sku"] = _("Pick one of the nodes in the list.")
        s = next(x for x in self_serve if x.id == "hgx-b200")
    raw_hours = (q.get("hours") or "72").strip()
    try:
        hours = float(raw_hours)
        if not 1 <= hours <= pricing.HOURS_PER_MONTH:
            raise ValueError
    except ValueError:
        errors["hours"] = _("Enter hours between 1 and 730 (730 h is 24/7 for a month).")
        hours = 72.0
    raw_hourly = (q.get("hourly") or "").strip()
    hourly_cents = s.hourly_elsewhere_cents_per_gpu_hour  # empty field: the market figure
    if raw_hourly:
        try:
            hourly_cents = parse_amount(raw_hourly)
            if not 1 <= hourly_cents <= 100_000:
                raise ValueError
        except ValueError:
            errors["hourly"] = _("Enter a price per GPU-hour, for example 5.99.")
            hourly_cents = s.hourly_elsewhere_cents_per_gpu_hour
    price = svc.list_price_cents(session, s.id)
    c = pricing.compare(price, s.gpus_per_node, hours, hourly_cents)
    ctx = {
        "specs": self_serve,
        "s": s,
        "price": price,
        "c": c,
        "chart": pricing.chart(c),
        "errors": errors,
        "values": {"sku": s.id, "hours": raw_hours, "hourly": raw_hourly},
        "src": src,
        "examples": [
            (h, pricing.per_gpu_hour_cents(price, s.gpus_per_node, h)) for h in (730, 336, 168, 72)
        ],
    }
    template = "catalog/_mvh_result.html" if is_htmx(request) else "catalog/monthly_vs_hourly.html"
    return render(request, template, ctx, status_code=422 if errors else 200)
