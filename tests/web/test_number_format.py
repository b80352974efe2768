"""The page's quick number and money formatting reads exactly as Babel's (the CLDR
patterns behind app.money.format_cents and format_decimal), in English and Chinese."""

from __future__ import annotations

import random

from babel.numbers import format_decimal

from app.money import format_cents
from app.web import i18n
from app.web.templating import format_money, format_number


def _values() -> list[float | int]:
    rng = random.Random(17)
    out: list[float | int] = [0, 0.5, 1.5, 2.5, -2.5, 0.05, 0.15, 0.25, 12345.675, 999.95, 1e20]
    out += [rng.uniform(-1e6, 1e6) for _ in range(400)]
    out += [rng.random() * 10 ** rng.randint(-3, 13) for _ in range(400)]
    out += [rng.randint(-(10**9), 10**9) for _ in range(200)]
    return out


def test_numbers_read_as_babel_writes_them() -> None:
    for locale in ("en", "zh_CN"):
        i18n.set_locale(locale)
        for v in _values():
            for digits in (0, 1, 2):
                pattern = "#,##0" + ("." + "0" * digits if digits else "")
                expected = format_decimal(v, format=pattern, locale=i18n.babel_locale())
                if expected.startswith("-") and not expected.strip("-0.,"):
                    expected = expected[1:]  # no "-0": a rounded-away minus reads wrong
                assert format_number(v, digits) == expected, (locale, v, digits)
    i18n.set_locale("en")


def test_money_reads_as_babel_writes_it() -> None:
    rng = random.Random(18)
    amounts = [0, 1, -1, -150, 99, 100, 3_490_000, 123_456_789_012]
    amounts += [rng.randint(-(10**12), 10**12) for _ in range(300)]
    for locale in ("en", "zh_CN"):
        i18n.set_locale(locale)
        for cents in amounts:
            assert format_money(cents) == format_cents(cents, locale), (locale, cents)
    i18n.set_locale("en")
