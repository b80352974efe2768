"""Crypto amounts for reading: no 18-decimal ETH strings, the reader's separators; the
amount the customer must send stays exact (trailing zeros trimmed)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

from pypdf import PdfReader
from sqlmodel import Session, select

from app.ledger.models import Receipt
from app.payments.rates import format_units, format_units_for_reading

from .conftest import Provider

EIGHTEEN_DECIMALS = re.compile(r"\d\.\d{9,}")


def test_reading_format_rounds_to_eight_decimals_with_the_readers_separators() -> None:
    eth = 1_234_567_890_123_456_789_012  # 1234.567890123456789012 ETH
    assert format_units_for_reading(eth, 18, "en") == "≈1,234.56789012"
    assert format_units_for_reading(eth, 18, "zh_CN") == "≈1,234.56789012"
    assert format_units_for_reading(1_500_000_000_000_000_000, 18, "en") == "1.5"
    assert format_units_for_reading(2_584_732, 8, "en") == "0.02584732"
    assert format_units_for_reading(0, 18, "en") == "0"
    assert format_units_for_reading(10_000_000, 6, "en") == "10"  # USDT: whole tokens
    # The amount to send is exact, every significant digit, no pointless zeros.
    assert format_units(eth, 18) == "1234.567890123456789012"
    assert format_units(1_500_000_000_000_000_000, 18) == "1.5"


def test_eth_invoice_balance_and_receipt_show_readable_amounts(
    client: Any,
    login: Callable[..., Any],
    make_user: Callable[..., Any],
    topup: Callable[..., Any],
    provider: Provider,
    session: Session,
) -> None:
    user = make_user()
    login(client, user)
    inv = topup(user.id, 1_234_567, "ETH")  # US$12,345.67
    due = int(inv.due_units)
    exact = format_units(due, 18)
    assert EIGHTEEN_DECIMALS.search(exact)  # the simulated rate makes a long exact amount
    page = client.get(f"/topups/{inv.id}").text
    assert f'<code id="due-amount">{exact}</code>' in page  # "Send exactly": exact
    provider.pay(inv.id, due)
    provider.notify(inv.id, "InvoiceSettled")

    page = client.get(f"/topups/{inv.id}").text
    assert 'id="due-amount"' not in page  # paid: nothing more to send
    status = page.split('id="invoice-status"', 1)[1].split("</dl>", 1)[0]
    assert not EIGHTEEN_DECIMALS.search(status), status
    assert format_units_for_reading(due, 18, "en") in status

    balance = client.get("/balance").text
    assert not EIGHTEEN_DECIMALS.search(balance)
    assert format_units_for_reading(due, 18, "en") + " ETH" in balance  # the statement line
    session.expire_all()
    receipt = session.exec(select(Receipt).where(Receipt.user_id == user.id)).one()
    for lang in ("en", "zh_CN"):
        client.cookies.set("lang", lang)
        shown = client.get(f"/receipts/{receipt.number}").text
        assert not EIGHTEEN_DECIMALS.search(shown)
        assert format_units_for_reading(due, 18, lang) in shown
        pdf = client.get(f"/receipts/{receipt.number}/pdf?lang={lang}").content
        text = "\n".join(p.extract_text() or "" for p in PdfReader(io.BytesIO(pdf)).pages)
        assert not EIGHTEEN_DECIMALS.search(text), text
        assert format_units_for_reading(due, 18, lang) in text
