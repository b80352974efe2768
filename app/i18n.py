"""English and Simplified Chinese through gettext (Babel catalogs). No framework: services,
pure code and the web layer translate alike (``app.web.i18n`` re-exports this module).

Translations live in ``translations/zh_CN/*.po`` — one file per domain, so people can
work on different parts without editing the same file. ``python -m app i18n compile``
merges them into ``app/locale/zh_CN/LC_MESSAGES/messages.mo``. The locale of a request
comes from the ``lang`` cookie, then Accept-Language, then the default; it lives in a
context variable so services, templates and error handlers all translate alike.
"""

from __future__ import annotations

import gettext as _gettext
from contextvars import ContextVar
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote
from zoneinfo import ZoneInfo

from babel.support import NullTranslations, Translations

LOCALES = ("en", "zh_CN")
LOCALE_NAMES = {"en": "English", "zh_CN": "简体中文"}
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
TRANSLATIONS_SRC = Path(__file__).resolve().parents[1] / "translations"
COOKIE = "lang"

_current_locale: ContextVar[str] = ContextVar("locale", default="en")
# The reader's IANA time zone ("" = unknown: times are shown in UTC and labelled so).
_current_zone: ContextVar[str] = ContextVar("zone", default="")
ZONE_COOKIE = "tz"


@lru_cache(maxsize=8)
def translations_for(locale: str) -> _gettext.NullTranslations:
    if locale == "en":
        return NullTranslations()
    t = Translations.load(str(LOCALE_DIR), [locale], domain="messages")
    return t


def set_locale(locale: str) -> None:
    _current_locale.set(locale if locale in LOCALES else "en")


def current_locale() -> str:
    return _current_locale.get()


def known_zone(raw: str | None) -> str:
    """``raw`` as an IANA zone name ("Asia/Shanghai"), or "" when it is none we know. The
    ``tz`` cookie is set by static/tz.js; older pages stored it URL-encoded."""
    name = unquote(raw or "").strip().strip('"')
    if not name or len(name) > 64:
        return ""
    try:
        return ZoneInfo(name).key
    except (KeyError, ValueError, OSError):
        return ""


def set_zone(name: str | None) -> None:
    """The reader's time zone for what this request (or email) shows."""
    _current_zone.set(known_zone(name))


def current_zone() -> str:
    """The reader's zone name, "" when unknown (then UTC, labelled)."""
    return _current_zone.get()


def zone_info(name: str | None = None) -> ZoneInfo:
    return ZoneInfo(known_zone(name if name is not None else current_zone()) or "UTC")


def gettext(message: str) -> str:
    return translations_for(current_locale()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    return translations_for(current_locale()).ngettext(singular, plural, n)


_ = gettext


def negotiate(cookie: str | None, accept_language: str | None, default: str = "en") -> str:
    """Cookie first, then the best Accept-Language match, then the default."""
    if cookie in LOCALES:
        return cookie  # type: ignore[return-value]
    if accept_language:
        weighted: list[tuple[float, str]] = []
        for part in accept_language.split(","):
            bits = part.strip().split(";")
            tag = bits[0].strip().lower()
            q = 1.0
            for b in bits[1:]:
                if b.strip().startswith("q="):
                    try:
                        q = float(b.strip()[2:])
                    except ValueError:
                        q = 0.0
            if q > 0:  # q=0: "not acceptable" (RFC 9110 §12.4.2), never a match
                weighted.append((q, tag))
        for _q, tag in sorted(weighted, key=lambda t: -t[0]):
            if tag.startswith("zh"):
                # Simplified Chinese is what we offer; Hant speakers still read it better
                # than English in most cases, but respect an explicit English preference.
                return "zh_CN"
            if tag.startswith("en"):
                return "en"
    return default if default in LOCALES else "en"


# Punctuation written between translated pieces (a label and its value, a note in
# parentheses): Chinese text takes the full-width marks, which carry their own spacing.
_FULL_WIDTH = {
    ": ": "：",
    ", ": "，",
    "; ": "；",
    " (": "（",
    "(": "（",
    ")": "）",
    "list": "、",
    # between a label that ends in a colon ("Reason:" / "原因：") and its value
    "after_colon": "",
    # between two sentences ("Page number: … . Search: … ." / "页码：…。搜索：…。")
    "sentences": "",
}
_ENGLISH = {"list": ", ", "after_colon": " ", "sentences": " "}


def punct(mark: str, locale: str | None = None) -> str:
    """``mark`` as the reader's language writes it: ``punct(": ")`` is ": " in English and
    "：" in Chinese; ``punct("list")`` joins the items of a list (", " or "、")."""
    if (locale or current_locale()) == "zh_CN":
        return _FULL_WIDTH[mark]
    return _ENGLISH.get(mark, mark)


def full_stop(text: str, locale: str | None = None) -> str:
    """``text`` ending as a sentence in the reader's language: "." in English, "。" in
    Chinese, unless it already ends with a stop, question or exclamation mark."""
    text = text.rstrip()
    if not text or text[-1] in ".!?。！？":
        return text
    return text + ("。" if (locale or current_locale()) == "zh_CN" else ".")


def labelled(label: str, value: object, locale: str | None = None) -> str:
    """ "Label: value" in English, "标签：值" in Chinese."""
    return f"{label}{punct(': ', locale)}{value}"


def babel_locale(locale: str | None = None) -> str:
    loc = locale or current_locale()
    return "zh_Hans_CN" if loc == "zh_CN" else "en_US"


def zone_label(zone: ZoneInfo | None, at: datetime | None = None) -> str:
    """A short, language-neutral label of the zone a time is shown in: "UTC", "UTC+8",
    "UTC-5:30" (the offset at that moment, so summer time is right)."""
    moment = at if at is not None else datetime(2000, 1, 1, tzinfo=UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    offset = moment.astimezone(zone or ZoneInfo("UTC")).utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset else 0
    if minutes == 0:
        return "UTC"
    sign = "+" if minutes > 0 else "-"
    h, m = divmod(abs(minutes), 60)
    return f"UTC{sign}{h}" + (f":{m:02d}" if m else "")
