"""What a top-up page asks for in each state: the rest after a partial payment (amount and
QR), nothing after expiry (a new top-up offered instead), and a paid but unconfirmed
invoice past its window flagged for staff and no longer re-read by the worker."""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.clock import FixedClock
from app.ledger import service as ledger
from app.payments import rules
from app.payments import service as payments
from app.payments.addresses import payment_uri
from app.payments.models import Invoice
from app.payments.rates import format_units
from tests.payments.test_pages_api import invoice_id_from


def _invoice(engine: Engine, iid: int) -> Invoice:
    with Session(engine) as s:
        inv = s.get(Invoice, iid)
        assert inv is not None
        return inv


def _new_topup(client: Any, amount: str = "2500", return_to: str = "/orders/7/review") -> int:
    data = {"amount": amount, "currency": "USDC", "return_to": return_to}
    return invoice_id_from(client.post("/topups/new", data=data))


def test_partly_paid_invoice_asks_for_the_rest(
    client: Any, login: Callable[..., Any], make_user: Callable[..., Any], engine: Engine
) -> None:
    login(client, make_user())
    iid = _new_topup(client)
    full = _invoice(engine, iid)
    full_text = format_units(int(full.due_units), full.decimals)
    assert f'<code id="due-amount">{full_text}</code>' in client.get(f"/topups/{iid}").text
    assert client.post(f"/topups/{iid}/simulate", data={"action": "pay_part"}).status_code == 303
    inv = _invoice(engine, iid)
    rest = int(inv.due_units) - int(inv.received_units)
    assert 0 < rest < int(inv.due_units)
    page = client.get(f"/topups/{iid}").text
    assert f'<code id="due-amount">{format_units(rest, inv.decimals)}</code>' in page
    assert f'<code id="due-amount">{full_text}</code>' not in page
    assert "Send the rest" in page and 'id="partly-paid"' in page
    assert html.escape(payment_uri("USDC", inv.address, rest)) in page  # what the QR encodes
    assert html.escape(inv.payment_uri) not in page
    client.cookies.set("lang", "zh_CN")
    zh = client.get(f"/topups/{iid}").text
    assert "请转入剩余金额" in zh and format_units(rest, inv.decimals) in zh


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_expired_invoice_hides_the_address_and_offers_a_new_top_up(
    client: Any,
    login: Callable[..., Any],
    make_user: Callable[..., Any],
    engine: Engine,
    lang: str,
) -> None:
    login(client, make_user())
    client.cookies.set("lang", lang)
    iid = _new_topup(client)
    assert client.post(f"/topups/{iid}/simulate", data={"action": "expire"}).status_code == 303
    inv = _invoice(engine, iid)
    assert inv.status == "Expired"
    page = client.get(f"/topups/{iid}").text
    assert inv.address not in page and 'class="qr"' not in page
    assert 'id="due-amount"' not in page
    link = "/topups/new?amount_cents=250000&amp;currency=USDC&amp;return_to=%2Forders%2F7%2Freview"
    assert link in page
    if lang == "en":
        assert "Send exactly" not in page and "This invoice has expired" in page
        assert "Start a new top-up for" in page
    else:
        assert "请准确转账" not in page and "此账单已过期" in page and "重新充值" in page
    form = client.get(html.unescape(link)).text  # prefilled with the same amount and way back
    assert 'value="2500.00"' in form and 'value="/orders/7/review"' in form


class CountingProvider:
    """The simulated provider, counting how often the worker re-reads an invoice."""

    def __init__(self) -> None:
        self.reads = 0

    def create(self, session: Session, wanted: rules.InvoiceRequest) -> dict[str, Any]:
        return payments.SIMULATED.create(session, wanted)

    def payments(self, session: Session, invoice: Invoice) -> list[rules.Payment]:
        self.reads += 1
        return payments.SIMULATED.payments(session, invoice)


def test_unconfirmed_past_the_window_is_flagged_and_not_polled(
    client: Any,
    login: Callable[..., Any],
    make_user: Callable[..., Any],
    engine: Engine,
    clock: FixedClock,
) -> None:
    user = make_user()
    login(client, user)
    iid = _new_topup(client, amount="1000")
    action = {"action": "pay_unconfirmed"}
    assert client.post(f"/topups/{iid}/simulate", data=action).status_code == 303
    assert _invoice(engine, iid).status == "Processing"
    clock.advance(rules.RATE_LOCK + rules.MONITORING_WINDOW + timedelta(seconds=1))
    counting = CountingProvider()
    with Session(engine) as s:
        payments.expire_due(s, clock.now(), provider=counting)
        s.commit()
    inv = _invoice(engine, iid)
    assert (inv.status, inv.final, inv.needs_review) == ("Processing", False, True)
    assert counting.reads == 1
    for _ in range(3):  # later worker cycles leave it to staff
        with Session(engine) as s:
            payments.expire_due(s, clock.now(), provider=counting)
            s.commit()
    assert counting.reads == 1
    with Session(engine) as s:
        assert inv.id in {i.id for i in payments.review_queue(s)}
    frag = client.get(f"/topups/{iid}/status").text
    assert "Flagged for staff review" in frag and "hx-trigger" not in frag
    assert "not confirmed within the 24-hour window" in frag
    # The network confirms after all: the provider's notification still credits it once.
    assert client.post(f"/topups/{iid}/simulate", data={"action": "confirm"}).status_code == 303
    inv = _invoice(engine, iid)
    assert inv.status == "Settled" and inv.credited_cents == 100_000
    with Session(engine) as s:
        assert ledger.available_cents(s, user.id) == 100_000


def test_rule_processing_past_the_window_needs_review() -> None:
    t0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    paid = [rules.Payment(100, t0, confirmed=False)]
    kw = {
        "due_units": 100,
        "payments": paid,
        "expires_at": t0 + rules.RATE_LOCK,
        "monitoring_until": t0 + rules.RATE_LOCK + rules.MONITORING_WINDOW,
    }
    inside = rules.evaluate(now=t0 + timedelta(hours=1), **kw)  # type: ignore[arg-type]
    assert inside.status is rules.Status.processing and not inside.needs_review
    after = rules.evaluate(now=t0 + timedelta(hours=25), **kw)  # type: ignore[arg-type]
    assert after.status is rules.Status.processing and after.needs_review and not after.final


def test_a_watching_page_is_redrawn_when_what_to_send_changes(
    client: Any, login: Callable[..., Any], make_user: Callable[..., Any]
) -> None:
    login(client, make_user())
    iid = _new_topup(client)
    page = client.get(f"/topups/{iid}").text
    poll = html.unescape(page.split('hx-get="', 1)[1].split('"', 1)[0])
    assert poll == f"/topups/{iid}/status?seen=New-0"
    htmx = {"HX-Request": "true"}
    same = client.get(poll, headers=htmx)
    assert same.status_code == 200 and "hx-refresh" not in same.headers
    assert client.post(f"/topups/{iid}/simulate", data={"action": "pay_part"}).status_code == 303
    changed = client.get(poll, headers=htmx)
    assert changed.headers["hx-refresh"] == "true"  # the page shows the rest to send
    assert "Send the rest" in client.get(f"/topups/{iid}").text
