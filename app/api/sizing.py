"""``POST /api/v1/sizing`` and ``GET /api/v1/sizing/presets``: the sizing engine over HTTP.

The body is validated by the engine's one request model (``app.sizing.SizingRequest``),
whose schema the OpenAPI document shows; prose comes back in the request's language
(Accept-Language / the ``lang`` cookie), with codes beside every sentence.
"""

from __future__ import annotations

from typing import Any

import fastapi

from app.api.jsonbody import StrictJSONRoute, invalid_body
from app.configurator.delivery import when_for
from app.sizing import SizingError, list_presets, size
from app.sizing.messages import translator
from app.sizing.request import json_schema
from app.web.i18n import negotiate
from app.web.templating import tz_name

router = fastapi.APIRouter(route_class=StrictJSONRoute)

_SCHEMA = json_schema()


def _lang(request: fastapi.Request) -> str:
    return negotiate(request.cookies.get("lang"), request.headers.get("accept-language"))


@router.post(
    "/api/v1/sizing",
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": _SCHEMA}}}
    },
)
def post_sizing(request: fastapi.Request, body: Any = fastapi.Body(...)) -> dict[str, Any]:  # noqa: B008
    """Takes the JSON request, returns the engine's answer; 422 names each bad field."""
    lang = _lang(request)
    # finish dates: the promised delivery of each node count from today (as /size)
    when = when_for(request.app.state, tz_name(request))
    try:
        return size(body, lang=lang, delivery=when.delivery(), today=when.today)
    except SizingError as e:
        errors = e.as_dict(translator(lang))["errors"]
        raise fastapi.HTTPException(status_code=422, detail=invalid_body(errors)) from e


@router.get("/api/v1/sizing/presets")
def get_presets() -> list[dict[str, Any]]:
    return list_presets()
