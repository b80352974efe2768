"""``GET /size``: the live sizing page.

One URL, two shapes: an htmx request gets only the results fragment (plus out-of-band
field errors); anything else gets the whole page with the results already rendered, so
the form works with JavaScript off and every result is a shareable link.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup
from starlette.datastructures import QueryParams
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send

from app.catalog.service import price_cache_of, price_version_now
from app.catalog.specs import all_specs
from app.configurator import forms
from app.configurator.cards import accuracy, card, recommendation, say
from app.configurator.cards import layout_rows as layout_rows  # quotes' staff pages use it
from app.configurator.charts import SEGMENTS
from app.configurator.delivery import (
    When,
    early_when,
    when_for,
    zone_name,
)
from app.configurator.fragments import Fragment, fragment_cache_of, price_version_memo_of
from app.errors import N_
from app.sizing import SizingError, list_presets, size
from app.sizing.messages import Msg
from app.web.encoding import MINIMUM_SIZE, accepts_gzip
from app.web.i18n import current_locale, full_stop, punct
from app.web.i18n import gettext as _
from app.web.routing import AppRoute
from app.web.templating import is_htmx, product_name, render, templates_of, tz_name

router = APIRouter(route_class=AppRoute)
log = logging.getLogger(__name__)

VARY = "HX-Request, HX-History-Restore-Request, Cookie, Accept-Language"


# Preset names that carry prose (translated when shown; the others are product names).
PRESET_NAME_MSGIDS = (N_("DeepSeek-V3 (671B MoE, MLA; MTP module excluded)"),)

FIELD_LABELS = {
    "model": N_("Model"),
    "params": N_("Parameters"),
    "vocab_size": N_("Vocabulary size"),
    "hidden_size": N_("Hidden size"),
    "intermediate_size": N_("MLP intermediate size"),
    "num_layers": N_("Layers"),
    "num_heads": N_("Attention heads"),
    "num_kv_heads": N_("Key/value heads"),
    "head_dim": N_("Head dimension (optional)"),
    "num_experts": N_("Experts (MoE, optional)"),
    "experts_per_token": N_("Experts per token"),
    "expert_intermediate_size": N_("Expert intermediate size"),
    "tokens": N_("Training tokens"),
    "seq_len": N_("Context length"),
    "mbs": N_("Micro-batch"),
    "gbs": N_("Global batch (optional)"),
    "precision": N_("Precision"),
    "method": N_("Method"),
    "recompute": N_("Activation recompute"),
    "framework": N_("Framework"),
    "compile": N_("torch.compile"),
    "par": N_("Layout"),
    "sharding": N_("Sharding"),
    "shard_group": N_("Shard group (GPUs)"),
    "tp": N_("Tensor parallel"),
    "pp": N_("Pipeline parallel"),
    "ep": N_("Expert parallel"),
    "cp": N_("Context parallel"),
    "mfu": N_("Model FLOPs utilisation (%%)"),
    "days": N_("Finish within (days, optional)"),
    "rocm": N_("Does your training stack run on AMD ROCm?"),
    "sku": N_("Node"),
    "nodes": N_("Number of nodes (optional)"),
}


@lru_cache(maxsize=1)
def _presets() -> tuple[dict[str, Any], ...]:
    return tuple(list_presets())


def _preset_ids() -> frozenset[str]:
    return frozenset(p["id"] for p in _presets())


def _live_prices(request: Request, version: int | None = None) -> dict[str, int] | None:
    """Live list prices: this process's cache, valid while the catalog's price version is
    unchanged (one primary-key read per request; the prices themselves are read again only
    after a change, made by any process). The engine's seed prices when there is no catalog.
    A fragment passes the version its cache key holds: not read a second time.

    The version is read outside any ORM transaction (on SQLite no ``BEGIN IMMEDIATE``,
    which would queue every page on the write lock); prices are read in their own short
    session only after a change.
    """
    try:
        cache = price_cache_of(request.app.state)
        return dict(cache.get(request.app.state.engine, version=version)) or None
    except Exception:  # an unmigrated catalog must not break sizing
        log.debug("no live prices", exc_info=True)
        request.state.prices_unread = True  # this answer is not kept (routes._fragment)
        return None


def _sku_choices() -> list[tuple[str, str]]:
    return [("", _("All nodes"))] + [(s.id, product_name(s.name)) for s in all_specs()]


def _model_choices() -> list[tuple[str, str]]:
    out = [
        (p["id"], f"{_(p['name'])}{punct(' (')}{forms.human_count(p['params'])}{punct(')')}")
        for p in _presets()
    ]
    out.append(("params", _("Other: enter a parameter count")))
    out.append(("arch", _("Other: enter the architecture")))
    return out


def _field_error(form: forms.SizeForm, name: str, err: str | Msg) -> str:
    if isinstance(err, Msg):  # the engine's message, a sentence beside the field, as the
        said = say(err)  # form's own are: a capital (English), a full stop
        return full_stop(said[:1].upper() + said[1:])
    text = _(err)
    params = form.error_params.get(name)
    return text % params if params else text


def _price_version(request: Request) -> Any:
    """The catalog's price version (one primary-key read), None without a catalog."""
    try:
        return price_version_now(request.app.state.engine)
    except Exception:  # an unmigrated catalog must not break sizing
        log.debug("no price version", exc_info=True)
        request.state.prices_unread = True
        return None


