"""Form models and their errors: one validation per input, messages next to the fields.

Handlers read a form as ``Annotated[SomeForm, Form()]`` (FastAPI parses the body before
the synchronous handler runs in the thread pool). ``field_errors`` turns a pydantic
``ValidationError`` (or the error list of FastAPI's ``RequestValidationError``) into one
message per field, as msgids translated where the locale is known.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from app.errors import N_, DomainError, InvalidInput
from app.i18n import gettext

# pydantic error type → our message (an msgid, translated at render time).
MESSAGES: dict[str, str] = {
    "missing": N_("This field is required."),
    "string_too_long": N_("This is too long."),
    "string_too_short": N_("This field is required."),
    "int_parsing": N_("Enter a whole number."),
    "int_type": N_("Enter a whole number."),
    "int_from_float": N_("Enter a whole number."),
    "greater_than_equal": N_("The number is too small."),
    "greater_than": N_("The number is too small."),
    "less_than_equal": N_("The number is too large."),
    "less_than": N_("The number is too large."),
    "date_from_datetime_parsing": N_("Enter a date (YYYY-MM-DD)."),
    "date_parsing": N_("Enter a date (YYYY-MM-DD)."),
    "date_type": N_("Enter a date (YYYY-MM-DD)."),
    "bool_parsing": N_("Choose yes or no."),
    "literal_error": N_("Choose one of the options."),
    "enum": N_("Choose one of the options."),
    "list_type": N_("Choose one of the options."),
}
FALLBACK = N_("Check this field.")
SKIP_LOC = ("body", "query", "path", "form", "header", "cookie")


class FormModel(BaseModel):
    """Base of HTML form models: unknown fields (the CSRF token) are ignored, text is trimmed."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=False)

    def values(self) -> dict[str, Any]:
        """What to echo back into the re-rendered form."""
        return self.model_dump()


def field_errors(
    errors: ValidationError | Iterable[Mapping[str, Any]],
    messages: Mapping[str, str] | None = None,
    *,
    rename: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The first error of each field as ``{field: msgid}``.

    A validator that raises ``ValueError(msgid)`` names its own message; otherwise the
    field's entry in ``messages`` (a model's ``FIELD_MESSAGES``), else the message for the
    pydantic error type. ``rename`` maps model field names onto the names the template
    shows errors under."""
    items = errors.errors() if isinstance(errors, ValidationError) else errors
    out: dict[str, str] = {}
    for e in items:
        loc = [str(p) for p in e.get("loc", ()) if p not in SKIP_LOC]
        name = loc[0] if loc else "form"
        name = (rename or {}).get(name, name)
        if name in out:
            continue
        cause = (e.get("ctx") or {}).get("error")
        if e.get("type") == "value_error" and isinstance(cause, ValueError) and cause.args:
            out[name] = str(cause.args[0])
        elif messages and name in messages:
            out[name] = messages[name]
        else:
            out[name] = MESSAGES.get(str(e.get("type", "")), FALLBACK)
    return out


def shown_errors(exc: DomainError) -> dict[str, str]:
    """A refused form's messages by field (the whole form's under ``"form"``), translated and
    their ``{params}`` filled in, ready for the page."""
    errs = dict(getattr(exc, "errors", None) or {}) or {"form": exc.message}
    return {
        k: gettext(v).format(**exc.params) if exc.params else gettext(v) for k, v in errs.items()
    }


class Outcome:
    """What ``refused`` caught: the fields' messages, or None when the work went through."""

    errors: dict[str, str] | None = None


@contextmanager
def refused(session: Any) -> Iterator[Outcome]:
    """A form's work (``with refused(session) as failed: ...``): on ``InvalidInput`` the
    request's transaction is rolled back and the messages kept in ``failed.errors``, for
    the handler to re-render its page with them (422) — every bad input changes nothing."""
    outcome = Outcome()
    try:
        yield outcome
    except InvalidInput as e:
        session.rollback()
        outcome.errors = e.errors or {"form": e.message}
