"""The one number rule (app/numbers.py), shared by every form and API field."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.numbers import (
    NumberError,
    parse_int,
    parse_money_cents,
    parse_percent_bp,
    parse_token_count,
)


@pytest.mark.parametrize(
    ("text", "cents"),
    [
        ("12", 1200),
        ("12.3", 1230),
        ("12.34", 1234),
        ("1,234.50", 123450),
        ("US$20", 2000),
        ("$20", 2000),
        ("１２３", 12300),
        ("１，０００．５", 100050),
        (" 7 ", 700),
        ("0" * 60 + "12.50", 1250),  # leading zeros past the length cap: still 12.50
        ("0" * 100_000 + "5", 500),
        ("0" * 45 + ".25", 25),
    ],
)
def test_money_accepts_what_people_type(text: str, cents: int) -> None:
    assert parse_money_cents(text) == cents


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("1e30", "money.exponent"),
        ("-1e30", "money.exponent"),
        ("1e999999999", "money.exponent"),
        ("9" * 30, "number.too_large"),
        ("9" * 100_000, "number.too_large"),  # a pasted page of digits: answered at once
        ("1," * 50_000 + "1", "number.too_large"),
        ("9" * 50_000 + "x", "number.invalid"),
        ("1.1." * 20, "number.invalid"),  # long but malformed: not 'the largest amount is'
        ("1." + "0" * 50, "money.decimals"),
        ("1" + "," * 60 + "1", "number.invalid"),
        ("²", "number.invalid"),
        ("¹⁰", "number.invalid"),
        ("١٢٣", "number.invalid"),
        ("1_000", "number.invalid"),
        ("12.345", "money.decimals"),
        ("-5", "number.negative"),
        ("", "number.empty"),
        ("abc", "number.invalid"),
        ("1,23", "number.invalid"),
        ("5万", "number.invalid"),
        ("NaN", "number.invalid"),
        ("Infinity", "number.invalid"),
    ],
)
def test_money_refuses_with_a_code(text: str, code: str) -> None:
    with pytest.raises(NumberError) as e:
        parse_money_cents(text)
    assert e.value.code == code


def test_money_bounds() -> None:
    with pytest.raises(NumberError) as e:
        parse_money_cents("0.5", min_cents=100)
    assert e.value.code == "number.too_small"
    with pytest.raises(NumberError) as e:
        parse_money_cents("2000000", max_cents=100_000_000)
    assert e.value.code == "number.too_large"


@pytest.mark.parametrize(
    ("text", "value"),
    [("8", 8), ("１６", 16), ("1,024", 1024), (" 3 ", 3)],
)
def test_int_accepts(text: str, value: int) -> None:
    assert parse_int(text) == value


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("²", "number.invalid"),
        ("1.5", "number.not_whole"),
        ("-1", "number.negative"),
        ("1e3", "number.invalid"),
        ("٣", "number.invalid"),
        ("1_0", "number.invalid"),
        ("5万", "number.invalid"),
        ("", "number.empty"),
    ],
)
def test_int_refuses(text: str, code: str) -> None:
    with pytest.raises(NumberError) as e:
        parse_int(text)
    assert e.value.code == code


def test_int_bounds() -> None:
    assert parse_int("16", min_value=1, max_value=16) == 16
    with pytest.raises(NumberError):
        parse_int("17", min_value=1, max_value=16)
    with pytest.raises(NumberError):
        parse_int("0", min_value=1)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e12", 10**12),
        ("1.5T", 15 * 10**11),
        ("15t", 15 * 10**12),
        ("300B", 300 * 10**9),
        ("1,000,000", 10**6),
        ("１T", 10**12),
        ("１万亿", 10**12),
        ("2000亿", 2 * 10**11),
        ("5万", 50_000),
        ("1.5e13", 15 * 10**12),
        ("2T tokens", 2 * 10**12),
    ],
)
def test_tokens_accepts(text: str, value: int) -> None:
    assert parse_token_count(text) == value


@pytest.mark.parametrize("text", ["²T", "١T", "1_000", "1e99999", "abc", "-1T", "1 trillion"])
def test_tokens_refuses(text: str) -> None:
    with pytest.raises(NumberError):
        parse_token_count(text)


@given(st.integers(min_value=0, max_value=10**14))
def test_money_roundtrip_whole_dollars(n: int) -> None:
    assert parse_money_cents(f"{n:,}") == n * 100
    assert parse_money_cents(str(n)) == n * 100


@given(st.text(max_size=20))
def test_parsers_never_raise_anything_but_number_error(s: str) -> None:
    for fn in (parse_int, parse_money_cents, parse_token_count, parse_percent_bp):
        with contextlib.suppress(NumberError):
            fn(s)


@pytest.mark.parametrize(
    ("text", "bp"), [("12.5", 1250), ("12.5 %", 1250), ("12.5％", 1250), ("7,25", 725), (".5", 50)]
)
def test_percent_accepts(text: str, bp: int) -> None:
    assert parse_percent_bp(text) == bp


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("", "number.empty"),
        ("-5", "number.negative"),
        ("1e1", "number.invalid"),
        ("²", "number.invalid"),
        ("10.123", "number.decimals"),
        ("51", "number.too_large"),
    ],
)
def test_percent_refuses(text: str, code: str) -> None:
    with pytest.raises(NumberError) as e:
        parse_percent_bp(text, max_bp=5000)
    assert e.value.code == code
