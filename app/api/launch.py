"""``POST /api/v1/sizing/launch``: one option of a sizing answer as launch files.

The body is ``{"request": <sizing request>, "option": N, "framework": F}`` (framework
optional: the launcher of the request's own ``framework``); the answer is the files with the
engine's predictions, the same bytes ``python -m app.sizing --launch`` prints. A bad request
is the sizing API's 422; an option that does not exist or has no layout, an unknown
framework, or a layout the framework cannot run is a 422 with the field, a code, the reason
and the frameworks that can.
"""

from __future__ import annotations

from typing import Any

import fastapi

from app.api.jsonbody import StrictJSONRoute, invalid_body
from app.configurator.launch_view import refusal_text
from app.sizing import SizingError
from app.sizing.launch import FRAMEWORKS, LaunchError, export_launch, launch_json, parse_body
from app.sizing.messages import translator
from app.sizing.request import json_schema
from app.web.i18n import negotiate

router = fastapi.APIRouter(route_class=StrictJSONRoute)

_FILE = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "content": {"type": "string"}},
    "required": ["name", "content"],
}
_SCHEMA = {
    "type": "object",
    "title": "LaunchRequest",
    "additionalProperties": False,
    "required": ["request", "option"],
    "properties": {
        "request": json_schema(),
        "option": {"type": "integer", "minimum": 0, "description": "index into options"},
        "framework": {
            "type": "string",
            "enum": list(FRAMEWORKS),
            "description": "default: the launcher of the request's framework",
        },
    },
}
_ANSWER = {
    "type": "object",
    "title": "LaunchFiles",
    "properties": {
        "framework": {"type": "string", "enum": list(FRAMEWORKS)},
        "framework_name": {"type": "string"},
        "framework_version": {"type": "string"},
        "answer_id": {"type": "string"},
        "option": {"type": "integer"},
        "sku": {"type": "string"},
        "nodes": {"type": "integer"},
        "gpus": {"type": "integer"},
        "predicted_memory_per_gpu_bytes": {"type": "integer"},
        "predicted_memory_range_bytes": {"type": "array", "items": {"type": "integer"}},
        "predicted_tokens_per_s_per_gpu": {"type": ["number", "null"]},
        "files": {"type": "array", "items": _FILE},
    },
}


@router.post(
    "/api/v1/sizing/launch",
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": _SCHEMA}}},
        "responses": {
            "200": {"content": {"application/json": {"schema": _ANSWER}}},
        },
    },
)
def post_sizing_launch(request: fastapi.Request, body: Any = fastapi.Body(...)) -> fastapi.Response:  # noqa: B008
    """The option's launch files; 422 names the field with a code (never a 500)."""
    try:
        req, option, framework = parse_body(body)
        bundle = export_launch(req, option, framework)
    except SizingError as e:
        lang = negotiate(request.cookies.get("lang"), request.headers.get("accept-language"))
        errors = e.as_dict(translator(lang))["errors"]
        for err in errors:
            err["field"] = f"request.{err['field']}"
        raise fastapi.HTTPException(status_code=422, detail=invalid_body(errors)) from e
    except LaunchError as e:
        # the sentence in the reader's language, as the launch page says it
        err = {**e.as_dict(), "message": refusal_text(e)}
        raise fastapi.HTTPException(status_code=422, detail=invalid_body([err])) from e
    return fastapi.Response(launch_json(bundle), media_type="application/json")
