"""Issued receipts and credit notes never change: the seller (legal name, both addresses,
tax id) and the buyer's billing details are copied into the document when it is issued,
so new seller settings or a new billing address show on new documents only — on the HTML
pages and the PDFs, in English and Chinese. ``ledger check`` finds a document without its
seller."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from sqlmodel import Session

from app.ledger.models import CreditNote, Receipt
from app.main import create_app
from app.reconcile import run_checks
from tests.ledger.test_invoices import CHECKS, H100, _cancel, _deliver, _pdf_text, _rows, _stock
from tests.ops.helpers import paid_order

NEW_SELLER = {
    "seller_name": "Renamed Compute Pte. Ltd.",
    "seller_name_zh": "更名算力私人有限公司",
    "seller_address_en": "1 Raffles Place, #40-01\nSingapore 048616",
    "seller_address_zh": "新加坡莱佛士坊 1 号 #40-01",
    "seller_tax_id": "UEN 202612345K",
}
OLD = ("GPU Nodes Ltd.", "GPU 节点有限公司", "25 Harbour Road", "香港湾仔港湾道", "BR 7612 3456")
NEW = ("Renamed Compute Pte. Ltd.", "更名算力私人有限公司", "1 Raffles Place", "新加坡莱佛士坊",
       "UEN 202612345K")  # fmt: skip


def _shown(client: Any, path: str, lang: str) -> tuple[str, str]:
    """The document's page and its PDF's text, read in ``lang``."""
    client.cookies.set("lang", lang)
    page = client.get(path)
    pdf = client.get(f"{path}/pdf?lang={lang}")
    assert page.status_code == 200 and pdf.status_code == 200
    return page.text, _pdf_text(pdf.content)


def _billing(client: Any, company: str, address: str, tax_id: str) -> None:
    r = client.post("/account/billing",
                    data={"company": company, "billing_address": address, "tax_id": tax_id})  # fmt: skip
    assert r.status_code in (200, 303)


def test_issued_documents_keep_the_seller_and_buyer_of_their_day(
    app: Any, settings: Any, engine: Any, make_user: Any, clock: Any, client: Any, login: Any
) -> None:
    now = clock.now()
    _stock(engine, now, n=4)
    u = make_user()
    login(client, u)
    _billing(client, "Old Lab Ltd.", "7 Old Street", "OLD-TAX-1")
    delivered = paid_order(engine, u, now, sku=H100, key="s1")
    _deliver(engine, delivered.id or 0, now)
    refunded = paid_order(engine, u, now, sku=H100, key="s2")
    _cancel(engine, u, refunded.id or 0, now)
    (receipt,) = _rows(engine, Receipt, order_id=delivered.id)
    (note,) = _rows(engine, CreditNote, order_id=refunded.id)

    # The seller moves and renames (new settings: a restart builds the app from them), and
    # the customer changes their billing details.
    changed = settings.model_copy(update=NEW_SELLER)
    create_app(changed, clock=clock).state.engine.dispose()
    app.state.settings = changed
    _billing(client, "新实验室有限公司", "9 New Road", "NEW-TAX-2")

    old_docs = (f"/receipts/{receipt.number}", f"/credit-notes/{note.number}")
    for path in old_docs:
        for lang in ("en", "zh_CN"):
            for shown in _shown(client, path, lang):
                for value in (*OLD, "Old Lab Ltd.", "7 Old Street", "OLD-TAX-1"):
                    assert value in shown, (path, lang, value)
                for value in (*NEW, "新实验室有限公司", "9 New Road", "NEW-TAX-2"):
                    assert value not in shown, (path, lang, value)

    # Documents issued from now on name the new seller and the new billing details.
    later = paid_order(engine, u, now, sku=H100, key="s3")
    _deliver(engine, later.id or 0, now)
    cancelled = paid_order(engine, u, now, sku=H100, key="s4")
    _cancel(engine, u, cancelled.id or 0, now)
    (new_receipt,) = _rows(engine, Receipt, order_id=later.id)
    (new_note,) = _rows(engine, CreditNote, order_id=cancelled.id)
    for path in (f"/receipts/{new_receipt.number}", f"/credit-notes/{new_note.number}"):
        for lang in ("en", "zh_CN"):
            for shown in _shown(client, path, lang):
                for value in (*NEW, "新实验室有限公司", "9 New Road", "NEW-TAX-2"):
                    assert value in shown, (path, lang, value)
                for value in (*OLD, "Old Lab Ltd.", "OLD-TAX-1"):
                    assert value not in shown, (path, lang, value)
    with Session(engine) as s:
        assert run_checks(s, only=CHECKS) == []


@pytest.mark.parametrize(
    "breakage",
    [
        "UPDATE receipts SET seller_name = ''",
        "UPDATE receipts SET seller_tax_id = ''",
        "UPDATE credit_notes SET seller_address_en = '', seller_address_zh = ''",
        "UPDATE credit_notes SET seller_name = ' '",
    ],
)
def test_ledger_check_finds_a_document_without_its_seller(
    engine: Any, make_user: Any, clock: Any, breakage: str
) -> None:
    now = clock.now()
    _stock(engine, now)
    u = make_user()
    order = paid_order(engine, u, now, sku=H100, key="c1")
    _deliver(engine, order.id or 0, now)
    other = paid_order(engine, u, now, sku=H100, key="c2")
    _cancel(engine, u, other.id or 0, now)
    with Session(engine) as s:
        assert run_checks(s, only=CHECKS) == []
        s.exec(text(breakage))  # type: ignore[call-overload]
        s.commit()
    with Session(engine) as s:
        found = [v for v in run_checks(s, only=CHECKS)]
    assert [v.check for v in found] == ["seller_snapshot"]
    table = "receipt" if "receipts" in breakage else "credit_note"
    assert found[0].detail.startswith(table)
