"""Jinja2 setup: autoescape, gettext, locale-aware money and dates, CSRF token, user."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import jinja2
from babel.dates import format_date as _babel_date
from babel.dates import format_datetime as _babel_datetime
from babel.numbers import format_decimal
from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app.clock import utc
from app.money import format_cents
from app.web import i18n
from app.web.csrf import current_token

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
STATIC_DIR = Path(__file__).resolve().parents[2] / "static"
HTMX_FILE = "vendor/htmx-2.0.8.min.js"


def _tz(request: Request | None) -> ZoneInfo:
    name = request.cookies.get("tz") if request is not None else None
    try:
        return ZoneInfo(name) if name else ZoneInfo("UTC")
    except (KeyError, ValueError):
        return ZoneInfo("UTC")


def format_money(cents: int | None, currency: str = "USD") -> str:
    if cents is None:
        return "—"
    return format_cents(int(cents), i18n.current_locale(), currency)


def format_date(
    value: date | datetime | None, fmt: str = "medium", tz: ZoneInfo | None = None
) -> str:
    if value is None:
        return "—"
    if isinstance(value, datetime):
        value = utc(value).astimezone(tz or ZoneInfo("UTC")).date()
    return _babel_date(value, format=fmt, locale=i18n.babel_locale())


def format_datetime(value: datetime | None, fmt: str = "medium", tz: ZoneInfo | None = None) -> str:
    if value is None:
        return "—"
    return _babel_datetime(
        utc(value), format=fmt, tzinfo=tz or ZoneInfo("UTC"), locale=i18n.babel_locale()
    )


def format_number(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    fmt = "#,##0" + ("." + "0" * digits if digits else "")
    return format_decimal(value, format=fmt, locale=i18n.babel_locale())


def format_bytes(n: float | int | None, unit: str = "GB") -> str:
    """Decimal GB/TB (as the product page uses) or GiB when asked; always labelled."""
    if n is None:
        return "—"
    if unit == "GiB":
        return f"{format_number(n / 1024**3, 1)} GiB"
    if n >= 1e12:
        return f"{format_number(n / 1e12, 2)} TB"
    return f"{format_number(n / 1e9, 1)} GB"


def static_url(name: str, /, **params: Any) -> str:
    """``url_for('static', path=...)`` as a site-relative path (not built from ``Host``)."""
    if name != "static":
        raise ValueError(f"only static URLs are built in templates, not {name!r}")
    return "/static/" + quote(str(params["path"]).lstrip("/"))


def make_templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        extensions=["jinja2.ext.i18n"],
        auto_reload=True,
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
        current_csrf_token=current_token,
        # Relative URLs: the Host header never decides where scripts and styles load from.
        url_for=static_url,
    )
    env.filters["money"] = format_money
    env.filters["number"] = format_number
    env.filters["bytes"] = format_bytes
    return templates


def templates_of(request: Request) -> Jinja2Templates:
    return request.app.state.templates  # type: ignore[no-any-return]


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true" and not request.headers.get("hx-boosted")


def base_context(request: Request) -> dict[str, Any]:
    from app.web.csrf import csrf_token
    from app.web.flash import pop_flashes

    tz = _tz(request)
    user = getattr(request.state, "user", None)
    if user is None and not getattr(request.state, "user_loaded", False):
        from app.accounts.deps import load_user

        user = load_user(request)
    return {
        "request": request,
        "user": user,
        "csrf_token": csrf_token(request),
        "flashes": pop_flashes(request),
        "locale": i18n.current_locale(),
        "simulation": request.app.state.settings.simulation,
        "fmt_date": lambda v, f="medium": format_date(v, f, tz),
        "fmt_datetime": lambda v, f="medium": format_datetime(v, f, tz),
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
    try:
        return render(
            request,
            template,
            {"status_code": status_code, "message": message, "code": code},
            status_code=status_code,
            headers=headers,
        )
    except Exception:  # the error page itself must never fail
        return HTMLResponse(f"<h1>{status_code}</h1>", status_code=status_code)
