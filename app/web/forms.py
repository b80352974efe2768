"""One helper for form and API validation errors: pydantic ``ValidationError`` → one
message per field (an msgid, translated where the locale is known)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from app.errors import N_

FALLBACK = N_("Check this field.")


def field_errors(exc: ValidationError, messages: Mapping[str, str] | None = None) -> dict[str, str]:
    """The first error of each field as ``{field: msgid}``.

    A validator that raises ``ValueError(msgid)`` names its own message; otherwise the
    field's entry in ``messages`` (the model's ``FIELD_MESSAGES``) is used."""
    out: dict[str, str] = {}
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "form")]
        name = loc[0] if loc else "__root__"
        if name in out:
            continue
        cause = (err.get("ctx") or {}).get("error")
        if err.get("type") == "value_error" and isinstance(cause, ValueError) and cause.args:
            out[name] = str(cause.args[0])
        else:
            out[name] = (messages or {}).get(name, FALLBACK)
    return out
