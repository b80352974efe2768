"""The one number rule for everything a person types (pure, standard library only).

Every form, query string and API field that carries a number typed by a person goes
through one of these parsers, so the whole app agrees on what a number is:

- Full-width digits and separators (``１２３``, ``，``, ``．``) are normalised to ASCII (NFKC)
  — people typing with a Chinese input method produce them.
- Only ASCII digits remain valid after that: superscripts (``²``), digits of other scripts
  (``١٢٣``), ``_`` separators, signs where none is allowed and exponents in money amounts are
  refused with a :class:`NumberError` carrying a stable ``code`` (the web layer maps it to
  a 422 with a translated message).
- ``万`` (10⁴) and ``亿`` (10⁸) are accepted **only in token counts**, as are the English
  suffixes K/M/B/T and scientific notation (``1.5e12``).

Money is parsed to integer cents; amounts never go through ``float``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any


@dataclass
class NumberError(ValueError):
    """A typed number that the rule refuses. ``code`` is stable; ``params`` fill the message."""

    code: str
    params: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return MESSAGES_EN.get(self.code, self.code).format(**self.shown_params)

    @property
    def shown_params(self) -> dict[str, Any]:
        """``params`` as a person reads them: whole-number limits grouped ("Enter at most
        1,000,000,000,000,000.", the separators of English and Chinese alike)."""
        return {
            k: f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else v
            for k, v in self.params.items()
        }


# English fallbacks for logs and non-translated contexts; pages translate by code.
MESSAGES_EN = {
    "number.empty": "Enter a number.",
    "number.invalid": "Enter a number using the digits 0–9.",
    "number.not_whole": "Enter a whole number.",
    "number.negative": "Enter a number that is not negative.",
    "number.too_small": "Enter at least {min}.",
    "number.too_large": "Enter at most {max}.",
    "money.decimals": "Use at most two decimal places.",
    "number.decimals": "Use at most two decimal places.",
    "money.exponent": "Write the amount out in full (no exponent).",
    "tokens.unit": "Use a plain number, an exponent (1.5e12) or a suffix K, M, B, T, 万 or 亿.",
}

# Only ASCII digits are digits after NFKC; anything str.isdigit() accepts beyond them is refused.
_ASCII_INT = re.compile(r"[0-9]+")
_ASCII_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
# thousands separators: 1,234,567 (commas only between groups of three)
_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?")
_TOKEN_SUFFIX = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "b": 10**9,
    "g": 10**9,
    "t": 10**12,
    "万": 10**4,
    "亿": 10**8,
    "万亿": 10**12,
}
_TOKENS = re.compile(
    r"(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e(?P<exp>[+-]?[0-9]{1,3}))?\s*(?P<suffix>[kmbgt]|万亿|万|亿)?"
)


def normalise(text: str) -> str:
    """NFKC (full-width → ASCII), trimmed. Superscripts also fold to ASCII under NFKC, so the
    parsers below check the *raw* text for them first."""
    return unicodedata.normalize("NFKC", text).strip()


def check_digits(raw: str) -> None:
    """Refuse characters NFKC would silently turn into ASCII digits but a person did not type
    as digits (superscripts, circled numbers), and digits of other scripts."""
    for ch in raw:
        if ch.isdigit() and not ("0" <= ch <= "9") and not ("０" <= ch <= "９"):
            raise NumberError("number.invalid")
        if ch == "_":
            raise NumberError("number.invalid")


def _strip_grouping(text: str) -> str:
    if "," in text:
        if not _GROUPED.fullmatch(text):
            raise NumberError("number.invalid")
        return text.replace(",", "")
    return text


def parse_int(
    text: str | int, *, min_value: int | None = None, max_value: int | None = None
) -> int:
    """A whole number typed by a person: '12', '１２', '1,024'. No sign, no decimals."""
    if isinstance(text, bool):
        raise NumberError("number.invalid")
    if isinstance(text, int):
        value = text
    else:
        check_digits(text)
        cleaned = _strip_grouping(normalise(text).replace(" ", ""))
        if not cleaned:
            raise NumberError("number.empty")
        if cleaned.startswith("-") and _ASCII_INT.fullmatch(cleaned[1:]):
            raise NumberError("number.negative")
        if _ASCII_DECIMAL.fullmatch(cleaned) and not _ASCII_INT.fullmatch(cleaned):
            raise NumberError("number.not_whole")
        if not _ASCII_INT.fullmatch(cleaned) or len(cleaned) > 30:
            raise NumberError("number.invalid")
        value = int(cleaned)
    return _bounded(value, min_value, max_value)


# the longest amount worth reading: "1,000,000,000,000,000.00" is 25 characters; past this the
# exponent check's pattern would backtrack (quadratic: 40 s for 100,000 digits)
_MONEY_MAX_CHARS = 40
_MONEY_CHARS = re.compile(r"[0-9.,]+")


def _long_money(text: str, max_cents: int | None) -> str:
    """An amount typed longer than any amount is: leading zeros ('000…0012.50') are dropped,
    so it reads as what it is; what stays too long is said as what is wrong with it (too
    many points, too many decimals, too large), never the regexes' quadratic case."""
    if not _MONEY_CHARS.fullmatch(text) or text.count(".") > 1:
        raise NumberError("number.invalid")
    shorter = text if "," in text else (text.lstrip("0") or "0")
    if shorter.startswith("."):
        shorter = "0" + shorter
    whole, _, frac = shorter.partition(".")
    if len(whole.replace(",", "")) > 15:
        limit = max_cents if max_cents is not None else 10**17 - 1
        raise NumberError("number.too_large", {"max": _fmt_cents(limit)})
    if len(frac) > 2:
        raise NumberError("money.decimals")
    if len(shorter) > _MONEY_MAX_CHARS:  # separators only: '1,,,,…'
        raise NumberError("number.invalid")
    return shorter


