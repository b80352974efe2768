"""A receipt as a PDF (fpdf2), in English or Chinese.

Both languages embed a CJK font, so a customer's Chinese company name or address prints in
the English receipt too: Latin text is set in DejaVu Sans with the CJK font as fpdf2's
fallback font (glyphs DejaVu lacks come from it); Chinese receipts use the CJK font
throughout. The CJK font is Droid Sans Fallback (``fonts-droid-fallback``, installed by
``make run`` and ``.ci/run``) when installed, else Noto Sans CJK SC (``fonts-noto-cjk``):
fpdf2 embeds Noto's CFF collection with a text layer that reads back NUL-interleaved
(``\x00张``), so copying, searching and screen readers would get broken Chinese.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from babel.numbers import format_decimal

from app.i18n import babel_locale, labelled
from app.ledger.models import Receipt
from app.ledger.postings import EntryKind
from app.ledger.receipts import title_msgid
from app.money import format_cents
from app.pdfdoc import DEJAVU, DEJAVU_BOLD, FPDF, add_cjk_font

SELLER = "GPU Nodes"


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


def render_receipt_pdf(
    receipt: Receipt,
    *,
    lang: str,
    gettext: Callable[[str], str],
    fmt_datetime: Callable[..., str],
    coin: Callable[[str, str], str],
) -> bytes:
    _ = gettext
    money_locale = "zh_CN" if lang == "zh_CN" else "en"
    pdf = FPDF(format="A4")
    pdf.set_title(f"{receipt.number}")
    pdf.set_subject(f"{receipt.number} USD {receipt.amount_cents / 100:.2f}")
    pdf.set_author(SELLER)
    pdf.set_creator(SELLER)
    pdf.add_page()
    family, bold = _setup_fonts(pdf, lang)
    width = pdf.w - pdf.l_margin - pdf.r_margin

    pdf.set_font(family, bold, 18)
    pdf.cell(width, 10, _("Receipt"), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(family, "", 11)
    pdf.cell(width, 7, labelled(_("Number"), receipt.number, lang), new_x="LMARGIN", new_y="NEXT")
    pdf.cell(
        width,
        7,
        labelled(_("Date"), fmt_datetime(receipt.created_at, "long"), lang),
        new_x="LMARGIN",
        new_y="NEXT",
    )
    pdf.ln(4)

    pdf.set_font(family, bold, 12)
    pdf.cell(width, 7, _("Billed to"), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(family, "", 11)
    for line in _billing_lines(receipt, gettext, lang):
        pdf.multi_cell(width, 6, line, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)

    pdf.set_font(family, bold, 12)
    pdf.cell(width, 7, _("Item"), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(family, "", 11)
    msgid, params = title_msgid(receipt)
    pdf.multi_cell(width, 6, _(msgid).format(**params), new_x="LMARGIN", new_y="NEXT")
    if receipt.kind == EntryKind.topup.value and receipt.crypto_currency:
        paid = coin(receipt.crypto_amount, receipt.crypto_currency)
        pdf.multi_cell(
            width,
            6,
            _("Paid {amount} {currency} at US${rate} per coin (the invoice's locked rate).").format(
                amount=paid,
                currency=receipt.crypto_currency,
                rate=format_decimal(
                    Decimal(receipt.rate), locale=babel_locale(lang), decimal_quantization=False
                ),
            ),
            new_x="LMARGIN",
            new_y="NEXT",
        )
    pdf.ln(2)
    pdf.set_font(family, bold, 14)
    pdf.cell(
        width,
        9,
        labelled(_("Total"), format_cents(receipt.amount_cents, money_locale), lang),
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
        ).format(seller=SELLER),
        new_x="LMARGIN",
        new_y="NEXT",
    )
    return bytes(pdf.output())


def _billing_lines(receipt: Receipt, gettext: Callable[[str], str], lang: str) -> list[str]:
    _ = gettext
    lines = [x for x in (receipt.bill_company, receipt.bill_name) if x]
    if receipt.bill_address:
        lines.extend(receipt.bill_address.splitlines())
    if receipt.bill_tax_id:
        lines.append(labelled(_("Tax ID"), receipt.bill_tax_id, lang))
    lines.append(receipt.bill_email)
    return lines
