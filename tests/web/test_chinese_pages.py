"""Issue 19, done-when: every customer page of a seeded order reads as Chinese in Chinese —
including events written while an English-speaking ops user worked the order."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.models import User
from app.clock import FixedClock
from app.orders.models import Order
from tests.ops.helpers import fingerprint, paid_order, seed_catalog, ssh_public_key
from tests.support.english import english_sentences, text_chunks


def visible_text(html: str) -> str:
    return "\n".join(text_chunks(html))


DUMP = os.environ.get("ZH_DUMP")  # a folder: write each page's visible text there


@dataclass
class Seeded:
    customer: User
    ops: User
    delivered: Order
    delayed: Order
    draft: Order
    invoice_id: int


@pytest.fixture
def seeded(engine: Engine, clock: FixedClock, make_user: Callable[..., User]) -> Seeded:
    from app.orders import ops, service
    from app.payments import service as payments

    seed_catalog(engine, clock.now())
    customer = make_user(email="lin@lab.example")
    staff = make_user(role="ops", email="ops@example.com")
    with Session(engine, expire_on_commit=False) as s:
        s.get(User, customer.id).locale = "zh_CN"  # type: ignore[union-attr]
        s.get(User, staff.id).locale = "en"  # type: ignore[union-attr]
        s.commit()
    now = clock.now()
    delivered = paid_order(engine, customer, now, key="a", nodes=2)
    delayed = paid_order(engine, customer, now, key="b", sku="hgx-h200")
    with Session(engine, expire_on_commit=False) as s:
        actor = s.get(User, staff.id)
        assert actor is not None
        oid = delivered.id or 0
        ops.acknowledge(s, actor=actor, order_id=oid, now=now)
        order = s.get(Order, oid)
        assert order is not None
        nodes = ops.candidate_nodes(s, order)[:2]
        ops.assign_nodes(s, actor=actor, order_id=oid, node_ids=[n.id or 0 for n in nodes], now=now)
        data = ops.CredentialsInput(
            ssh_user="ubuntu",
            hosts=[
                ops.HostInput(ip=f"203.0.113.{10 + i}", fingerprints=fingerprint(str(i)))
                for i in range(2)
            ],
        )
        ops.set_credentials(s, actor=actor, order_id=oid, data=data, now=now)
        ops.mark_delivered(s, actor=actor, order_id=oid, now=now + timedelta(hours=1))
        ops.acknowledge(s, actor=actor, order_id=delayed.id or 0, now=now)
        ops.mark_delayed(
            s,
            actor=actor,
            order_id=delayed.id or 0,
            reason="机架电源检修。",
            new_estimate=now.date() + timedelta(days=20),
            now=now,
        )
        s.commit()
    with Session(engine, expire_on_commit=False) as s:
        u = s.get(User, customer.id)
        assert u is not None
        data = {
            "sku": "hgx-h100",
            "nodes": "2",
            "image": "ubuntu-24.04-cuda",
            "new_key_name": "laptop",
            "new_key_text": ssh_public_key(),
            "note_model_size": "70B",
            "note_token_budget": "1T tokens",
            "note_node_count": "2",
        }
        draft_data, errors = service.parse_draft(data)
        assert not errors, errors
        draft, _created = service.create_order(
            s, user=u, draft=draft_data, idempotency_key="c", now=now
        )
        inv = payments.create_topup(
            s, user_id=u.id or 0, amount_cents=150_000, currency="USDT", now=now
        )
        s.commit()
    return Seeded(customer, staff, delivered, delayed, draft, inv.id or 0)


def customer_pages(seeded: Seeded) -> list[str]:
    """Every page a signed-in customer sees around an order (shared by the Chinese tests)."""
    return [
        "/console",
        f"/console/orders/{seeded.delivered.id}",
        f"/console/orders/{seeded.delayed.id}",
        f"/console/orders/{seeded.draft.id}",
        f"/orders/{seeded.draft.id}/review",
        "/balance",
        "/account",
        f"/topups/{seeded.invoice_id}",
    ]


def test_every_customer_page_of_an_order_reads_as_chinese(
    client: TestClient, seeded: Seeded, login: Callable[[TestClient, User], TestClient]
) -> None:
    login(client, seeded.customer)
    client.cookies.set("lang", "zh_CN")
    pages = customer_pages(seeded)
    found = {}
    for url in pages:
        r = client.get(url)
        if DUMP:
            Path(DUMP, url.strip("/").replace("/", "_") + ".txt").write_text(visible_text(r.text))
        assert r.status_code == 200, url
        english = english_sentences(r.text)
        if english:
            found[url] = english
    assert not found, found


def test_the_same_events_read_in_each_readers_language(
    client: TestClient, seeded: Seeded, login: Callable[[TestClient, User], TestClient]
) -> None:
    """Written once (by an English-speaking ops user), read in Chinese by the customer and
    in English by ops; the typed reason does not end in a double full stop."""
    login(client, seeded.customer)
    client.cookies.set("lang", "zh_CN")
    page = client.get(f"/console/orders/{seeded.delayed.id}").text
    assert "机架电源检修" in page
    assert "New estimate" not in page and "Delayed:" not in page
    console = client.get("/console").text
    assert "is delayed" not in console and "机架电源检修" in console
    assert "。。" not in visible_text(page) and ".." not in visible_text(console)
    client.cookies.set("lang", "en")
    login(client, seeded.ops)
    staff = client.get(f"/staff/ops/orders/{seeded.delayed.id}").text
    assert "Delayed: 机架电源检修. New estimate:" in staff
    assert "订单已创建" not in staff and "已支付" not in staff


def test_chinese_wording_of_the_order_balance_and_invoice(
    client: TestClient,
    seeded: Seeded,
    engine: Engine,
    clock: FixedClock,
    login: Callable[[TestClient, User], TestClient],
) -> None:
    from app.payments import service as payments

    with Session(engine) as s:
        btc = payments.create_topup(
            s,
            user_id=seeded.customer.id or 0,
            amount_cents=250_000,
            currency="BTC",
            now=clock.now(),
        )
        s.commit()
        btc_id = btc.id
    login(client, seeded.customer)
    client.cookies.set("lang", "zh_CN")
    order = visible_text(client.get(f"/console/orders/{seeded.delivered.id}").text)
    assert "投递编号" not in order and "交付" in order  # the card, not a webhook column
    balance = visible_text(client.get("/balance").text)
    assert "数量" not in balance and "金额" in balance  # "Amount" of a top-up is money
    assert "等待付款" in balance and "\nNew\n" not in balance  # invoice statuses translated
    invoice = visible_text(client.get(f"/topups/{btc_id}").text)
    assert "(simulated)" not in invoice and "模拟" in invoice
    import re

    rate = re.search(r"1 BTC = US\$([0-9,.]+)", invoice)
    assert rate is not None and "," in rate.group(1)  # 96,909.14, not 96909.14


ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_dates_read_in_one_format_of_the_readers_language(
    client: TestClient,
    seeded: Seeded,
    engine: Engine,
    clock: FixedClock,
    login: Callable[[TestClient, User], TestClient],
    lang: str,
) -> None:
    """A delay estimate and a late notice: no ISO date in the visible text, and the promised
    date, the new estimate and the notices all use Babel's medium format of the language."""
    from babel.dates import format_date

    from app.orders.renewals import send_late_notices

    with Session(engine) as s:
        order = s.get(Order, seeded.delayed.id)
        assert order is not None and order.promised_date and order.delay_estimate
        promised, estimate = order.promised_date, order.delay_estimate
        assert send_late_notices(s, clock.now() + timedelta(days=60)) >= 1
        s.commit()
    login(client, seeded.customer)
    client.cookies.set("lang", lang)
    locale = "zh_Hans_CN" if lang == "zh_CN" else "en_US"
    for url in ("/console", f"/console/orders/{seeded.delayed.id}"):
        text = visible_text(client.get(url).text)
        assert not ISO_DATE.findall(text), (url, ISO_DATE.findall(text))
        assert format_date(promised, "medium", locale=locale) in text, url
        assert format_date(estimate, "medium", locale=locale) in text, url
        assert format_date(promised, "long", locale=locale) not in text or lang == "zh_CN", url


@pytest.mark.parametrize(("lang", "shown"), [("en", "Dec 9, 2026"), ("zh_CN", "2026年12月9日")])
def test_changed_date_messages_use_the_readers_date_format(lang: str, shown: str) -> None:
    """ "The delivery date changed to …" (pay) and "Stock changed … now …" (confirm) are read
    by the customer: the date in the reader's format, not 2026-12-09."""
    from datetime import date

    from app import i18n
    from app.catalog.promise import Promise
    from app.catalog.service import StockChanged
    from app.orders.service import PromiseChanged

    i18n.set_locale(lang)
    try:
        day = date(2026, 12, 9)
        changed = PromiseChanged(day).render_message(i18n.gettext)
        stock = StockChanged(Promise("hgx-h200", 1, True, True, day, None, "")).render_message(
            i18n.gettext
        )
    finally:
        i18n.set_locale("en")
    for text in (changed, stock):
        assert shown in text and not ISO_DATE.search(text), text
