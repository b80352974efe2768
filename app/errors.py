"""Domain errors with status codes, rendered in one place.

Raise these from services and pure modules (this module imports only the standard
library). ``app.web.errors.install_handlers`` renders them as a full page, an htmx
fragment, or JSON under ``/api/``. Messages are English msgids translated at render time
(mark them with ``N_`` so Babel extracts them); ``params`` fill ``{placeholders}``.
"""

from __future__ import annotations

from typing import Any


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
