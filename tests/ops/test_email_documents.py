"""Emails about money link to the document it issued, as a full URL on the site's public
address, in the recipient's language: the delivery charge and a renewal to their receipt,
a refund before delivery and a lease ended early to their credit note. The link opens
that document for the customer."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlmodel import Session, col, select

from app.accounts.models import User
from app.clock import utc
from app.ledger.models import CreditNote, Receipt
from app.notifications import service as mail
from app.notifications.models import OutboxEmail
from app.orders import service as orders
from app.orders.lease_end import end_lease
from tests.ops.helpers import paid_order, seed_catalog
from tests.ops.test_renewals import deliver, run
from tests.support import factories

SITE = "https://gpus.example"
SAYS = {
    "en": {"receipt": "Your receipt {n}: {url}", "note": "Your credit note {n}: {url}"},
    "zh_CN": {"receipt": "您的收据 {n}：{url}", "note": "您的贷项通知单 {n}：{url}"},
}


def _customer(make_user: Any, engine: Any, lang: str) -> User:
    u = make_user()
    with Session(engine) as s:
        row = s.get(User, u.id)
        assert row is not None
        row.locale = lang
        s.add(row)
        s.commit()
    return u


def _email(engine: Any, kind: str) -> OutboxEmail:
    with Session(engine) as s:
        (m,) = s.exec(select(OutboxEmail).where(OutboxEmail.kind == kind)).all()
        return m


def _numbers(engine: Any, model: Any, order_id: int) -> list[str]:
    with Session(engine) as s:
        stmt = select(model.number).where(model.order_id == order_id).order_by(col(model.id))
        return list(s.exec(stmt).all())


def _opens(client: Any, login: Any, user: User, body: str, url: str, number: str) -> None:
    """The URL in the email is the document's page, readable by its customer."""
    assert url in body
    login(client, user)
    page = client.get(url.removeprefix(SITE))
    assert page.status_code == 200 and number in page.text


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_delivery_and_renewal_emails_link_their_receipts(
    engine: Any, make_user: Any, clock: Any, client: Any, login: Any, monkeypatch: Any, lang: str
) -> None:
    monkeypatch.setattr(mail, "BASE_URL", SITE)
    seed_catalog(engine, clock.now())
    u = _customer(make_user, engine, lang)
    order = deliver(engine, u, clock.now())
    (first,) = _numbers(engine, Receipt, order.id or 0)
    body = _email(engine, "order.delivered").body
    url = f"{SITE}/receipts/{first}"
    assert SAYS[lang]["receipt"].format(n=first, url=url) in body
    assert f"{SITE}/console/orders/{order.id}" in body  # the order's page stays first
    _opens(client, login, u, body, url, first)

    # the renewal fails for want of money, then succeeds after a top-up: its email says so
    # and links the renewal's own receipt
    end = utc(order.period_end)
    assert run(engine, end + timedelta(minutes=5)).short == 1
    factories.fund(engine, u, order.monthly_total_cents, clock.now(), "top-up")
    assert run(engine, end + timedelta(hours=2)).renewed == 1
    first_again, renewal = _numbers(engine, Receipt, order.id or 0)
    assert first_again == first and renewal != first
    body = _email(engine, "order.renewed").body
    url = f"{SITE}/receipts/{renewal}"
    assert SAYS[lang]["receipt"].format(n=renewal, url=url) in body
    assert first not in body
    _opens(client, login, u, body, url, renewal)


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_refund_and_lease_credit_emails_link_their_credit_notes(
    engine: Any, make_user: Any, clock: Any, client: Any, login: Any, monkeypatch: Any, lang: str
) -> None:
    monkeypatch.setattr(mail, "BASE_URL", SITE)
    now = clock.now()
    seed_catalog(engine, now)
    u = _customer(make_user, engine, lang)

    # cancelled before delivery: the first month back, with its credit note
    cancelled = paid_order(engine, u, now, key="refund")
    with Session(engine) as s:
        me = s.get(User, u.id)
        assert me is not None
        orders.cancel_order(s, user=me, order_id=cancelled.id or 0, now=now)
        s.commit()
    (refund_note,) = _numbers(engine, CreditNote, cancelled.id or 0)
    body = _email(engine, "order_refunded").body
    url = f"{SITE}/credit-notes/{refund_note}"
    assert SAYS[lang]["note"].format(n=refund_note, url=url) in body
    _opens(client, login, u, body, url, refund_note)

    # ops end a running lease early: the unused days credited, with their credit note
    running = deliver(engine, u, now, key="early")
    ops = make_user(role="ops")
    with Session(engine) as s:
        staff = s.get(User, ops.id)
        assert staff is not None
        end_lease(s, actor=staff, order_id=running.id or 0, now=now + timedelta(days=5),
                  reason="hardware fault on the node", confirm=True)  # fmt: skip
        s.commit()
    (credit_note,) = _numbers(engine, CreditNote, running.id or 0)
    body = _email(engine, "order.ended").body
    url = f"{SITE}/credit-notes/{credit_note}"
    assert SAYS[lang]["note"].format(n=credit_note, url=url) in body
    assert refund_note not in body
    _opens(client, login, u, body, url, credit_note)


def test_an_email_without_a_document_links_none(
    engine: Any, make_user: Any, clock: Any, monkeypatch: Any
) -> None:
    """A lease ended with nothing left to credit issues no credit note and links none."""
    monkeypatch.setattr(mail, "BASE_URL", SITE)
    now = clock.now()
    seed_catalog(engine, now)
    u = make_user()
    running = deliver(engine, u, now, key="none")
    ops = make_user(role="ops")
    with Session(engine) as s:
        staff = s.get(User, ops.id)
        assert staff is not None
        last_day = utc(running.period_end) - timedelta(hours=1)
        end_lease(s, actor=staff, order_id=running.id or 0, now=last_day,
                  reason="hardware fault on the node", confirm=True)  # fmt: skip
        s.commit()
    assert _numbers(engine, CreditNote, running.id or 0) == []
    body = _email(engine, "order.ended").body
    assert "credit note" not in body.lower() and "/credit-notes/" not in body
    assert f"{SITE}/console/orders/{running.id}" in body
