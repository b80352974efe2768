"""Jinja2 setup: autoescape, gettext, locale-aware money and dates, CSRF token, user."""

from __future__ import annotations

import logging
from datetime import date, datetime
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import jinja2
from babel import Locale
from babel.dates import format_date as _babel_date
from babel.dates import format_datetime as _babel_datetime
from babel.numbers import NumberPattern, format_decimal, parse_pattern
from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup
from sqlalchemy import inspect as sa_inspect

from app import messages
from app.clock import utc
from app.money import format_cents
from app.sizing.messages import render as _render_msg
from app.web import i18n
from app.web.csrf import csrf_token, current_token
from app.web.flash import pop_flashes

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
STATIC_DIR = Path(__file__).resolve().parents[2] / "static"
HTMX_FILE = "vendor/htmx-2.0.8.min.js"


def N_(msgid: str) -> str:
    """Marks a msgid for extraction; translated where it is shown."""
    return msgid


# Product names that read differently in Chinese (the catalogue keeps the English name; the
# `product` filter shows the reader's): a rack is 机柜 in every Chinese sentence.
PRODUCT_NAMES = (N_("GB300 NVL72 rack"),)


def product_name(name: str | None) -> str:
    return i18n.gettext(name) if name else ""


def say(code: Any) -> str:
    """An engine sentence (``{"code", "params"}``) in the request's language."""
    return _render_msg(code, i18n.gettext) if code else ""


def words_lang(text: str) -> str:
    """The language free text was written in, as far as a page needs it: "zh-CN" when it
    has Chinese characters, else "en" (what ops write)."""
    return "zh-CN" if any("\u3400" <= ch <= "\u9fff" for ch in text) else "en"


def staff_words(text: str | None) -> Markup:
    """Free text an engineer wrote (a delay reason, a note on a request), shown as their own
    words: quoted, tagged with the language it was written in, and labelled, never dressed
    as a translated sentence (no "。" appended). Tests strip ``.staff-words`` before they
    look for English on Chinese pages."""
    if not text:
        return Markup("")
    label = i18n.gettext("in the engineer's words")
    return Markup(
        '<span class="staff-words" data-staff-words><q lang="{lang}">{text}</q> '
        '<small class="muted">{open}{label}{close}</small></span>'
    ).format(
        lang=words_lang(text),
        text=text,
        open=i18n.punct("("),
        label=label,
        close=i18n.punct(")"),
    )


def tz_name(request: Request | None) -> str:
    """The browser's IANA time zone from the ``tz`` cookie (static/tz.js, set on the first
    visit), "UTC" when absent or unknown. Older pages stored it URL-encoded
    (``Asia%2FShanghai``): decoded. One rule for every page, email and PDF."""
    raw = request.cookies.get(i18n.ZONE_COOKIE) if request is not None else None
    return i18n.known_zone(raw) or "UTC"


def zone_known(request: Request | None) -> bool:
    """Whether the reader's zone is known (else times are UTC and labelled so)."""
    raw = request.cookies.get(i18n.ZONE_COOKIE) if request is not None else None
    return bool(i18n.known_zone(raw))


def _tz(request: Request | None) -> ZoneInfo:
    return ZoneInfo(tz_name(request))


zone_label = i18n.zone_label


# Languages whose US-dollar amounts read "US$1,234.56" / "-US$1.50" (Babel's CLDR patterns
# through app.money.format_cents, checked in tests/web/test_number_format.py).
_PLAIN_USD = frozenset({"en", "zh_CN"})


@lru_cache(maxsize=4096)
def _money_text(cents: int, locale: str, currency: str) -> str:
    if currency == "USD" and locale in _PLAIN_USD:
        # the same text without Babel's pattern and locale lookups (~0.35 ms per amount)
        text = "US$" + format(Decimal(abs(cents)) / 100, ",.2f")
        return "-" + text if cents < 0 else text
    return format_cents(cents, locale, currency)  # pure: the same amount reads the same


def format_money(cents: int | None, currency: str = "USD") -> str:
    if cents is None:
        return "—"
    return _money_text(int(cents), i18n.current_locale(), currency)


def format_date(
    value: date | datetime | None, fmt: str = "medium", tz: ZoneInfo | None = None
) -> str:
    if value is None:
        return "—"
    if isinstance(value, datetime):
        value = utc(value).astimezone(tz or ZoneInfo("UTC")).date()
    return _babel_date(value, format=fmt, locale=i18n.babel_locale())


