"""Exchange rates behind an interface; the simulated feed is deterministic in time."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Protocol

from babel.numbers import format_decimal

from app import i18n


@dataclass(frozen=True)
class Currency:
    code: str
    name: str
    decimals: int
    chain: str  # bitcoin | ethereum
    unit: str  # the smallest unit's name
    token_contract: str = ""  # ERC-20 contract (EIP-55) for tokens


CURRENCIES: dict[str, Currency] = {
    "BTC": Currency("BTC", "Bitcoin", 8, "bitcoin", "sat"),
    "ETH": Currency("ETH", "Ether", 18, "ethereum", "wei"),
    "USDT": Currency(
        "USDT",
        "Tether USD (ERC-20)",
        6,
        "ethereum",
        "µUSDT",
        "0xdAC17F958D2ee523a2206206994597C13D831ec7",
    ),
    "USDC": Currency(
        "USDC",
        "USD Coin (ERC-20)",
        6,
        "ethereum",
        "µUSDC",
        "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48",
    ),
}


@dataclass(frozen=True)
class Rate:
    currency: str
    usd_per_unit: str  # exact decimal string: US$ per whole coin
    source: str
    at: datetime


class RateSource(Protocol):
    def quote(self, currency: str, now: datetime) -> Rate: ...


_BASE = {
    "BTC": Decimal("97250"),
    "ETH": Decimal("3420"),
    "USDT": Decimal("1"),
    "USDC": Decimal("1"),
}
_SWING = {"BTC": 0.012, "ETH": 0.018, "USDT": 0.0004, "USDC": 0.0002}


class SimulatedRates:
    """A made-up feed: a gentle wave around a base price, one value per minute."""

    name = "simulated"

    def quote(self, currency: str, now: datetime) -> Rate:
        base = _BASE[currency]
        minute = int(now.timestamp() // 60)
        wave = math.sin(minute / 37.0) * 0.6 + math.sin(minute / 11.0) * 0.4
        value = base * (Decimal(1) + Decimal(str(round(wave * _SWING[currency], 6))))
        step = Decimal("0.01") if base >= 100 else Decimal("0.0001")
        return Rate(currency, str(value.quantize(step, rounding=ROUND_HALF_UP)), self.name, now)


def default_source() -> RateSource:
    return SimulatedRates()


def format_units(units: int, decimals: int) -> str:
    """Smallest units → a plain decimal string of whole coins, trailing zeros trimmed."""
    sign = "-" if units < 0 else ""
    s = str(abs(units)).rjust(decimals + 1, "0")
    whole, frac = s[: len(s) - decimals], s[len(s) - decimals :].rstrip("0")
    return f"{sign}{whole}.{frac}" if frac else f"{sign}{whole}"


READING_DECIMALS = 8  # enough to tell any two real-world ETH payments apart when reading


def format_units_for_reading(units: int, decimals: int, locale: str | None = None) -> str:
    """Smallest units → whole coins for reading: at most eight decimals (rounded half up,
    marked "≈" when rounded), trailing zeros trimmed, the reader's separators
    ("1,234.56789012"). Not for an amount someone must send: use format_units for that."""
    exact = Decimal(units).scaleb(-decimals)
    step = Decimal(1).scaleb(-min(decimals, READING_DECIMALS))
    shown = exact.quantize(step, rounding=ROUND_HALF_UP)
    text = format_decimal(
        shown.normalize(), locale=i18n.babel_locale(locale), decimal_quantization=False
    )
    return text if shown == exact else f"≈{text}"
