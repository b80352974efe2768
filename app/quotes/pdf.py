"""A quote as a PDF (fpdf2).

Latin text uses DejaVu Sans, with a CJK font as fpdf2's fallback so a customer's Chinese name
prints in an English quote too. Chinese needs a CJK font: Droid Sans Fallback
(``fonts-droid-fallback``, a plain TrueType font) behind DejaVu when installed, else Noto Sans
CJK SC (``fonts-noto-cjk``). Droid comes first because fpdf2 embeds Noto's CFF collection with
a text layer that reads back as NUL-interleaved characters (copy, search and screen readers
get ``\x00张\x00伟``); without either the PDF is written in English and the page says so
(``pdf_language`` tells the caller which language it got). The document's subject carries
the reference and the total in plain ASCII, so tools (and tests) can read the total
without a PDF text extractor.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from app.clock import utc
from app.i18n import labelled, punct, translations_for
from app.messages import format_day, format_instant
from app.money import format_cents
from app.pdfdoc import FPDF
from app.quotes import pricing
from app.quotes.models import Quote
from app.quotes.pricing import QuoteKind
from app.sizing.messages import render as render_msg

DEJAVU_DIR = Path("/usr/share/fonts/truetype/dejavu")
CJK_FONT = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
CJK_BOLD = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Bold.ttc")
CJK_SC_INDEX = 2  # JP, KR, SC, TC, HK in the Noto CJK collection


DROID_FALLBACK = Path("/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf")


def cjk_available() -> bool:
    """A Chinese PDF needs Noto Sans CJK, or DejaVu with Droid Sans Fallback for the Chinese."""
    return CJK_FONT.exists() or (
        DROID_FALLBACK.exists() and (DEJAVU_DIR / "DejaVuSans.ttf").exists()
    )


def pdf_language(locale: str) -> str:
    """The language the PDF will be in: zh_CN only when a CJK font is installed."""
    return "zh_CN" if locale == "zh_CN" and cjk_available() else "en"


def _add_cjk(pdf: FPDF) -> bool:
    if DROID_FALLBACK.exists():
        pdf.add_font("cjk", "", str(DROID_FALLBACK))
        return True
    if CJK_FONT.exists():
        pdf.add_font("cjk", "", str(CJK_FONT), collection_font_number=CJK_SC_INDEX)
        return True
    return False


def _droid_behind_dejavu() -> bool:
    return DROID_FALLBACK.exists() and (DEJAVU_DIR / "DejaVuSans.ttf").exists()


def _fonts(pdf: FPDF, lang: str) -> str:
    if lang == "zh_CN" and CJK_FONT.exists() and not _droid_behind_dejavu():
        pdf.add_font("body", "", str(CJK_FONT), collection_font_number=CJK_SC_INDEX)
        bold = CJK_BOLD if CJK_BOLD.exists() else CJK_FONT
        pdf.add_font("body", "B", str(bold), collection_font_number=CJK_SC_INDEX)
        return "body"
    regular = DEJAVU_DIR / "DejaVuSans.ttf"
    if regular.exists():
        pdf.add_font("body", "", str(regular))
        pdf.add_font("body", "B", str(DEJAVU_DIR / "DejaVuSans-Bold.ttf"))
        # Glyphs DejaVu lacks (a customer's Chinese name in an English quote) come from the
        # CJK font, as on receipts (issue 19, defect 9).
        if _add_cjk(pdf):
            pdf.set_fallback_fonts(["cjk"], exact_match=False)
        return "body"
    return "helvetica"  # core font: ASCII only, but never fails


def promise_text(q: Quote, gettext: Callable[[str], str]) -> str:
    """The delivery estimate's sentence in the reader's language."""
    if q.promise_message:
        try:
            params = json.loads(q.promise_params_json or "{}")
            return gettext(q.promise_message).format(**(params if isinstance(params, dict) else {}))
        except (KeyError, IndexError, ValueError):
            pass
    return q.promise_explanation


def _ascii_money(cents: int) -> str:
    return f"USD {cents // 100:,}.{cents % 100:02d}"


def build_pdf(
    q: Quote,
    *,
    locale: str,
    summary: dict[str, Any] | None,
    sku_name: str,
    gpus_per_node: int,
    staff_email: str,
    now: datetime,
    layout_rows: list[tuple[str, str]] | None = None,
) -> bytes:
    """The quote as PDF bytes, in ``pdf_language(locale)``."""
    lang = pdf_language(locale)
    _: Callable[[str], str] = translations_for(lang).gettext
    ngettext: Callable[[str, str, int], str] = translations_for(lang).ngettext
    money: Callable[[int], str] = lambda c: format_cents(c, lang)  # noqa: E731
    ref = pricing.reference(q.id or 0)

    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.set_margins(18, 18, 18)
    pdf.set_title(f"{ref}")
    pdf.set_subject(f"Quote {ref} total {_ascii_money(q.total_cents)}")
    pdf.set_author("GPU Nodes")
    pdf.set_creation_date(utc(now))
    font = _fonts(pdf, lang)
    pdf.add_page()
    width = pdf.w - pdf.l_margin - pdf.r_margin

    def line(text: str, size: float = 10, bold: bool = False, h: float = 5.5) -> None:
        pdf.set_font(font, "B" if bold else "", size)
        # Left-aligned: fpdf2 justifies by default, which spreads CJK text (no spaces to
        # stretch) with huge gaps between characters.
        pdf.multi_cell(width, h, text, new_x="LMARGIN", new_y="NEXT", align="L")

    def row(label: str, value: str, bold: bool = False) -> None:
        pdf.set_font(font, "", 10)
        pdf.cell(62, 7, label)
        pdf.set_font(font, "B" if bold else "", 10)
        pdf.multi_cell(width - 62, 7, value, new_x="LMARGIN", new_y="NEXT", align="L")

    line(_("GPU Nodes"), 11, True)
    line(_("Quote") + f" {ref}", 18, True, 9)
    if lang == "en" and locale == "zh_CN":
        line("(No Chinese font is installed on this server, so this PDF is in English.)", 8)
    pdf.ln(2)
    line(_("Prepared for"), 9, True)
    who = ", ".join(x for x in (q.prospect_name, q.prospect_company) if x)
    line(who or q.prospect_email)
    if who:
        line(q.prospect_email)
    pdf.ln(3)

    if q.kind == QuoteKind.rack:
        config = _("{gpus} GPUs ({racks} × {name}), {months}-month term").format(
            gpus=q.quantity, racks=q.quantity // pricing.RACK_GPUS, name=sku_name, months=q.months
        )
        unit_label = _("Quoted price per GPU per month")
        list_label = _("List price per GPU per month")
    else:
        config = ngettext(
            "{nodes} × {name} ({gpus} GPUs), {months} month",
            "{nodes} × {name} ({gpus} GPUs), {months} months",
            q.months,
        ).format(nodes=q.quantity, name=sku_name, gpus=q.quantity * gpus_per_node, months=q.months)
        unit_label = _("Quoted price per node per month")
        list_label = _("List price per node per month")
    row(_("Configuration"), config)
    row(list_label, money(q.list_unit_price_cents))
    if q.discount_bp:
        row(_("Discount"), f"{pricing.format_discount(q.discount_bp)} %")
    row(unit_label, money(q.unit_price_cents), bold=True)
    row(_("Monthly total"), money(q.monthly_total_cents))
    row(_("Total for the term"), money(q.total_cents), bold=True)
    if q.expires_at:
        row(_("Valid until"), format_instant(utc(q.expires_at), lang))
    pdf.ln(2)

    line(_("Delivery estimate"), 11, True, 7)
    promise = promise_text(q, _)
    if q.promise_available and q.promise_date:
        line(format_day(q.promise_date, lang) + (f" — {promise}" if promise else ""))
    else:
        line(promise or _("Agreed with sales when the contract is signed."))
    line(_("This is an estimate, not a reservation: nodes are held only when an order is paid."), 8)
    pdf.ln(2)

    if summary:
        line(_("Sizing"), 11, True, 7)
        line(
            _("{params} parameters, {tokens} tokens.").format(
                params=summary.get("params_human", "?"), tokens=summary.get("tokens_human", "?")
            )
        )
        if summary.get("training_days") is not None:
            line(
                _("About {days} days of training on this configuration.").format(
                    days=f"{float(summary['training_days']):.1f}"
                )
            )
        if layout_rows:
            line(punct("; ", lang).join(labelled(k, v, lang) for k, v in layout_rows), 9)
        elif summary.get("layout_code"):
            line(render_msg(summary["layout_code"], _), 9)
        elif summary.get("layout"):
            line(str(summary["layout"]), 9)
    if q.sizing_notes:
        line(_("Sizing notes"), 11, True, 7)
        line(q.sizing_notes, 9)
    if q.notes:
        line(_("Notes"), 11, True, 7)
        line(q.notes, 9)
    pdf.ln(4)
    if q.kind == QuoteKind.rack:
        line(
            _("Accepting this quote asks sales to prepare the term contract; nothing is charged."),
            9,
        )
    else:
        line(_("Accept online with the link you received."), 9)
        line(_(pricing.NODE_QUOTE_RULES), 9)
    line(_("Prices in US dollars."), 8)
    line(_("Your contact: {email}").format(email=staff_email), 8)
    return bytes(pdf.output())