def format_datetime(value: datetime | None, fmt: str = "medium", tz: ZoneInfo | None = None) -> str:
    """A time in the reader's zone followed by the zone's label ("5:00 PM UTC+8"). Babel's
    long/full patterns carry a zone of their own ("+0800" inside the Chinese date), so they
    fall back to the medium one: the label is added once, here."""
    if value is None:
        return "—"
    if fmt in ("long", "full"):
        fmt = "medium"
    shown = _babel_datetime(
        utc(value), format=fmt, tzinfo=tz or ZoneInfo("UTC"), locale=i18n.babel_locale()
    )
    return f"{shown} {zone_label(tz, value)}"


def pdf_datetime_formatter(request: Request, locale: str) -> Any:
    """Dates for a document in ``locale`` (which may differ from the page's), in the
    reader's time zone and labelled with it ("2026年12月2日 14:20:54 UTC+8"): the same rule
    as the pages. Babel's "long" Chinese pattern puts the offset between the date and the
    time ("2026年12月2日 +0800 14:20:54"), so every format is the medium one plus the label."""
    zone = tz_name(request) if zone_known(request) else ""

    def fmt(value: datetime | None, fmt: str = "medium") -> str:
        if value is None:
            return "—"
        return messages.format_instant(value, locale, zone)

    return fmt


@lru_cache(maxsize=8)
def _locale(name: str) -> Locale:
    """Babel's locale data, parsed once per language (not once per number)."""
    return Locale.parse(name)


@lru_cache(maxsize=16)
def _number_pattern(digits: int) -> NumberPattern:
    return parse_pattern("#,##0" + ("." + "0" * digits if digits else ""))


@lru_cache(maxsize=8)
def _separators(name: str) -> tuple[str, str, str] | None:
    """(group, decimal, minus) of a locale when they are the ones Python's own ``,``/``.``
    formatting writes (English and Chinese), else None (Babel formats those)."""
    symbols = _locale(name).number_symbols.get("latn", {})
    seps = (symbols.get("group"), symbols.get("decimal"), symbols.get("minusSign"))
    return (",", ".", "-") if seps == (",", ".", "-") else None


def format_number(value: float | int | None, digits: int = 0) -> str:
    """Grouped, rounded half-even to ``digits`` decimals, with the reader's separators: the
    same text as Babel's ``format_decimal(value, "#,##0.0…")`` (but no "-0"), without parsing a pattern
    and looking up locale data on every call (a /size fragment formats ~150 numbers)."""
    if value is None:
        return "—"
    name = i18n.babel_locale()
    if _separators(name) is not None and type(value) in (int, float):
        text = _plain_number(value, digits)
        if text is not None:
            return text
    return _number_pattern(digits).apply(value, _locale(name))


@lru_cache(maxsize=8192, typed=True)
def _plain_number(value: float, digits: int) -> str | None:
    """``value`` with ``,`` and ``.`` (the English and Chinese separators), or None when it
    is not finite. Pure, so remembered: a first /size answer formats ~150 numbers, most of
    them (memory per GPU, usable memory) the same as the answer before it."""
    d = Decimal(str(value))
    if not d.is_finite():
        return None
    text = format(abs(d), f",.{digits}f")
    return "-" + text if d.is_signed() and text.strip("0.,") else text


def format_decimal_text(value: str | int | float | None) -> str:
    """An exact decimal (a crypto rate "96909.14") with the reader's separators, every
    digit kept: "96,909.14"."""
    if value is None or value == "":
        return "—"
    try:
        d = Decimal(str(value))
    except ArithmeticError:
        return str(value)
    return format_decimal(d, locale=i18n.babel_locale(), decimal_quantization=False)


def format_bytes(n: float | int | None, unit: str = "GB") -> str:
    """Decimal GB/TB (as the product page uses) or GiB when asked; always labelled."""
    if n is None:
        return "—"
    if unit == "GiB":
        return f"{format_number(n / 1024**3, 1)} GiB"
    if n >= 1e12:
        return f"{format_number(n / 1e12, 2)} TB"
    if n >= 1e8 or n == 0:
        return f"{format_number(n / 1e9, 1)} GB"
    if n >= 1e5:  # a small dataset or checkpoint: "40.0 MB", never "0.0 GB"
        return f"{format_number(n / 1e6, 1)} MB"
    return f"{format_number(n / 1e3, 1)} kB"


def static_url(name: str, /, **params: Any) -> str:
    """``url_for('static', path=...)`` as a site-relative path (not built from ``Host``)."""
    if name != "static":
        raise ValueError(f"only static URLs are built in templates, not {name!r}")
    return "/static/" + quote(str(params["path"]).lstrip("/"))


