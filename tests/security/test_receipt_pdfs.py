"""Receipt PDFs: rendered once per receipt version (one cache and one render cap for every
PDF, ``app.pdfdoc``), and billing details they could not print are refused when saved,
naming the characters; control and zero-width characters never reach a receipt."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pypdf import PdfReader
from sqlmodel import Session, select

from app import pdfdoc
from app.accounts.models import User
from app.clock import FixedClock
from app.ledger import service as ledger
from app.ledger.models import Receipt


def _topup(session: Session, user_id: int, now: Any) -> str:
    ledger.credit_topup(
        session,
        user_id=user_id,
        amount_cents=100,
        invoice_id=1,
        now=now,
        crypto_amount=1,
        currency="BTC",
        rate="96000.00",
    )
    session.commit()
    return session.exec(select(Receipt.number)).one()


def test_a_receipt_pdf_is_rendered_once_per_version_under_parallel_requests(
    client: Any,
    session: Session,
    make_user: Callable[..., User],
    login: Any,
    clock: FixedClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = pdfdoc.PdfCache()
    monkeypatch.setattr(pdfdoc, "CACHE", cache)
    u = make_user()
    login(client, u)
    number = _topup(session, u.id, clock.now())
    barrier = threading.Barrier(8)

    def fetch(_i: int) -> int:
        barrier.wait()
        return int(client.get(f"/receipts/{number}/pdf?lang=en").status_code)

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(fetch, range(8)))
    assert set(statuses) <= {200, 503} and 200 in statuses
    assert cache.renders == 1
    assert client.get(f"/receipts/{number}/pdf?lang=zh_CN").status_code == 200
    assert cache.renders == 2  # another language, another document


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("company", "한국전자 주식회사", "한"),
        ("company", "भारत कंप्यूटिंग", "भ"),
        ("company", "บริษัท ไทย", "บ"),
        ("company", "தமிழ் நிறுவனம்", "த"),
        ("company", "שלום בע״מ", "ש"),
        ("billing_address", "شارع الملك فهد", "ش"),
        ("tax_id", "🧾12345", "🧾"),
    ],
)
def test_billing_details_a_receipt_cannot_print_are_refused_by_name(
    client: Any,
    session: Session,
    make_user: Callable[..., User],
    login: Any,
    field: str,
    value: str,
    named: str,
) -> None:
    u = make_user()
    login(client, u)
    data = {"company": "", "billing_address": "", "tax_id": "", field: value}
    r = client.post("/account/billing", data=data)
    assert r.status_code == 422 and named in r.text and "cannot print" in r.text
    fresh = session.get(User, u.id)
    assert fresh is not None and getattr(fresh, field) == ""


def test_control_and_zero_width_characters_are_removed_when_saved(
    client: Any,
    session: Session,
    make_user: Callable[..., User],
    login: Any,
    clock: FixedClock,
) -> None:
    u = make_user()
    login(client, u)
    r = client.post(
        "/account/billing",
        data={
            "company": "\x1b[31mACME\x1b[0m GmbH",
            "billing_address": "Hauptstr.\u200b 1\n10115 Berlin\u00ad",
            "tax_id": "DE\u200d123\ufeff456\u2060789",
        },
    )
    assert r.status_code == 303
    fresh = session.get(User, u.id)
    assert fresh is not None
    assert fresh.company == "ACME GmbH"
    assert fresh.billing_address == "Hauptstr. 1\n10115 Berlin"
    assert fresh.tax_id == "DE123456789"
    number = _topup(session, u.id, clock.now())
    body = client.get(f"/receipts/{number}/pdf?lang=en").content
    text = "\n".join(p.extract_text() or "" for p in PdfReader(io.BytesIO(body)).pages)
    assert "ACME GmbH" in text and "[31m" not in text and "DE123456789" in text


def test_what_the_fonts_print_is_accepted() -> None:
    assert pdfdoc.unprintable("ACME Ltd — Ωμέγα ООО «Привет» 深圳算力科技 ひらがな") == []