def _when(request: Request) -> When:
    """The stock snapshot (read at most once per interval), the customer's zone and day."""

    def unread() -> None:
        request.state.prices_unread = True  # an answer without dates is not kept either

    return when_for(request.app.state, tz_name(request), unread)


def _context(
    request: Request, form: forms.SizeForm, price_version: Any = None, when: When | None = None
) -> tuple[dict[str, Any], int]:
    """What the results (and the page around them) show, and the status: nothing per user.
    ``price_version``: the version already read (a fragment's key), else read here; ``when``:
    the stock, zone and day the finish dates count from (a fragment's key), else read here."""
    result: dict[str, Any] | None = None
    if form.ok and form.request is not None:
        when = when or _when(request)
        try:
            result = size(
                form.request,
                prices=_live_prices(request, price_version),
                delivery=when.delivery(),
                today=when.today,
            )
        except SizingError as e:
            for path, msg in e.codes:
                f = forms.engine_field(path, form)
                form.errors.setdefault(f, msg)
    specs = {s.id: s for s in all_specs()}
    cards: list[dict[str, Any]] = []
    rec: dict[str, Any] | None = None
    assumptions: list[str] = []
    warnings: list[str] = []
    if result is not None:
        cards = [card(o, result, form, specs.get(o["sku"])) for o in result["options"]]
        rec = recommendation(result, cards, form)
        assumptions = [say(a) for a in result.get("assumption_codes") or []]
        warnings = [say(w) for w in result.get("warning_codes") or []]
    errors = {k: _field_error(form, k, v) for k, v in form.errors.items()}
    ctx = {
        "form": form,
        "v": form.values,
        "errors": errors,
        "result": result,
        "cards": cards,
        "rec": rec,
        "assumptions": assumptions,
        "warnings": warnings,
        "segments": [(_(label), css) for _k, css, label in SEGMENTS],
        "share_url": "/size?" + form.query_string(),
        "launch_url": "/size/launch?" + urlencode({"q": form.query_string()}),
        "field_names": forms.FIELDS,
        "field_labels": {k: _(v).replace("%%", "%") for k, v in FIELD_LABELS.items()},
        # the stack asked for (an option that cannot run has no framework of its own)
        "accuracy": accuracy(str(form.request.get("framework") or "fsdp2"))
        if result and form.request is not None
        else None,
        "params_text": forms.human_count(float(result["params"])) if result else None,
        "active_text": forms.human_count(float(result["active_params"])) if result else None,
    }
    return ctx, 422 if errors else 200


@lru_cache(maxsize=1)
def empty_error_slots() -> Markup:
    """Every field's error slot, empty and out of band (what a fragment without field
    errors sends so that messages fixed since the last answer go away)."""
    return Markup(  # noqa: S704 - field names are fixed identifiers
        "".join(
            f'<div id="err-{name}" class="err-slot" hx-swap-oob="true"></div>\n'
            for name in forms.FIELDS
            if name != "tie_embeddings"
        )
    )


def _fragment(request: Request, form: forms.SizeForm, canonical: str) -> Fragment:
    """The htmx answer, from the per-process cache of rendered fragments when the same
    canonical query was answered in this language at this price version.

    Rendered from ``_context`` alone with the bare Jinja environment, not through
    ``render``: the page's base context (CSRF token, user, flashes) never reaches the
    cached bytes, so they are the same for every reader."""
    cache = fragment_cache_of(request.app.state)
    memo = price_version_memo_of(
        request.app.state, request.app.state.settings.fragment_price_max_age_ms
    )
    version = memo.get(lambda: _price_version(request))
    when = _when(request)
    key = (canonical, current_locale(), (version, when))
    hit = cache.get(key)
    if hit is not None:
        return hit
    ctx, status = _context(request, form, version, when)
    template = templates_of(request).env.get_template("configurator/_results_response.html")
    fragment = Fragment(
        status, template.render(ctx, empty_error_slots=empty_error_slots()).encode()
    )
    if not getattr(request.state, "prices_unread", False):
        # priced from the seed prices after a failed read (a database blip): that answer
        # only, never kept under the current price version for every reader
        cache.put(key, fragment)
    return fragment


@router.get("/size", response_class=HTMLResponse)
def size_page(request: Request) -> Response:
    form = forms.parse_query(request.query_params, _preset_ids())
    canonical = form.query_string()
    htmx = is_htmx(request)
    if htmx and request.headers.get("hx-history-restore-request") != "true":
        fragment = _fragment(request, form, canonical)
        gz = accepts_gzip(request.headers.get("accept-encoding"))
        # compressed once per cached fragment; the GZip middleware passes it through
        body = fragment.gzipped() if gz else fragment.body
        return HTMLResponse(body, fragment.status, headers=fragment_headers(canonical, gz))
    if not htmx and canonical and any(not v.strip() for v in request.query_params.values()):
        # A form sent without JavaScript carries every empty field; the address a customer
        # copies should be the short canonical one (issue 19, defect 10).
        return RedirectResponse("/size?" + canonical, status_code=303)
    ctx, status = _context(request, form)
    ctx["model_choices"] = _model_choices()
    ctx["sku_choices"] = _sku_choices()
    resp = render(request, "configurator/size.html", ctx, status_code=status)
    resp.headers["Vary"] = VARY
    return resp


