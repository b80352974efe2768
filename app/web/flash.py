"""One-shot messages carried across a redirect in a signed cookie."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeSerializer

COOKIE = "flash"


def _signer(request: Request) -> URLSafeSerializer:
    return URLSafeSerializer(request.app.state.settings.secret_key, salt="flash")


def flash(request: Request, message: str, category: str = "info") -> None:
    """Queue a message; it is written to the response by the middleware."""
    pending: list[dict[str, str]] = getattr(request.state, "flash_out", [])
    pending.append({"m": message, "c": category})
    request.state.flash_out = pending


def pop_flashes(request: Request) -> list[dict[str, str]]:
    if getattr(request.state, "flash_popped", None) is not None:
        return request.state.flash_popped  # type: ignore[no-any-return]
    raw = request.cookies.get(COOKIE)
    items: list[dict[str, str]] = []
    if raw:
        try:
            items = json.loads(_signer(request).loads(raw))
        except (BadSignature, ValueError, TypeError):
            items = []
    items += getattr(request.state, "flash_out", [])
    request.state.flash_out = []
    request.state.flash_popped = items
    return items


def apply(request: Request, response: Response) -> None:
    out: list[dict[str, Any]] = getattr(request.state, "flash_out", [])
    if out:
        response.set_cookie(
            COOKIE,
            _signer(request).dumps(json.dumps(out)),
            httponly=True,
            samesite="lax",
            secure=request.app.state.settings.secure_cookies,
        )
    elif getattr(request.state, "flash_popped", None) is not None and request.cookies.get(COOKIE):
        response.delete_cookie(COOKIE)
