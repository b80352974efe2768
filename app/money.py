"""Money is integer minor units (US cents). One formatter per locale."""

from __future__ import annotations

from decimal import Decimal

from babel.numbers import format_currency

from app.numbers import parse_money_cents

_BABEL_LOCALE = {"en": "en_US", "zh": "zh_Hans_CN", "zh_CN": "zh_Hans_CN"}


def format_cents(cents: int, locale: str = "en", currency: str = "USD") -> str:
    """US$34,900.00 in English, US$34,900.00 in Chinese (Babel's CLDR patterns)."""
    amount = Decimal(cents) / 100
    text = format_currency(amount, currency, locale=_BABEL_LOCALE.get(locale, locale))
    if currency == "USD" and "US$" not in text:
        # English CLDR writes a bare "$"; the product prices in US dollars for customers
        # who also know other dollars, and Chinese already reads "US$".
        text = text.replace("$", "US$", 1)
    return text


def parse_amount(text: str) -> int:
    """'12.34' / '1,234.5' / '$20' / '１２' → cents under the one number rule
    (``app.numbers.parse_money_cents``): full-width digits are normalised; exponents, ``_``,
    superscripts and other scripts' digits are refused. Raises ``NumberError`` (a
    ``ValueError``)."""
    return parse_money_cents(text)


def cents_to_usd(cents: int | float) -> float:
    """For JSON responses and engine results that carry dollars; never used for arithmetic."""
    return round(round(cents) / 100, 2)
