"""What an order's receipts and credit notes list, as the ledger's typed ``InvoiceLine``
values (the ledger copies them in; it never reads the orders table).

One line per order: the node type (the SKU's name as sold), the node count, the unit price
per node-month — the list price a quote discounted from, with the quote's discount on the
line, or the price paid when there was none — and the service period. A line comes to the
order's ``monthly_total_cents`` for a whole month, or to the pro-rata credit of its unused
days (``ledger.postings.unused_days_credit``), to the cent.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from sqlmodel import Session

from app.catalog import specs
from app.clock import utc
from app.errors import N_
from app.ledger import service as ledger
from app.ledger.postings import days_in_period
from app.ledger.service import InvoiceLine
from app.notifications.service import EmailLink
from app.orders.models import Order
from app.quotes import service as quotes


def _day(instant: datetime | None) -> date | None:
    return None if instant is None else utc(instant).date()


def _priced(session: Session, order: Order) -> tuple[int, int]:
    """(unit price per node-month before any discount, the line's discount), so that
    quantity × unit − discount is the order's monthly total."""
    unit = order.unit_price_cents
    if order.quote_id is not None:
        listed = quotes.quoted_list_unit_cents(session, order.quote_id)
        if listed is not None and listed > unit:
            return listed, (listed - unit) * order.quantity
    return unit, 0


def sku_name(sku_id: str) -> str:
    try:
        return specs.spec(sku_id).name
    except KeyError:
        return sku_id


def month_line(
    session: Session, order: Order, start: datetime | None, end: datetime | None
) -> InvoiceLine:
    """A whole month of the order for the service period ``start``..``end`` (None: the
    first month, not started yet)."""
    unit, discount = _priced(session, order)
    line = InvoiceLine(
        sku=order.sku_id,
        description=sku_name(order.sku_id),
        quantity=order.quantity,
        unit_cents=unit,
        discount_cents=discount,
        period_start=_day(start),
        period_end=_day(end),
    )
    assert line.total_cents == order.monthly_total_cents
    return line


def unused_days_line(session: Session, order: Order, *, now: datetime, days: int) -> InvoiceLine:
    """The unused whole days of the current paid month, from today to the period's end."""
    assert order.period_start is not None and order.period_end is not None
    unit, discount = _priced(session, order)
    start, end = utc(order.period_start), utc(order.period_end)
    return InvoiceLine(
        sku=order.sku_id,
        description=sku_name(order.sku_id),
        quantity=order.quantity,
        unit_cents=unit,
        discount_cents=discount,
        period_start=_day(max(now, start)),
        period_end=_day(end),
        days=days,
        days_of=days_in_period(start, end),
    )


def _document_link(number: str | None, text: str, path: Callable[[str], str]) -> list[EmailLink]:
    """The document an entry issued (None: none), as a link for the email that tells of it."""
    return [] if number is None else [EmailLink(text, path(number), {"number": number})]


def receipt_links(session: Session, entry: Any) -> list[EmailLink]:
    """The receipt a charge issued, as a link for the email that tells of the charge."""
    number = ledger.receipt_of_entry(session, getattr(entry, "id", None))
    return _document_link(number, N_("Your receipt {number}: {url}"), ledger.receipt_path)


def credit_note_links(session: Session, entry: Any) -> list[EmailLink]:
    """The credit note a refund issued, as a link for the email that tells of the refund."""
    number = ledger.credit_note_of_entry(session, getattr(entry, "id", None))
    return _document_link(number, N_("Your credit note {number}: {url}"), ledger.credit_note_path)
