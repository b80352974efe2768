"""``/balance``: available and on-hold balance, and a statement explaining every line."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.responses import Response as RawResponse

from app import pdfdoc
from app.accounts.deps import CurrentUser
from app.errors import N_
from app.ledger import credit_notes, receipts
from app.ledger import service as ledger
from app.ledger.documents_pdf import billing_lines, line_views, seller_lines
from app.ledger.models import CreditNote, DocumentLine, IssuedDocument, Receipt
from app.ledger.receipt_pdf import render_credit_note_pdf, render_receipt_pdf
from app.payments import service as payments
from app.payments.rates import CURRENCIES, format_units_for_reading
from app.web.deps import SessionDep
from app.web.i18n import current_locale, translations_for
from app.web.routing import AppRoute
from app.web.templating import pdf_datetime_formatter, render

router = APIRouter(route_class=AppRoute, include_in_schema=False)
PAGE = 25

KIND_TEXT = {
    "topup": N_("Crypto top-up"),
    "promotion": N_("Promotional credit"),
    "hold": N_("Reserved for an order"),
    "hold_post": N_("Reservation charged"),
    "hold_void": N_("Reservation released (refund)"),
    "charge": N_("Charge"),
    "adjustment": N_("Adjustment by our staff"),
    "lease_credit": N_("Unused days credited"),
}
KIND_EXPLAIN = {
    "topup": N_("Converted once at the invoice's locked rate."),
    "promotion": N_("Credit given by us."),
    "hold": N_(
        "Moved from available to on hold; charged when the node is delivered, released if the order is cancelled."
    ),
    "hold_post": N_("The reserved amount was charged: your node was delivered."),
    "hold_void": N_("The reserved amount went back to your available balance."),
    "charge": N_("Paid directly from your available balance (for example a monthly renewal)."),
    "adjustment": N_("A correction made by our operations staff."),
    "lease_credit": N_(
        "Our operations team ended the lease early: the unused whole days of the paid month "
        "came back to your balance, pro rata."
    ),
}


def statement_context(session: SessionDep, user_id: int, page: int) -> dict[str, object]:
    page = max(1, page)
    available, held = ledger.balance_summary(session, user_id)
    total = ledger.statement_count(session, user_id)
    return {
        "available": available,
        "held": held,
        "lines": ledger.statement(session, user_id, PAGE, (page - 1) * PAGE),
        "page": page,
        "has_next": page * PAGE < total,
        "total": total,
        "kind_text": KIND_TEXT,
        "kind_explain": KIND_EXPLAIN,
        "coin": coin,
        "pending": ledger.pending_holds(session, user_id),
    }


def coin(units: str, currency: str, locale: str | None = None) -> str:
    """Smallest units of a crypto receipt as whole coins for reading (2584732 sat →
    0.02584732; an 18-decimal ETH amount → at most eight decimals, the reader's separators)."""
    cur = CURRENCIES.get(currency)
    try:
        return format_units_for_reading(int(units), cur.decimals, locale) if cur else units
    except ValueError:
        return units


@router.get("/balance", response_class=HTMLResponse)
def balance_page(
    request: Request, session: SessionDep, user: CurrentUser, page: int = 1
) -> Response:
    ctx = statement_context(session, user.id, page)  # type: ignore[arg-type]
    ctx["invoices"] = [i for i in payments.invoices_for(session, user.id, 10)]  # type: ignore[arg-type]
    ctx["receipts"] = receipts.receipts_for(session, user.id, 20)  # type: ignore[arg-type]
    ctx["receipt_total"] = receipts.receipt_count(session, user.id)  # type: ignore[arg-type]
    ctx["receipt_of_entry"] = receipts.receipt_numbers_by_entry(
        session,
        [line.entry_id for line in ctx["lines"]],  # type: ignore[attr-defined]
    )
    ctx["receipt_title"] = receipts.title_msgid
    ctx["credit_notes"] = credit_notes.credit_notes_for(session, user.id, 20)  # type: ignore[arg-type]
    ctx["credit_note_of_entry"] = credit_notes.credit_note_numbers_by_entry(
        session,
        [line.entry_id for line in ctx["lines"]],  # type: ignore[attr-defined]
    )
    ctx["credit_reason"] = credit_notes.reason_msgid
    return render(request, "ledger/balance.html", ctx)


@router.get("/receipts", response_class=HTMLResponse)
def receipt_list(
    request: Request, session: SessionDep, user: CurrentUser, page: int = Query(1, ge=1, le=10_000)
) -> Response:
    assert user.id is not None
    per = 50
    return render(
        request,
        "ledger/receipts.html",
        {
            "receipts": receipts.receipts_for(session, user.id, per, (page - 1) * per),
            "page": page,
            "has_next": page * per < receipts.receipt_count(session, user.id),
            "receipt_title": receipts.title_msgid,
            "credit_notes": credit_notes.credit_notes_for(session, user.id, per, (page - 1) * per),
            "credit_reason": credit_notes.reason_msgid,
        },
    )


def _own_receipt(
    number: Annotated[str, Path(max_length=20)], session: SessionDep, user: CurrentUser
) -> Receipt:
    return receipts.get_receipt(session, user, number)


def _own_credit_note(
    number: Annotated[str, Path(max_length=20)], session: SessionDep, user: CurrentUser
) -> CreditNote:
    return credit_notes.get_credit_note(session, user, number)


# The document the path names: the reader's own, or any for staff (404 otherwise).
OwnReceipt = Annotated[Receipt, Depends(_own_receipt)]
OwnCreditNote = Annotated[CreditNote, Depends(_own_credit_note)]
PdfLanguage = Annotated[str, Query(pattern="^(en|zh_CN)$")]


@router.get("/receipts/{number}", response_class=HTMLResponse)
def receipt_page(request: Request, session: SessionDep, receipt: OwnReceipt) -> Response:
    assert receipt.id is not None
    return _document_page(
        request,
        "ledger/receipt.html",
        receipt,
        receipts.lines_of(session, receipt.id),
        {
            "r": receipt,
            "receipt_title": receipts.title_msgid,
            "coin": coin,
            "corrected_by": credit_notes.credit_notes_correcting(session, receipt.id),
        },
    )


@router.get("/receipts/{number}/pdf")
def receipt_pdf(
    request: Request, session: SessionDep, receipt: OwnReceipt, lang: PdfLanguage = ""
) -> Response:
    assert receipt.id is not None
    return _document_pdf(
        request,
        receipt,
        receipts.lines_of(session, receipt.id),
        lang,
        partial(render_receipt_pdf, coin=coin),
    )


@router.get("/credit-notes/{number}", response_class=HTMLResponse)
def credit_note_page(request: Request, session: SessionDep, note: OwnCreditNote) -> Response:
    assert note.id is not None
    return _document_page(
        request,
        "ledger/credit_note.html",
        note,
        credit_notes.lines_of(session, note.id),
        {"n": note, "reason": credit_notes.reason_msgid(note)},
    )


@router.get("/credit-notes/{number}/pdf")
def credit_note_pdf(
    request: Request, session: SessionDep, note: OwnCreditNote, lang: PdfLanguage = ""
) -> Response:
    assert note.id is not None
    return _document_pdf(
        request, note, credit_notes.lines_of(session, note.id), lang, render_credit_note_pdf
    )


def _document_page(
    request: Request,
    template: str,
    doc: IssuedDocument,
    lines: Sequence[DocumentLine],
    ctx: dict[str, Any],
) -> Response:
    """A receipt's or credit note's page: ``ctx`` and, in the page's language, the seller's
    and the buyer's blocks as the document recorded them when it was issued, and its lines."""
    lang = current_locale()
    gettext = translations_for(lang).gettext
    return render(
        request,
        template,
        {
            **ctx,
            "seller_lines": seller_lines(receipts.seller_of(doc), gettext, lang),
            "billing_lines": billing_lines(doc, gettext, lang),
            "line_views": line_views(lines, gettext, lang),
        },
    )


def _document_pdf(
    request: Request,
    doc: IssuedDocument,
    lines: Sequence[DocumentLine],
    lang: str,
    render_pdf: Callable[..., bytes],
) -> Response:
    """A receipt or credit note as a PDF in ``lang`` (else the reader's language), drawn by
    ``render_pdf`` (``receipt_pdf``). Rendered once per document version, language and time
    zone; renders capped per process."""
    language = "zh_CN" if (lang or current_locale()) == "zh_CN" else "en"
    fmt_datetime = pdf_datetime_formatter(request, language)
    key = (
        doc.__tablename__,
        pdfdoc.version_of({"doc": doc.model_dump(), "lines": [x.model_dump() for x in lines]}),
        language,
        fmt_datetime(doc.created_at),
    )
    body = pdfdoc.CACHE.get_or_render(
        key,
        lambda: render_pdf(
            doc,
            lang=language,
            gettext=translations_for(language).gettext,
            fmt_datetime=fmt_datetime,
            lines=lines,
        ),
    )
    return RawResponse(
        body,
        media_type="application/pdf",
        headers={
            "Content-Disposition": f'inline; filename="{doc.number}.pdf"',
            "Cache-Control": "private, no-store",
        },
    )
