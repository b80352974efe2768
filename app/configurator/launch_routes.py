"""``GET /size/launch``: one option of a /size answer as launch files, and its downloads.

The card's "Launch config" is a plain link (works without JavaScript): the answer's
canonical query and the option's index; the framework defaults to the one the request was
sized for, and the page's own form switches it. The page shows each file
(preview, copy, download); a layout the framework cannot run shows why, in the reader's
language, with links to the frameworks that can. Nothing per user: public, like /size.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import QueryParams

from app.catalog.service import price_cache_of
from app.configurator import forms, launch_view
from app.errors import N_, InvalidInput
from app.sizing import SizingError, list_presets
from app.sizing.launch import Bundle, LaunchError, export_launch
from app.web.i18n import gettext as _
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute, include_in_schema=False)
log = logging.getLogger(__name__)


def _prices(request: Request) -> dict[str, int] | None:
    """The list prices the /size card was priced at (the option index refers to its answer)."""
    try:
        cache = price_cache_of(request.app.state)
        return dict(cache.get(request.app.state.engine)) or None
    except Exception:  # an unmigrated catalog must not break sizing
        log.debug("no live prices", exc_info=True)
        return None


def _inputs(request: Request) -> tuple[str, dict[str, Any], int, str | None]:
    """(canonical query, sizing request, option, framework) from the query string."""
    qp = request.query_params
    form = forms.parse_query(
        QueryParams(qp.get("q", "")), frozenset(p["id"] for p in list_presets())
    )
    if not form.ok or form.request is None:
        raise InvalidInput(
            N_("These sizing inputs need a look first: open them on the sizing page.")
        )
    raw = qp.get("option", "0")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 5:  # not "٣" or "２" either
        raise InvalidInput(N_("There is no such option in this answer."))
    fw = qp.get("framework") or None
    return form.query_string(), form.request, int(raw), fw


def _bundle(request: Request) -> tuple[str, int, str | None, Bundle | None, LaunchError | None]:
    query, req, option, fw = _inputs(request)
    try:
        return query, option, fw, export_launch(req, option, fw, prices=_prices(request)), None
    except LaunchError as e:
        return query, option, fw, None, e
    except SizingError as e:
        raise InvalidInput(
            N_("These sizing inputs need a look first: open them on the sizing page.")
        ) from e


def _link(query: str, option: int, framework: str, name: str | None = None) -> str:
    q = [("q", query), ("option", str(option)), ("framework", framework)]
    if name is None:
        return "/size/launch?" + urlencode(q)
    return "/size/launch/file?" + urlencode([*q, ("name", name)])


@router.get("/size/launch", response_class=HTMLResponse)
def size_launch(request: Request) -> Response:
    query, option, fw, bundle, refused = _bundle(request)
    ctx = launch_view.page_context(
        bundle,
        refused,
        fw,
        page_url=lambda f: _link(query, option, f),
        file_url=lambda f, name: _link(query, option, f, name),
    )
    ctx.update(
        form_action="/size/launch",
        hidden=[("q", query), ("option", str(option))],
        back_url="/size?" + query,
        back_text=_("Back to the sizing results"),
    )
    return render(request, "configurator/launch.html", ctx, status_code=422 if refused else 200)


@router.get("/size/launch/file")
def size_launch_file(request: Request) -> Response:
    """One file of the page, as a download."""
    _q, _o, _fw, bundle, refused = _bundle(request)
    return launch_view.file_response(bundle, refused, request.query_params.get("name", ""))
