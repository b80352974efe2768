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
from datetime import UTC, date, datetime
from typing import Any

from babel.dates import format_date, format_datetime
from babel.numbers import format_decimal

from app import i18n
from app.money import format_cents

log = logging.getLogger("app.messages")

Param = str | int | float | dict[str, Any] | list[Any] | None


def day(d: date | datetime) -> dict[str, Any]:
    """A calendar date, formatted in the reader's language ("Dec 9, 2026" / "2026年12月9日").

    Given an instant (an aware ``datetime``: a lease's period end, a grace deadline) the day
    is the one of the READER's time zone, chosen when read: the console (UTC+8) and the
    email both say Jan 2 for a period ending 2027-01-01 18:00 UTC. In an unknown zone the
    date is the UTC one and says so ("Jan 1, 2027 (UTC)")."""
    if isinstance(d, datetime):
        if d.tzinfo is None:
            return {"t": "date", "v": d.date().isoformat()}
        return {"t": "date", "v": d.date().isoformat(), "at": d.isoformat()}
    return {"t": "date", "v": d.isoformat()}


def format_day(d: date | datetime, locale: str | None = None, zone: str | None = None) -> str:
    """One calendar date as every customer-visible date is shown: Babel's "medium" format of
    the reader's language ("Dec 9, 2026" / "2026年12月9日"); an instant's day is the one of
    ``zone`` (default: the reader's), labelled "(UTC)" when no zone is known."""
    return str(_value(day(d), locale or i18n.current_locale(), zone))


def format_instant(at: datetime, locale: str | None = None, zone: str | None = None) -> str:
    """Date and time of an instant as every page, email and PDF shows one: in the reader's
    zone (default: the request's, ``i18n.current_zone``; unknown: UTC) and labelled with it
    ("Dec 2, 2026, 2:20:54 PM UTC+8" / "2026年12月2日 14:20:54 UTC+8")."""

    loc = locale or i18n.current_locale()
    tz = i18n.zone_info(zone if zone is not None else i18n.current_zone())
    moment = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    shown = format_datetime(moment, "medium", tzinfo=tz, locale=i18n.babel_locale(loc))
    return f"{shown} {i18n.zone_label(tz, moment)}"


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


def _instant_day(at: str, locale: str, zone: str | None) -> str | None:
    """The day of instant ``at`` (ISO) in the reader's ``zone``; labelled "(UTC)" when the
    zone is unknown. None when ``at`` is not an instant."""
    try:
        instant = datetime.fromisoformat(at)
    except ValueError:
        return None
    if instant.tzinfo is None:
        return None
    name = i18n.known_zone(zone if zone is not None else i18n.current_zone())
    shown = _medium_date(instant.astimezone(i18n.zone_info(name)).date().isoformat(), locale)
    if name:
        return shown
    return shown + i18n.punct(" (", locale) + "UTC" + i18n.punct(")", locale)


def _value(v: Any, locale: str, zone: str | None = None) -> Any:
    if isinstance(v, dict) and "t" in v:
        kind = v.get("t")
        if kind == "date":
            if isinstance(v.get("at"), str):
                shown = _instant_day(v["at"], locale, zone)
                if shown is not None:
                    return shown
            return _medium_date(str(v["v"]), locale)
        if kind == "money":
            return format_cents(int(v["v"]), locale, str(v.get("c") or "USD"))
        if kind == "msg":
            return render(str(v["v"]), v.get("p") or {}, locale=locale, zone=zone)
        if kind == "num":
            return format_decimal(int(v["v"]), locale=i18n.babel_locale(locale))
    if isinstance(v, list):
        sep = "、" if locale == "zh_CN" else ", "
        return sep.join(str(_value(x, locale, zone)) for x in v)
    return v


def render(
    msgid: str,
    params: str | dict[str, Any] | None,
    *,
    locale: str | None = None,
    fallback: str = "",
    zone: str | None = None,
) -> str:
    """The message in ``locale`` (default: the current request's), parameters formatted
    for it (dates of instants in ``zone``, default: the reader's, ``i18n.current_zone``).
    A message id missing from the catalog shows in English; broken parameters fall back to
    the stored text rather than failing the page."""
    if not msgid:
        return fallback
    loc = locale or i18n.current_locale()
    text = i18n.translations_for(loc).gettext(msgid)
    values = _decode(params)
    if not values:
        return text
    try:
        return text.format(**{k: _value(v, loc, zone) for k, v in values.items()})
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
