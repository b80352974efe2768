"""A receipt (the invoice of a charge or a top-up) and a credit note as PDFs (fpdf2), in
English or Chinese: the seller (legal name, both addresses, tax id) beside the buyer's
billing details, the line items (node type, nodes, unit price per node-month, discount,
service period, line total) and the total, which is the ledger entry's amount.

Both languages embed a CJK font, so a customer's Chinese company name or address prints in
the English receipt too: Latin text is set in DejaVu Sans with the CJK font as fpdf2's
fallback font (glyphs DejaVu lacks come from it); Chinese receipts use the CJK font
throughout. The CJK font is Droid Sans Fallback (``fonts-droid-fallback``, installed by
``make run`` and ``.ci/run``) when installed, else Noto Sans CJK SC (``fonts-noto-cjk``):
fpdf2 embeds Noto's CFF collection with a text layer that reads back NUL-interleaved
(``\x00张``), so copying, searching and screen readers would get broken Chinese.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal

from babel.numbers import format_decimal

from app.i18n import babel_locale, labelled
from app.ledger.credit_notes import reason_msgid
from app.ledger.documents_pdf import LineRow, billing_lines, line_views, seller_lines
from app.ledger.models import CreditNote, IssuedDocument, Receipt
from app.ledger.postings import EntryKind
from app.ledger.receipts import seller_of, title_msgid
from app.money import format_cents
from app.pdfdoc import DEJAVU, DEJAVU_BOLD, FPDF, add_cjk_font


def _setup_fonts(pdf: FPDF, lang: str) -> tuple[str, str]:
    """(regular family, bold style) for the language; CJK always available as fallback."""
    add_cjk_font(pdf)
    regular = DEJAVU
    if regular.exists():
        # Latin glyphs from DejaVu, the rest (Chinese) from the CJK font, in both languages:
        # Droid Sans Fallback has no Latin glyphs at all.
        pdf.add_font("latin", "", str(regular))
        pdf.add_font("latin", "B", str(DEJAVU_BOLD))
        pdf.set_fallback_fonts(["cjk"], exact_match=False)
        return "latin", ("" if lang == "zh_CN" else "B")
    return "cjk", ""


def _parties(
    pdf: FPDF,
    family: str,
    bold: str,
    width: float,
    left: tuple[str, list[str]],
    right: tuple[str, list[str]],
) -> None:
    """Two blocks side by side: the seller on the left, the buyer on the right."""
    half = (width - 6) / 2
    top = pdf.get_y()
    bottoms = []
    for i, (title, lines) in enumerate((left, right)):
        x = pdf.l_margin + i * (half + 6)
        pdf.set_xy(x, top)
        pdf.set_font(family, bold, 11)
        pdf.cell(half, 7, title, new_x="LEFT", new_y="NEXT")
        pdf.set_font(family, "", 10)
        for line in lines:
            pdf.multi_cell(half, 5, line, new_x="LEFT", new_y="NEXT")
        bottoms.append(pdf.get_y())
    pdf.set_xy(pdf.l_margin, max(bottoms) + 4)


COLUMNS = (70.0, 16.0, 34.0, 30.0, 30.0)  # item, nodes, unit price, discount, amount


def _lines_table(
    pdf: FPDF,
    family: str,
    bold: str,
    lines: Sequence[LineRow],
    gettext: Callable[[str], str],
    lang: str,
) -> None:
    _ = gettext
    heads = (_("Item"), _("Nodes"), _("Unit price per node-month"), _("Discount"), _("Amount"))
    pdf.set_font(family, bold, 9)
    top = pdf.get_y()
    x = pdf.l_margin
    bottoms = []
    for i, (w, text) in enumerate(zip(COLUMNS, heads, strict=True)):
        pdf.set_xy(x, top)
        pdf.multi_cell(w, 5, text, align="L" if i == 0 else "R", new_x="LEFT", new_y="NEXT")
        bottoms.append(pdf.get_y())
        x += w
    pdf.set_xy(pdf.l_margin, max(bottoms))
    pdf.line(pdf.l_margin, pdf.get_y(), pdf.l_margin + sum(COLUMNS), pdf.get_y())
    pdf.ln(1)
    for view in line_views(lines, gettext, lang):
        pdf.set_font(family, "", 10)
        cells = (view.item, view.quantity, view.unit, view.discount, view.total)
        for i, (w, text) in enumerate(zip(COLUMNS, cells, strict=True)):
            last = i == len(COLUMNS) - 1
            pdf.cell(
                w,
                6,
                text,
                align="L" if i == 0 else "R",
                new_x="LMARGIN" if last else "RIGHT",
                new_y="NEXT" if last else "TOP",
            )
        if view.period:
            pdf.set_font(family, "", 8)
            pdf.multi_cell(sum(COLUMNS), 5, view.period, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(1)
    pdf.line(pdf.l_margin, pdf.get_y(), pdf.l_margin + sum(COLUMNS), pdf.get_y())
    pdf.ln(2)


def _document(
    *,
    doc: IssuedDocument,
    title: str,
    facts: list[tuple[str, str]],
    lines: Sequence[LineRow],
    notes: list[str],
    total_label: str,
    lang: str,
    gettext: Callable[[str], str],
) -> bytes:
    """The PDF of ``doc``, a receipt or a credit note: its number, date and ``facts``, the
    seller and the buyer it recorded when it was issued, its lines, ``notes``, its total."""
    _ = gettext
    number, amount_cents, seller = doc.number, doc.amount_cents, seller_of(doc)
    money_locale = "zh_CN" if lang == "zh_CN" else "en"
    seller_name = seller.name_zh if lang == "zh_CN" and seller.name_zh else seller.name
    pdf = FPDF(format="A4")
    pdf.set_title(number)
    pdf.set_subject(f"{number} USD {amount_cents / 100:.2f}")
    pdf.set_author(seller_name)
    pdf.set_creator(seller_name)
    pdf.add_page()
    family, bold = _setup_fonts(pdf, lang)
    width = pdf.w - pdf.l_margin - pdf.r_margin

    pdf.set_font(family, bold, 18)
    pdf.cell(width, 10, title, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(family, "", 11)
    for label, value in [(_("Number"), number), *facts]:
        pdf.multi_cell(width, 6, labelled(label, value, lang), new_x="LMARGIN", new_y="NEXT")
    pdf.ln(3)
    _parties(
        pdf,
        family,
        bold,
        width,
        (_("Seller"), seller_lines(seller, gettext, lang)),
        (_("Billed to"), billing_lines(doc, gettext, lang)),
    )
    if lines:
        _lines_table(pdf, family, bold, lines, gettext, lang)
    pdf.set_font(family, "", 10)
    for note in notes:
        pdf.multi_cell(width, 5, note, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(2)
    pdf.set_font(family, bold, 14)
    pdf.cell(
        width,
        9,
        labelled(total_label, format_cents(amount_cents, money_locale), lang),
        new_x="LMARGIN",
        new_y="NEXT",
    )
    pdf.set_font(family, "", 9)
    pdf.ln(4)
    pdf.multi_cell(
        width,
        5,
        _(
            "Issued by {seller}. Amounts in US dollars; paid from or into your prepaid balance."
        ).format(seller=seller_name.rstrip(".")),  # "Ltd." ends the sentence once
        new_x="LMARGIN",
        new_y="NEXT",
    )
    return bytes(pdf.output())


def render_receipt_pdf(
    receipt: Receipt,
    *,
    lang: str,
    gettext: Callable[[str], str],
    fmt_datetime: Callable[..., str],
    coin: Callable[[str, str, str], str],
    lines: Sequence[LineRow] = (),
) -> bytes:
    _ = gettext
    msgid, params = title_msgid(receipt)
    notes = [] if lines else [_(msgid).format(**params)]
    if receipt.kind == EntryKind.topup.value and receipt.crypto_currency:
        paid = coin(receipt.crypto_amount, receipt.crypto_currency, lang)
        notes.append(
            _("Paid {amount} {currency} at US${rate} per coin (the invoice's locked rate).").format(
                amount=paid,
                currency=receipt.crypto_currency,
                rate=format_decimal(
                    Decimal(receipt.rate), locale=babel_locale(lang), decimal_quantization=False
                ),
            )
        )
    facts: list[tuple[str, str]] = [(_("Date"), fmt_datetime(receipt.created_at, "long"))]
    if lines:
        facts.append((_("For"), _(msgid).format(**params)))
    return _document(
        doc=receipt,
        title=_("Receipt"),
        facts=facts,
        lines=lines,
        notes=notes,
        total_label=_("Total"),
        lang=lang,
        gettext=gettext,
    )


def render_credit_note_pdf(
    note: CreditNote,
    *,
    lang: str,
    gettext: Callable[[str], str],
    fmt_datetime: Callable[..., str],
    lines: Sequence[LineRow],
) -> bytes:
    _ = gettext
    facts: list[tuple[str, str]] = [(_("Date"), fmt_datetime(note.created_at, "long"))]
    if note.order_id is not None:
        facts.append((_("Order"), f"#{note.order_id}"))
    facts.append(
        (
            _("Corrects receipt"),
            note.receipt_number
            or _("none: the first month is invoiced at delivery, and this order was not delivered"),
        )
    )
    return _document(
        doc=note,
        title=_("Credit note"),
        facts=facts,
        lines=lines,
        notes=[_(reason_msgid(note))],
        total_label=_("Total credited to your balance"),
        lang=lang,
        gettext=gettext,
    )
