"""Money is integer minor units (US cents). One formatter per locale."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from babel.numbers import format_currency

from app.numbers import parse_money_cents


@dataclass(frozen=True, order=True)
class Money:
    cents: int
    currency: str = "USD"

    def __post_init__(self) -> None:
        if not isinstance(self.cents, int) or isinstance(self.cents, bool):
            raise TypeError("Money.cents must be an int (minor units)")

    def __add__(self, other: Money) -> Money:
        self._same(other)
        return Money(self.cents + other.cents, self.currency)

    def __sub__(self, other: Money) -> Money:
        self._same(other)
        return Money(self.cents - other.cents, self.currency)

    def __neg__(self) -> Money:
        return Money(-self.cents, self.currency)

    def _same(self, other: Money) -> None:
        if other.currency != self.currency:
            raise ValueError("currency mismatch")

    def format(self, locale: str = "en") -> str:
        return format_cents(self.cents, locale, self.currency)


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
