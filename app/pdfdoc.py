"""fpdf2's ``FPDF`` with one fix, for every PDF the app makes (quotes, receipts).

A line whose text ends in a fallback font (Chinese in DejaVu Sans text) is wrapped in
``q … Q``; when it also begins in the fallback font, fpdf2 sets the page's current font
inside that ``q`` and then believes it set for the page. After ``Q`` the PDF's font is the
one from before, so the next lines (a receipt's tax ID and email after a Chinese address, a
quote's amount after a bold Chinese label) were drawn with glyph numbers of one font in
another: unreadable, on screen and in copied text. fpdf2 2.8.9; found by the hprobe session.
Here the font is set again before the next line (a few bytes per line).
"""

from __future__ import annotations

from typing import Any

import fpdf


class FPDF(fpdf.FPDF):
    def _render_styled_text_line(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super()._render_styled_text_line(*args, **kwargs)
        finally:
            self.current_font_is_set_on_page = False
