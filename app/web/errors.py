"""The domain errors (``app.errors``) and the framework's own, rendered in one place: a
full page, an htmx fragment, or JSON under ``/api/``. ``create_app`` installs them."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DataError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.errors import (
    BUSY_MESSAGE,
    N_,
    RETRY_AFTER_S,
    DomainError,
    InvalidInput,
    NotAuthenticated,
    NotFound,
    api_field_error,
)
from app.web.forms import field_errors
from app.web.i18n import full_stop, gettext, labelled, punct
from app.web.templating import render_error

log = logging.getLogger("app")

# What a page's address names, as a reader calls it: "page: Enter a whole number." read as
# a programmer's note ("Page number: …" now). A name not listed here is shown as it is.
ADDRESS_LABELS = {
    "page": N_("Page number"),
    "order_id": N_("Order number"),
    "invoice_id": N_("Invoice number"),
    "quote_id": N_("Quote number"),
    "customer_id": N_("Customer number"),
    "user_id": N_("User number"),
    "batch_id": N_("Batch number"),
    "node_id": N_("Node number"),
    "task_id": N_("Request number"),
    "key_id": N_("Key number"),
    "token_id": N_("Token number"),
    "session_id": N_("Session number"),
    "request_id": N_("Request number"),
    "number": N_("Document number"),
    "lang": N_("Language"),
    "q": N_("Search"),
    "from_request": N_("Cluster request number"),
    "prospect_email": N_("Prospect's email"),
    "email": N_("Email"),
    "since": N_("From"),
    "until": N_("Until"),
    "action": N_("Action"),
    "actor": N_("Who"),
    "target": N_("Target"),
    "ip": N_("IP address"),
    "role": N_("Role"),
    "note": N_("Note"),
    "status": N_("Status"),
}


def _bounds_said(errors: Any, shown: dict[str, str]) -> dict[str, str]:
    """An address value out of range, with the range ("page=-1": "Enter at least 1.", not
    "The number is too small."), for the fields whose first error is a bound."""
    out: dict[str, str] = {}
    for e in errors:
        loc = [str(p) for p in e.get("loc", ()) if p not in ("query", "path")]
        name, ctx = (loc[0] if loc else ""), (e.get("ctx") or {})
        if name not in shown or name in out:
            continue
        if e.get("type") == "greater_than_equal" and isinstance(ctx.get("ge"), int):
            out[name] = gettext("Enter at least {min}.").format(min=ctx["ge"])
        elif e.get("type") == "less_than_equal" and isinstance(ctx.get("le"), int):
            out[name] = gettext("Enter at most {max}.").format(max=ctx["le"])
        else:
            out[name] = shown[name]
    return out


def _error_params(e: Any) -> dict[str, Any]:
    """The limits a client can act on (``ge``, ``le``, ``max_length``, …), JSON-safe only."""
    ctx = e.get("ctx") or {}
    return {
        k: v
        for k, v in ctx.items()
        if isinstance(v, (int, float, str)) and not isinstance(v, bool) and k != "error"
    }


def install_handlers(app: FastAPI) -> None:
    """Render every DomainError (and 404/500) in one place."""

    def wants_json(request: Request) -> bool:
        return (
            request.url.path.startswith("/api/")
            or "application/json" in request.headers.get("accept", "").split(",")[0]
        )

    async def domain_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, DomainError)
        message = exc.render_message(gettext)
        if wants_json(request):
            body: dict[str, Any] = {"error": {"code": exc.code, "message": message}}
            if exc.field:
                body["error"]["field"] = exc.field
            if isinstance(exc, InvalidInput) and exc.errors:
                body["error"]["fields"] = {k: gettext(v) for k, v in exc.errors.items()}
            body["error"].update(getattr(exc, "extra", None) or {})
            headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
            return JSONResponse(body, status_code=exc.status_code, headers=headers)
        if isinstance(exc, NotAuthenticated) and request.method == "GET":
            target = quote(
                request.url.path + (f"?{request.url.query}" if request.url.query else "")
            )
            url = f"/login?next={target}"
            if request.headers.get("hx-request"):
                return Response(status_code=204, headers={"HX-Redirect": url})
            return Response(status_code=303, headers={"Location": url})
        return render_error(request, exc.status_code, message, code=exc.code)

    def _plain_http_error(status: int, detail: str) -> tuple[str, str]:
        if status == 404:
            return "not_found", gettext(NotFound.default_message)
        if status == 405:
            return "method_not_allowed", gettext("That action is not allowed here.")
        return f"http_{status}", detail

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if wants_json(request):
            body: Any = exc.detail
            if not isinstance(body, dict):  # the router's own 404 / 405: the API's shape
                code, message = _plain_http_error(exc.status_code, str(body))
                body = {"code": code, "message": message}
            return JSONResponse(
                {"error": body},
                status_code=exc.status_code,
                headers=getattr(exc, "headers", None),
            )
        if exc.status_code == 404:
            return render_error(request, 404, gettext(NotFound.default_message), code="not_found")
        if exc.status_code == 405:
            return render_error(request, 405, gettext("That action is not allowed here."))
        return render_error(request, exc.status_code, str(exc.detail))

    async def validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if wants_json(request):
            errors = []
            for e in exc.errors():
                loc = [
                    str(p) for p in e.get("loc", ()) if p not in ("body", "query", "path", "form")
                ]
                code, msgid = api_field_error(e)
                errors.append(
                    {
                        "field": ".".join(loc) or "body",
                        "code": code,
                        "message": gettext(msgid),
                        "params": _error_params(e),
                    }
                )
            summary = gettext(InvalidInput.default_message)
            return JSONResponse(
                {"error": {"code": "invalid_input", "message": summary, "errors": errors}},
                status_code=422,
            )
        per_field = {name: gettext(msg) for name, msg in field_errors(exc.errors()).items()}
        per_field.update(_bounds_said(exc.errors(), per_field))
        # each field's message is a sentence ("This is too long.; Page number: …" read wrong)
        text = punct("sentences").join(
            full_stop(labelled(gettext(ADDRESS_LABELS.get(name, name)), msg))
            for name, msg in per_field.items()
        )
        return render_error(request, 422, text, code="invalid_input")

    async def server_error(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error", exc_info=exc)
        message = gettext("Something went wrong on our side. Nothing was charged; try again.")
        if wants_json(request):
            return JSONResponse({"error": {"code": "server_error", "message": message}}, 500)
        return render_error(request, 500, message, code="server_error")

    async def out_of_range(request: Request, exc: Exception) -> Response:
        # An id or number beyond what the database can store (SQLite raises OverflowError,
        # PostgreSQL a DataError): the input is wrong, not the server.
        message = gettext("A number in the request is out of range.")
        if wants_json(request):
            return JSONResponse({"error": {"code": "out_of_range", "message": message}}, 422)
        return render_error(request, 422, message, code="out_of_range")

    async def busy(request: Request, exc: Exception) -> Response:
        # The database is locked (SQLite), the pool is exhausted, or PostgreSQL gave up a
        # transaction (serialisation failure, deadlock, lock timeout): nothing committed,
        # and trying again shortly will work. A temporary state, never a 500.
        log.warning(
            "database busy (%s) on %s %s: %s",
            exc.__class__.__name__,
            request.method,
            request.url.path,
            str(exc).splitlines()[0][:200] if str(exc) else "",
        )
        message = gettext(BUSY_MESSAGE)
        headers = {"Retry-After": str(RETRY_AFTER_S)}
        if wants_json(request):
            return JSONResponse(
                {"error": {"code": "busy", "message": message}}, 503, headers=headers
            )
        response = render_error(request, 503, message, code="busy")
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response

    app.add_exception_handler(OperationalError, busy)
    app.add_exception_handler(PoolTimeout, busy)
    app.add_exception_handler(OverflowError, out_of_range)
    app.add_exception_handler(DataError, out_of_range)
    app.add_exception_handler(DomainError, domain_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Exception, server_error)
