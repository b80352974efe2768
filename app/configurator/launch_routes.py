"""``GET /size/launch``: one option of a /size answer as launch files, and its downloads.

The card's "Launch config" control is a plain GET form (works without JavaScript): the
answer's canonical query, the option's index and a framework. The page shows each file
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
from app.configurator import forms
from app.errors import N_, InvalidInput
from app.sizing import SizingError, list_presets
from app.sizing.launch import FRAMEWORKS, Bundle, LaunchError, export_launch
from app.web.i18n import gettext as _
from app.web.i18n import punct
from app.web.templating import format_number, render

router = APIRouter()
log = logging.getLogger(__name__)

LABELS = {
    "torchtitan": "torchtitan",
    "megatron": "Megatron-LM",
    "deepspeed": "DeepSpeed",
    "accelerate": "Hugging Face accelerate",
}


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
    if not raw.isdigit() or len(raw) > 5:
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


def refusal_text(e: LaunchError) -> str:
    """The refusal in the page's language (its parts too: "tensor parallel 8", ...)."""
    params = dict(e.params)
    if "kind_parts" in params:
        params["kinds"] = punct("list").join(_(t) % {"n": n} for t, n in params["kind_parts"])
    return _(e.template) % params if params else _(e.template)


def _link(query: str, option: int, framework: str) -> str:
    return "/size/launch?" + urlencode(
        [("q", query), ("option", str(option)), ("framework", framework)]
    )


@router.get("/size/launch", response_class=HTMLResponse)
def size_launch(request: Request) -> Response:
    query, option, fw, bundle, refused = _bundle(request)
    ctx: dict[str, Any] = {
        "query": query,
        "option": option,
        "frameworks": [(k, LABELS[k]) for k in FRAMEWORKS],
        "back_url": "/size?" + query,
        "bundle": None,
        "refusal": None,
    }
    if refused is not None:
        ctx["framework"] = fw or ""
        ctx["refusal"] = refusal_text(refused)
        ctx["can"] = [
            (LABELS[k], _link(query, option, k)) for k in refused.frameworks if k in LABELS
        ]
        return render(request, "configurator/launch.html", ctx, status_code=422)
    assert bundle is not None
    p = bundle.plan
    lo, hi = p.memory_range_bytes
    name, version, _r = FRAMEWORKS[bundle.framework]
    ctx.update(
        framework=bundle.framework,
        bundle=bundle,
        title=f"{name} {version}",
        option_text=f"{p.nodes} × {p.sku_name}",
        memory=_("%(gb)s GB per GPU (%(lo)s–%(hi)s GB)")
        % {
            "gb": format_number(p.memory_bytes / 1e9, 1),
            "lo": format_number(lo / 1e9, 1),
            "hi": format_number(hi / 1e9, 1),
        },
        tokens=format_number(p.tokens_per_s_per_gpu, 0) if p.tokens_per_s_per_gpu else None,
        files=[
            (
                i,
                f.name,
                f.content,
                "/size/launch/file?"
                + urlencode(
                    [
                        ("q", query),
                        ("option", str(option)),
                        ("framework", bundle.framework),
                        ("name", f.name),
                    ]
                ),
            )
            for i, f in enumerate(bundle.files)
        ],
    )
    return render(request, "configurator/launch.html", ctx)


@router.get("/size/launch/file")
def size_launch_file(request: Request) -> Response:
    """One file of the page, as a download."""
    _q, _o, _fw, bundle, refused = _bundle(request)
    if refused is not None or bundle is None:
        raise InvalidInput(N_("This layout has no launch files for that framework."))
    name = request.query_params.get("name", "")
    for f in bundle.files:
        if f.name == name:
            return Response(
                f.content.encode(),
                media_type="text/plain; charset=utf-8",
                headers={"Content-Disposition": f'attachment; filename="{f.name}"'},
            )
    raise InvalidInput(N_("There is no launch file of that name."))
