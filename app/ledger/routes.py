"""``/balance``: available and on-hold balance, and a statement explaining every line."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.responses import Response as RawResponse

from app import pdfdoc
from app.accounts.deps import CurrentUser
from app.errors import N_
from app.ledger import credit_notes, receipts
from app.ledger import service as ledger
from app.ledger.documents_pdf import billing_lines, line_views, seller_lines
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


@router.get("/receipts/{number}", response_class=HTMLResponse)
def receipt_page(
    number: Annotated[str, Path(max_length=20)],
    request: Request,
    session: SessionDep,
    user: CurrentUser,
) -> Response:
    receipt = receipts.get_receipt(session, user, number)
    assert receipt.id is not None
    return render(
        request,
        "ledger/receipt.html",
        {
            "r": receipt,
            "receipt_title": receipts.title_msgid,
            "coin": coin,
            **_parties(receipt),
            "line_views": line_views(
                receipts.lines_of(session, receipt.id), _gettext(), current_locale()
            ),
            "corrected_by": credit_notes.credit_notes_correcting(session, receipt.id),
        },
    )


@router.get("/receipts/{number}/pdf")
def receipt_pdf(
    number: Annotated[str, Path(max_length=20)],
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    lang: Annotated[str, Query(pattern="^(en|zh_CN)$")] = "",
) -> Response:
    receipt = receipts.get_receipt(session, user, number)
    assert receipt.id is not None
    lines = receipts.lines_of(session, receipt.id)
    seller = receipts.seller_of(receipt)
    language = lang or current_locale()
    language = "zh_CN" if language == "zh_CN" else "en"
    fmt_datetime = pdf_datetime_formatter(request, language)
    # Rendered once per receipt version, language and time zone; renders capped per process.
    key = (
        "receipt",
        pdfdoc.version_of(
            {
                "receipt": receipt.model_dump(),
                "lines": [x.model_dump() for x in lines],
            }
        ),
        language,
        fmt_datetime(receipt.created_at),
    )
    body = pdfdoc.CACHE.get_or_render(
        key,
        lambda: render_receipt_pdf(
            receipt,
            lang=language,
            gettext=translations_for(language).gettext,
            fmt_datetime=fmt_datetime,
            coin=lambda units, currency: coin(units, currency, language),
            seller=seller,
            lines=lines,
        ),
    )
    return RawResponse(
        body,
        media_type="application/pdf",
        headers={
            "Content-Disposition": f'inline; filename="{receipt.number}.pdf"',
            "Cache-Control": "private, no-store",
        },
    )


def _gettext() -> Any:
    return translations_for(current_locale()).gettext


def _parties(doc: Any) -> dict[str, list[str]]:
    """The seller's and the buyer's blocks in the page's language, both as the document
    recorded them when it was issued."""
    lang = current_locale()
    return {
        "seller_lines": seller_lines(receipts.seller_of(doc), _gettext(), lang),
        "billing_lines": billing_lines(doc, _gettext(), lang),
    }


@router.get("/credit-notes/{number}", response_class=HTMLResponse)
def credit_note_page(
    number: Annotated[str, Path(max_length=20)],
    request: Request,
    session: SessionDep,
    user: CurrentUser,
) -> Response:
    note = credit_notes.get_credit_note(session, user, number)
    assert note.id is not None
    return render(
        request,
        "ledger/credit_note.html",
        {
            "n": note,
            "reason": credit_notes.reason_msgid(note),
            **_parties(note),
            "line_views": line_views(
                credit_notes.lines_of(session, note.id), _gettext(), current_locale()
            ),
        },
    )


@router.get("/credit-notes/{number}/pdf")
def credit_note_pdf(
    number: Annotated[str, Path(max_length=20)],
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    lang: Annotated[str, Query(pattern="^(en|zh_CN)$")] = "",
) -> Response:
    note = credit_notes.get_credit_note(session, user, number)
    assert note.id is not None
    lines = credit_notes.lines_of(session, note.id)
    seller = receipts.seller_of(note)
    language = "zh_CN" if (lang or current_locale()) == "zh_CN" else "en"
    fmt_datetime = pdf_datetime_formatter(request, language)
    key = (
        "credit_note",
        pdfdoc.version_of({"note": note.model_dump(), "lines": [x.model_dump() for x in lines]}),
        language,
        fmt_datetime(note.created_at),
    )
    body = pdfdoc.CACHE.get_or_render(
        key,
        lambda: render_credit_note_pdf(
            note,
            lang=language,
            gettext=translations_for(language).gettext,
            fmt_datetime=fmt_datetime,
            seller=seller,
            lines=lines,
        ),
    )
    return RawResponse(
        body,
        media_type="application/pdf",
        headers={
            "Content-Disposition": f'inline; filename="{note.number}.pdf"',
            "Cache-Control": "private, no-store",
        },
    )
