"""Domain errors with status codes, rendered in one place.

Raise these from services and pure modules (this module imports only the standard
library at import time). ``install_handlers`` renders them as a full page, an htmx
fragment, or JSON under ``/api/``. Messages are English msgids translated at render time
(mark them with ``N_`` so Babel extracts them); ``params`` fill ``{placeholders}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from fastapi import FastAPI


def N_(msgid: str) -> str:
    """Mark a string for extraction; it is translated later, where the locale is known."""
    return msgid


class DomainError(Exception):
    status_code = 400
    code = "bad_request"
    default_message = N_("The request could not be completed.")

    def __init__(self, message: str | None = None, *, field: str | None = None, **params: Any):
        self.message = message or self.default_message
        self.field = field
        self.params = params
        super().__init__(self.render_message(lambda s: s))

    def render_message(self, gettext: Any) -> str:
        text = gettext(self.message)
        try:
            return str(text.format(**self.params)) if self.params else str(text)
        except (KeyError, IndexError, ValueError):
            return str(text)


class InvalidInput(DomainError):
    status_code = 422
    code = "invalid_input"
    default_message = N_("Some fields need attention.")

    def __init__(
        self,
        message: str | None = None,
        *,
        field: str | None = None,
        errors: dict[str, str] | None = None,
        **params: Any,
    ):
        super().__init__(message, field=field, **params)
        self.errors = errors or ({field: self.message} if field else {})


class NotAuthenticated(DomainError):
    status_code = 401
    code = "not_authenticated"
    default_message = N_("Please log in to continue.")


class Forbidden(DomainError):
    status_code = 403
    code = "forbidden"
    default_message = N_("You do not have access to this page.")


class NotFound(DomainError):
    status_code = 404
    code = "not_found"
    default_message = N_("We could not find that page.")


class Conflict(DomainError):
    status_code = 409
    code = "conflict"
    default_message = N_("That action conflicts with the current state. Reload and try again.")


class InsufficientBalance(DomainError):
    status_code = 402
    code = "insufficient_balance"
    default_message = N_("Your balance is too low for this payment.")


class TooManyRequests(DomainError):
    status_code = 429
    code = "too_many_requests"
    default_message = N_("Too many attempts. Wait a few minutes and try again.")


# "Database is locked", pool exhaustion, serialisation failures: 503 with Retry-After.
RETRY_AFTER_S = 2
BUSY_MESSAGE = N_("We are busy right now and nothing was changed. Try again in a few seconds.")


# A JSON API field error: pydantic's error type → (code, msgid). The code is what a client
# matches on; the message is for people, in the request's language.
API_FIELD_ERRORS: dict[str, tuple[str, str]] = {
    "missing": ("request.required", N_("This field is required.")),
    "string_too_short": ("request.required", N_("This field is required.")),
    "int_type": ("request.not_whole", N_("Enter a whole number.")),
    "int_parsing": ("request.not_whole", N_("Enter a whole number.")),
    "int_from_float": ("request.not_whole", N_("Enter a whole number.")),
    "int_parsing_size": ("request.too_large", N_("The number is too large.")),
    "float_type": ("request.not_number", N_("Enter a number.")),
    "float_parsing": ("request.not_number", N_("Enter a number.")),
    "finite_number": ("request.not_number", N_("Enter a number.")),
    "greater_than_equal": ("request.too_small", N_("The number is too small.")),
    "greater_than": ("request.too_small", N_("The number is too small.")),
    "less_than_equal": ("request.too_large", N_("The number is too large.")),
    "less_than": ("request.too_large", N_("The number is too large.")),
    "string_too_long": ("request.too_long", N_("This is too long.")),
    "too_long": ("request.too_many", N_("Send fewer items in this list.")),
    "string_type": ("request.not_text", N_("Send text (a JSON string) here.")),
    "bool_type": ("request.not_bool", N_("Send true or false here.")),
    "bool_parsing": ("request.not_bool", N_("Send true or false here.")),
    "list_type": ("request.not_list", N_("Send a list (a JSON array) here.")),
    "model_type": ("request.not_object", N_("Send an object here.")),
    "model_attributes_type": ("request.not_object", N_("Send an object here.")),
    "dict_type": ("request.not_object", N_("Send an object here.")),
    "literal_error": ("request.choice", N_("Choose one of the options.")),
    "enum": ("request.choice", N_("Choose one of the options.")),
    "json_invalid": ("request.not_json", N_("The body is not valid JSON.")),
}
STRING_NOT_NUMBER = (
    "request.string_not_number",
    N_("Send a JSON number here, not text in quotes."),
)


def api_field_error(e: Any) -> tuple[str, str]:
    """(code, msgid) of one pydantic error, as the JSON API reports it."""
    t = str(e.get("type", ""))
    if t in ("int_type", "float_type") and isinstance(e.get("input"), str):
        return STRING_NOT_NUMBER  # a strict number field given "2": text, not a bad number
    return API_FIELD_ERRORS.get(t, ("request.invalid", N_("Check this field.")))


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
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from starlette.exceptions import HTTPException as StarletteHTTPException

    from app.web.i18n import gettext, labelled, punct
    from app.web.templating import render_error

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
            from urllib.parse import quote

            target = quote(
                request.url.path + (f"?{request.url.query}" if request.url.query else "")
            )
            url = f"/login?next={target}"
            if request.headers.get("hx-request"):
                return Response(status_code=204, headers={"HX-Redirect": url})
            return Response(status_code=303, headers={"Location": url})
        return render_error(request, exc.status_code, message, code=exc.code)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if wants_json(request):
            detail = exc.detail
            return JSONResponse(
                {"error": detail} if isinstance(detail, dict) else {"error": {"message": detail}},
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
        from app.web.forms import field_errors

        per_field = field_errors(exc.errors())
        text = punct("; ").join(labelled(name, gettext(msg)) for name, msg in per_field.items())
        return render_error(request, 422, text, code="invalid_input")

    async def server_error(request: Request, exc: Exception) -> Response:
        import logging

        logging.getLogger("app").exception("unhandled error", exc_info=exc)
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
        import logging

        logging.getLogger("app").warning(
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

    from sqlalchemy.exc import DataError, OperationalError
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    app.add_exception_handler(OperationalError, busy)
    app.add_exception_handler(PoolTimeout, busy)
    app.add_exception_handler(OverflowError, out_of_range)
    app.add_exception_handler(DataError, out_of_range)
    app.add_exception_handler(DomainError, domain_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Exception, server_error)