def parse_money_cents(
    text: str, *, min_cents: int | None = None, max_cents: int | None = None
) -> int:
    """An amount in US dollars typed by a person → integer cents.

    Accepts '12', '12.3', '12.34', '1,234.50', 'US$20', '$20', full-width digits. Refuses
    exponents ('1e3'), more than two decimals, signs, other scripts' digits and anything
    longer than 15 digits before the point (no float ever touches the value).
    """
    check_digits(text)
    cleaned = normalise(text).replace(" ", "")
    for prefix in ("US$", "us$", "$", "USD", "usd"):
        if cleaned.startswith(prefix):
            cleaned = cleaned[len(prefix) :]
            break
    if not cleaned:
        raise NumberError("number.empty")
    if len(cleaned) > _MONEY_MAX_CHARS:  # no amount is this long (and the checks stay linear)
        cleaned = _long_money(cleaned, max_cents)
    if re.fullmatch(r"[+-]?[0-9.,]*[0-9][0-9.,]*[eE][+-]?[0-9]*", cleaned):
        raise NumberError("money.exponent")
    if cleaned.startswith("-") or cleaned.startswith("+"):
        if cleaned.startswith("-"):
            raise NumberError("number.negative")
        raise NumberError("number.invalid")
    cleaned = _strip_grouping(cleaned)
    if not _ASCII_DECIMAL.fullmatch(cleaned):
        raise NumberError("number.invalid")
    whole, _, frac = cleaned.partition(".")
    if len(frac) > 2:
        raise NumberError("money.decimals")
    if len(whole) > 15:
        limit = max_cents if max_cents is not None else 10**17 - 1
        raise NumberError("number.too_large", {"max": _fmt_cents(limit)})
    try:
        value = Decimal(cleaned)
    except InvalidOperation:  # pragma: no cover - the regex already guarantees the shape
        raise NumberError("number.invalid") from None
    cents = int((value * 100).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    if min_cents is not None and cents < min_cents:
        raise NumberError("number.too_small", {"min": _fmt_cents(min_cents)})
    if max_cents is not None and cents > max_cents:
        raise NumberError("number.too_large", {"max": _fmt_cents(max_cents)})
    return cents


def parse_percent_bp(text: str, *, max_bp: int | None = None) -> int:
    """A percentage typed by a person → basis points: '12.5' → 1250, '12.5 %', '７.５',
    '7,25' (a decimal comma) → 725, '.5' → 50. At most two decimals; no sign, no exponent."""
    check_digits(text)
    cleaned = normalise(text).replace(" ", "").removesuffix("%")
    if not cleaned:
        raise NumberError("number.empty")
    if cleaned.count(",") == 1 and "." not in cleaned:
        cleaned = cleaned.replace(",", ".")
    if cleaned.startswith("-") and _ASCII_DECIMAL.fullmatch(cleaned[1:]):
        raise NumberError("number.negative")
    if not _ASCII_DECIMAL.fullmatch(cleaned) or len(cleaned) > 12:
        raise NumberError("number.invalid")
    whole, _, frac = cleaned.partition(".")
    if len(frac) > 2:
        raise NumberError("number.decimals")
    return _bounded(int(whole or "0") * 100 + int((frac + "00")[:2]), 0, max_bp)


def parse_token_count(
    text: str | int | float, *, min_value: int | None = None, max_value: int | None = None
) -> int:
    """A token budget: '1e12', '1.5T', '15t', '300B', '1,000,000', '１万亿', '2000亿', '5万'."""
    if isinstance(text, bool):
        raise NumberError("number.invalid")
    if isinstance(text, int):
        return _bounded(text, min_value, max_value)
    if isinstance(text, float):
        if text != text or text in (float("inf"), float("-inf")):
            raise NumberError("number.invalid")
        return _bounded(int(round(text)), min_value, max_value)
    check_digits(text)
    cleaned = normalise(text).replace(" ", "").lower()
    if cleaned.endswith("tokens"):
        cleaned = cleaned[: -len("tokens")]
    if not cleaned:
        raise NumberError("number.empty")
    if cleaned.startswith("-"):
        raise NumberError("number.negative")
    if "," in cleaned:
        m = re.match(r"[0-9,]+(?:\.[0-9]*)?", cleaned)
        head = m.group(0) if m else ""
        cleaned = _strip_grouping(head) + cleaned[len(head) :]
    m = _TOKENS.fullmatch(cleaned)
    if not m:
        raise NumberError("tokens.unit")
    try:
        value = Decimal(m.group("num"))
    except InvalidOperation:  # pragma: no cover
        raise NumberError("number.invalid") from None
    if m.group("exp"):
        value = value.scaleb(int(m.group("exp")))
    value *= _TOKEN_SUFFIX[m.group("suffix") or ""]
    if value > Decimal(10) ** 30:
        raise NumberError("number.too_large", {"max": max_value if max_value else "10^30"})
    return _bounded(int(value.to_integral_value(rounding=ROUND_HALF_UP)), min_value, max_value)


def _bounded(value: int, lo: int | None, hi: int | None) -> int:
    if value < 0 and (lo is None or lo >= 0):
        raise NumberError("number.negative")
    if lo is not None and value < lo:
        raise NumberError("number.too_small", {"min": lo})
    if hi is not None and value > hi:
        raise NumberError("number.too_large", {"max": hi})
    return value


def _fmt_cents(cents: int | None) -> str:
    if cents is None:
        return "—"
    return f"US${cents / 100:,.2f}"
