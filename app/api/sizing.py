"""``POST /api/v1/sizing`` and ``GET /api/v1/sizing/presets``: the sizing engine over HTTP."""

from __future__ import annotations

from typing import Any

import fastapi

from app.sizing import SizingError, list_presets, size

router = fastapi.APIRouter()


@router.post("/api/v1/sizing")
def post_sizing(body: Any = fastapi.Body(...)) -> dict[str, Any]:  # noqa: B008
    """Takes the raw JSON request, returns the engine's answer; 422 names each bad field."""
    try:
        return size(body)
    except SizingError as e:
        raise fastapi.HTTPException(status_code=422, detail=e.as_dict()) from e


@router.get("/api/v1/sizing/presets")
def get_presets() -> list[dict[str, Any]]:
    return list_presets()