def fragment_headers(canonical: str, gzipped: bool) -> dict[str, str]:
    """The fragment's own headers, the same from the route and from ``CachedFragments``
    (which adds what ``Compress`` adds to the route's answer: it sits outside it)."""
    # htmx would push the form's raw query (~30 empty fields); push the canonical one.
    headers = {"HX-Push-Url": "/size?" + canonical, "Vary": VARY}
    if gzipped:
        # compressed here already: Compress passes it through as it is
        headers["Content-Encoding"] = "gzip"
        headers["Vary"] = VARY + ", Accept-Encoding"
    return headers


# Raw query strings up to this long have their canonical query remembered (typing repeats
# them); a longer one is parsed each time, so the memo stays small whatever is sent.
CANONICAL_MEMO_MAX_QUERY = 1024


@lru_cache(maxsize=4096)
def _canonical_memo(raw: bytes) -> str:
    return _canonical(raw)


def _canonical(raw: bytes) -> str:
    """The canonical query of a raw query string (as ``size_page`` computes it)."""
    return forms.parse_query(QueryParams(raw), _preset_ids()).query_string()


class CachedFragments:
    """Pure ASGI, just inside ``AppMiddleware``: a live ``/size`` fragment that is already in
    the process's fragment cache is answered here, on the event loop, without the router,
    its dependencies or a worker thread (the route's answer, byte for byte, headers too;
    ``AppMiddleware`` still adds the request id, security headers, language, log and
    metrics). Anything else — a miss, a price version older than its interval (read by the
    route, in a thread: never on the event loop), a gzip answer not compressed yet, a
    request with a body — goes on to the route unchanged.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._route: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and scope["path"] == "/size":
            try:
                answer = self._cached(scope)
            except Exception:  # never an answer of its own: the route answers (or errs) as ever
                log.exception("early /size fragment lookup failed")
                answer = None
            if answer is not None:
                status, body, headers = answer
                scope["route"] = self._size_route()  # the metrics label, as routed
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)

    def _size_route(self) -> Any:
        if self._route is None:  # the route object the router would have put in the scope
            self._route = next(r for r in router.routes if getattr(r, "path", "") == "/size")
        return self._route

    def _cached(self, scope: Scope) -> tuple[int, bytes, list[tuple[bytes, bytes]]] | None:
        hx = boosted = restore = accept = body = cookie = None
        for k, v in scope["headers"]:  # the first of each, as Starlette's Headers.get
            if k == b"hx-request":
                hx = v if hx is None else hx
            elif k == b"hx-boosted":
                boosted = v if boosted is None else boosted
            elif k == b"hx-history-restore-request":
                restore = v if restore is None else restore
            elif k == b"accept-encoding":
                accept = v if accept is None else accept
            elif k == b"cookie":
                cookie = v if cookie is None else cookie
            elif k == b"transfer-encoding" or (k == b"content-length" and v != b"0"):
                body = True
        if hx != b"true" or boosted or restore == b"true" or body:
            return None  # the page, a history restore or a body: the route decides
        state = scope["app"].state
        cache = getattr(state, "size_fragments", None)
        memo = getattr(state, "price_version_memo", None)
        version = memo.fresh() if memo is not None else None
        stock_memo = getattr(state, "stock_memo", None)
        stock = stock_memo.fresh() if stock_memo is not None else None
        if cache is None or version is None or stock is None:
            return None
        tz = zone_name(cookie_parser(cookie.decode("latin-1")).get("tz") if cookie else None)
        when = early_when(state, stock, tz)
        if when is None:
            return None
        raw = scope["query_string"]
        canonical = (
            _canonical_memo(raw) if len(raw) <= CANONICAL_MEMO_MAX_QUERY else _canonical(raw)
        )
        fragment = cache.get((canonical, current_locale(), (version, when)), count_miss=False)
        if fragment is None:
            return None
        gz = accept is not None and accepts_gzip(accept.decode("latin-1"))
        if gz and fragment.compressed is None:
            return None  # compressed once, by the route in its thread
        body_bytes = fragment.compressed if gz else fragment.body
        assert body_bytes is not None
        headers = [(b"content-length", str(len(body_bytes)).encode())]
        headers.append((b"content-type", b"text/html; charset=utf-8"))
        own = fragment_headers(canonical, gz)
        if not gz and len(body_bytes) >= MINIMUM_SIZE:
            own["Vary"] += ", Accept-Encoding"  # what Compress adds to the route's answer
        headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in own.items()]
        return fragment.status, body_bytes, headers
