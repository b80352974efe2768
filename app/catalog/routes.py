"""Public catalog pages: /nodes, /nodes/{sku}, monthly vs hourly."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.catalog import pricing
from app.catalog import service as svc
from app.catalog.promise import zone
from app.catalog.specs import NodeSpec, all_images, all_specs
from app.errors import N_
from app.money import parse_amount
from app.sizing import SizingError, largest_full_training_model, reference_mfu
from app.sizing.stacks import NAMES as STACK_NAMES
from app.sizing.stacks import RELEASES as STACK_RELEASES
from app.web.deps import NowDep, SessionDep
from app.web.i18n import gettext as _
from app.web.routing import AppRoute
from app.web.templating import is_htmx, render, tz_name

router = APIRouter(route_class=AppRoute, include_in_schema=False)

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

    return zone(tz_name(request)).key


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
        return largest_full_training_model(sku_id, seq_len=4096)
    except Exception:  # the page shows nothing rather than a made-up figure
        return None


def sustained_mfu(sku_id: str) -> list[dict[str, Any]]:
    """The sizing engine's sustained MFU on one node of ``sku_id`` for its reference job
    (``app.sizing.REFERENCE_JOB``), per training stack it runs there: the figure the /size
    cards show for that job. Empty if the engine cannot answer (the page shows a dash)."""
    rows = []
    for fw, name in STACK_NAMES.items():
        try:
            mfu = reference_mfu(sku_id, fw)
        except SizingError:
            mfu = None
        if mfu is not None:
            rows.append({"framework": name, "release": STACK_RELEASES[fw], "mfu": mfu})
    return rows


def cached_list_prices(request: Request) -> Mapping[str, int]:
    """List prices from this process's cache, valid while the price version is unchanged."""
    return svc.price_cache_of(request.app.state).get(request.app.state.engine)


@router.get("/nodes", response_class=HTMLResponse)
def nodes_index(request: Request, session: SessionDep, now: NowDep) -> Response:
    specs = all_specs()
    prices = cached_list_prices(request)
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
            "mfu_rows": sustained_mfu(s.id),
            "images": images,
            "src": src,
            "legend": SOURCE_LEGEND,
            "nvme_raw_tb": (s.nvme_drives or 0) * (s.nvme_drive_tb or 0),
        },
    )


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
