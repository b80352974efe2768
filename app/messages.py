"""Messages stored as codes with parameters, rendered in the READER's language.

A timeline event or notification keeps the English message id (``msgid``, the gettext key)
and its parameters as JSON; each page renders it in the language of whoever reads it
(customer, ops), and emails in the recipient's language. Parameters that depend on the
language are typed, so they are formatted at reading time too::

    {"id": 42, "estimate": {"t": "date", "v": "2026-12-09"},
     "amount": {"t": "money", "v": 1234500, "c": "USD"},
     "why": {"t": "msg", "v": "The lease was ended by operations."}}

Rows written before codes existed have no ``msgid``: their stored text is shown as is.
"""

from __future__ import annotations

import functools
import json
import logging
from datetime import date, datetime
from typing import Any

from babel.dates import format_date
from babel.numbers import format_decimal

from app import i18n
from app.money import format_cents

log = logging.getLogger("app.messages")

Param = str | int | float | dict[str, Any] | list[Any] | None


def day(d: date | datetime) -> dict[str, Any]:
    """A calendar date, formatted in the reader's language ("Dec 9, 2026" / "2026年12月9日")."""
    if isinstance(d, datetime):
        d = d.date()
    return {"t": "date", "v": d.isoformat()}


def format_day(d: date | datetime, locale: str | None = None) -> str:
    """One calendar date as every customer-visible date is shown: Babel's "medium" format of
    the reader's language ("Dec 9, 2026" / "2026年12月9日")."""
    return str(_value(day(d), locale or i18n.current_locale()))


def money(cents: int, currency: str = "USD") -> dict[str, Any]:
    return {"t": "money", "v": int(cents), "c": currency}


def msg(msgid: str, **params: Param) -> dict[str, Any]:
    """A translatable sentence used as a parameter of another (a reason, a status)."""
    return {"t": "msg", "v": msgid, "p": params} if params else {"t": "msg", "v": msgid}


def count(n: int) -> dict[str, Any]:
    """A number formatted with the reader's separators."""
    return {"t": "num", "v": int(n)}


def encode(params: dict[str, Param] | None) -> str:
    return json.dumps(params or {}, ensure_ascii=False, sort_keys=True, default=str)


def _decode(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@functools.lru_cache(maxsize=4096)
def _medium_date(iso: str, locale: str) -> str:
    """Babel's "medium" date in ``locale``: the same answer for the same day and language,
    so kept (a checkout formats its promised date four times; Babel parses the pattern each
    time)."""

    return str(format_date(date.fromisoformat(iso), "medium", locale=i18n.babel_locale(locale)))


def _value(v: Any, locale: str) -> Any:

    if isinstance(v, dict) and "t" in v:
        kind = v.get("t")
        if kind == "date":
            return _medium_date(str(v["v"]), locale)
        if kind == "money":
            return format_cents(int(v["v"]), locale, str(v.get("c") or "USD"))
        if kind == "msg":
            return render(str(v["v"]), v.get("p") or {}, locale=locale)
        if kind == "num":
            return format_decimal(int(v["v"]), locale=i18n.babel_locale(locale))
    if isinstance(v, list):
        sep = "、" if locale == "zh_CN" else ", "
        return sep.join(str(_value(x, locale)) for x in v)
    return v


def render(
    msgid: str,
    params: str | dict[str, Any] | None,
    *,
    locale: str | None = None,
    fallback: str = "",
) -> str:
    """The message in ``locale`` (default: the current request's), parameters formatted
    for it. A message id missing from the catalog shows in English; broken parameters fall
    back to the stored text rather than failing the page."""
    if not msgid:
        return fallback
    loc = locale or i18n.current_locale()
    text = i18n.translations_for(loc).gettext(msgid)
    values = _decode(params)
    if not values:
        return text
    try:
        return text.format(**{k: _value(v, loc) for k, v in values.items()})
    except (KeyError, IndexError, ValueError, TypeError):
        log.warning("message %r: parameters do not fit", msgid[:60])
        return fallback or text


def text_of(row: Any, locale: str | None = None) -> str:
    """An ``OrderEvent`` or ``Notification`` in the reader's language (old rows: as stored)."""
    return render(
        getattr(row, "msgid", "") or "",
        getattr(row, "params", "") or "",
        locale=locale,
        fallback=getattr(row, "message", "") or "",
    )
