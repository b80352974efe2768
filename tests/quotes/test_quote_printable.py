"""What a quote PDF prints of what sales type: characters its fonts cannot print (Korean,
Devanagari, Thai, Hebrew, Arabic, emoji) are refused when the quote is saved, named, in the
builder's language; control, escape and zero-width characters are removed at save."""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from pypdf import PdfReader
from sqlmodel import Session, func, select

from app.quotes.models import Quote

from .conftest import BASE_FORM


def _count(session: Session) -> int:
    n = session.exec(select(func.count()).select_from(Quote)).one()
    session.commit()
    return int(n)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("prospect_name", "김민준", "김"),
        ("prospect_company", "भारत कंप्यूटिंग", "भ"),
        ("prospect_company", "บริษัท ไทย", "บ"),
        ("prospect_name", "שלום כהן", "ש"),
        ("notes", "شكرا على المكالمة", "ش"),
        ("notes", "Thanks for the call 🚀", "🚀"),
        ("sizing_notes", "Run 🧾 twice", "🧾"),
    ],
)
def test_what_the_pdf_cannot_print_is_refused_by_name(
    sales_client: TestClient, session: Session, field: str, value: str, named: str
) -> None:
    before = _count(session)
    r = sales_client.post("/staff/quotes/new", data={**BASE_FORM, field: value})
    assert r.status_code == 422
    error = html.unescape(r.text)
    assert f'id="e-{field}"' in r.text and 'aria-invalid="true"' in r.text
    assert "Quote PDFs cannot print these characters" in error
    assert f'"{named}" (U+{ord(named):04X})' in error
    assert _count(session) == before  # nothing saved
    sales_client.cookies.set("lang", "zh_CN")
    r = sales_client.post("/staff/quotes/new", data={**BASE_FORM, field: value})
    assert r.status_code == 422 and "报价单 PDF 无法打印以下字符：" in r.text and named in r.text
    assert _count(session) == before


def test_an_edit_is_refused_the_same_way(
    build_quote: Callable[..., int], sales_client: TestClient, session: Session
) -> None:
    qid = build_quote()
    r = sales_client.post(f"/staff/quotes/{qid}/edit", data={**BASE_FORM, "notes": "정말 감사"})
    assert r.status_code == 422 and "cannot print" in r.text
    session.expire_all()
    q = session.get(Quote, qid)
    assert q is not None and q.notes == BASE_FORM["notes"]
    session.commit()


def test_control_and_zero_width_characters_are_removed_when_saved(
    build_quote: Callable[..., int], sales_client: TestClient, session: Session
) -> None:
    qid = build_quote(
        prospect_name="Lin\u200b Wei\u00ad",
        prospect_company="\x1b[31mExample\x1b[0m Labs\ufeff",
        notes="Thanks\u200d for\x07 the call.\nSee you\u2060 soon.",
    )
    session.expire_all()
    q = session.get(Quote, qid)
    assert q is not None
    session.commit()
    assert q.prospect_name == "Lin Wei"
    assert q.prospect_company == "Example Labs"
    assert q.notes == "Thanks for the call.\nSee you soon."
    body = sales_client.get(f"/staff/quotes/{qid}/pdf").content
    text = "\n".join(p.extract_text() or "" for p in PdfReader(io.BytesIO(body)).pages)
    assert "Example Labs" in text and "[31m" not in text and not re.search("[\u200b\u200d]", text)


def test_what_the_fonts_print_is_accepted(
    build_quote: Callable[..., int], session: Session
) -> None:
    qid = build_quote(
        prospect_name="Ωμέγα Петров", prospect_company="深圳算力科技 — ACME", notes="ひらがな OK"
    )
    session.expire_all()
    q = session.get(Quote, qid)
    assert q is not None and q.prospect_company == "深圳算力科技 — ACME"
    session.commit()