def make_templates(*, auto_reload: bool = True) -> Jinja2Templates:
    """The Jinja2 environment. ``auto_reload`` (development) stats every template file on
    every render to pick up edits; elsewhere templates are compiled once per process."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        extensions=["jinja2.ext.i18n"],
        auto_reload=auto_reload,
        cache_size=1000,
    )
    templates = Jinja2Templates(env=env)
    env.install_gettext_callables(i18n.gettext, i18n.ngettext, newstyle=True)  # type: ignore[attr-defined]
    env.globals.update(
        format_money=format_money,
        format_number=format_number,
        format_bytes=format_bytes,
        htmx_file=HTMX_FILE,
        locale_names=i18n.LOCALE_NAMES,
        current_locale=i18n.current_locale,
        punct=i18n.punct,
        current_csrf_token=current_token,
        msg_text=messages.text_of,
        # an instant's day in the reader's zone (or the one given), "(UTC)" when unknown
        reader_day=lambda v, zone=None: messages.format_day(utc(v), zone=zone) if v else "—",
        staff_words=staff_words,
        # Relative URLs: the Host header never decides where scripts and styles load from.
        url_for=static_url,
    )
    env.filters["money"] = format_money
    env.filters["number"] = format_number
    env.filters["bytes"] = format_bytes
    env.filters["say"] = say
    env.filters["product"] = product_name
    env.filters["decimal"] = format_decimal_text
    return templates


def templates_of(request: Request) -> Jinja2Templates:
    return request.app.state.templates  # type: ignore[no-any-return]


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true" and not request.headers.get("hx-boosted")


def base_context(request: Request) -> dict[str, Any]:

    tz = _tz(request)
    # Notifications and timeline sentences give an instant's day in the same zone as the page.
    i18n.set_zone(tz.key if zone_known(request) else "")
    user = getattr(request.state, "user", None)
    if user is None and not getattr(request.state, "user_loaded", False):
        # Set by create_app (app.accounts.deps.load_user): the web layer imports no domain.
        loader = getattr(request.app.state, "user_loader", None)
        user = loader(request) if loader is not None else None
    return {
        "request": request,
        "user": user,
        "csrf_token": csrf_token(request),
        "flashes": pop_flashes(request),
        "locale": i18n.current_locale(),
        "simulation": request.app.state.settings.simulation,
        "fmt_date": lambda v, f="medium": format_date(v, f, tz),
        "fmt_datetime": lambda v, f="medium": format_datetime(v, f, tz),
        "tz_name": tz.key,
        "tz_known": zone_known(request),
        # A first visit (no zone cookie yet): static/tz.js sets it and, on a plain GET page,
        # loads the page once more so its times are in the reader's zone.
        "tz_reload": request.method == "GET" and not request.cookies.get(i18n.ZONE_COOKIE),
        "tz_label": zone_label(tz, request.app.state.clock.now()),
        "now": request.app.state.clock.now(),
    }


def render(
    request: Request,
    template: str,
    context: dict[str, Any] | None = None,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    ctx = base_context(request)
    if context:
        ctx.update(context)
    return templates_of(request).TemplateResponse(
        request, template, ctx, status_code=status_code, headers=headers
    )


def render_error(
    request: Request, status_code: int, message: str, code: str = "error"
) -> HTMLResponse:
    template = "_error_fragment.html" if is_htmx(request) else "error.html"
    headers = {}
    if is_htmx(request):
        # Show the message in the page's error region rather than replacing the target.
        headers = {"HX-Retarget": "#flash-region", "HX-Reswap": "innerHTML"}
    _reload_user_if_detached(request)
    context = {"status_code": status_code, "message": message, "code": code}
    try:
        return render(request, template, context, status_code=status_code, headers=headers)
    except Exception:  # noqa: BLE001 - the error page itself must never fail
        logging.getLogger("app.errors").exception("error page failed; rendering it anonymously")
    # Last resort: the same page as an anonymous visitor would get it.
    request.state.user, request.state.user_loaded = None, True
    try:
        return render(request, template, context, status_code=status_code, headers=headers)
    except Exception:  # noqa: BLE001
        return HTMLResponse(f"<h1>{status_code}</h1>", status_code=status_code)


def _reload_user_if_detached(request: Request) -> None:
    """The user a dependency loaded lives in the request's session, which the failed
    request rolled back and closed before its error is rendered: reading ``user.email``
    then fails. Load the same user again in a fresh session (by its identity)."""

    user = getattr(request.state, "user", None)
    if user is None:
        return
    state = sa_inspect(user)
    if not (state.detached or state.expired):
        return
    request.state.user, request.state.user_loaded = None, False
    loader = getattr(request.app.state, "user_loader", None)
    if loader is not None:
        loader(request)
