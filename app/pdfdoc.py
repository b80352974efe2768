"""Every PDF the app makes (quotes, receipts): the document class, the fonts, what they can
print, and the cache with its concurrency cap.

- **Fonts.** Latin, Greek and Cyrillic text is set in DejaVu Sans; what DejaVu lacks comes
  from a CJK font as fpdf2's fallback (Droid Sans Fallback, ``fonts-droid-fallback``, or
  Noto Sans CJK SC, ``fonts-noto-cjk``): Chinese, Japanese kana and Korean Hangul.
- **What they cannot print** is refused where customers type it (billing details, quote
  names), naming the characters (:func:`unprintable`): scripts these fonts lack (emoji,
  Devanagari, Tamil …) and scripts that need shaping or right-to-left layout, which the
  PDFs do not do (Arabic, Hebrew, Thai and the Indic scripts would print unjoined, reversed
  or with broken clusters). The HTML pages show everything.
- **A fix kept with public API.** A line that ends in the fallback font is wrapped in
  ``q … Q``; when it also began in the fallback font fpdf2 sets the page's font inside that
  ``q`` and then believes it still set after ``Q`` — the next line was drawn with one font's
  glyph numbers in another (fpdf2 2.8.9). ``FPDF`` clears fpdf2's public
  ``current_font_is_set_on_page`` flag after every ``cell`` / ``multi_cell``, so the font is
  set again for the next line (a few bytes per line).
- **Cache and cap.** A PDF costs 0.3–2 s of CPU; every (document, version, language, time
  zone) is rendered once per process (``cachetools.LRUCache``) and at most
  ``MAX_RENDERS`` render at once: further requests wait briefly, then get a 503 with
  ``Retry-After`` instead of holding the process.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Hashable
from functools import cache
from pathlib import Path
from typing import Any

import fpdf
from cachetools import LRUCache
from fontTools.ttLib import TTCollection, TTFont

from app.errors import N_, DomainError

DEJAVU_DIR = Path("/usr/share/fonts/truetype/dejavu")
DEJAVU = DEJAVU_DIR / "DejaVuSans.ttf"
DEJAVU_BOLD = DEJAVU_DIR / "DejaVuSans-Bold.ttf"
NOTO_CJK = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
NOTO_CJK_SC_INDEX = 2  # JP, KR, SC, TC, HK in the Noto CJK collection
DROID_FALLBACK = Path("/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf")

MAX_RENDERS = 2
MAX_ENTRIES = 128
WAIT_SECONDS = 2.0  # for a render slot
FOLLOWER_WAIT_SECONDS = 10.0  # for another request's render of the same document


class FPDF(fpdf.FPDF):
    def cell(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().cell(*args, **kwargs)
        finally:
            self.current_font_is_set_on_page = False

    def multi_cell(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().multi_cell(*args, **kwargs)
        finally:
            self.current_font_is_set_on_page = False


class NoCjkFont(RuntimeError):
    """Neither CJK font is installed: PDFs cannot print Chinese text."""


def add_cjk_font(pdf: FPDF, family: str = "cjk") -> None:
    if DROID_FALLBACK.exists():
        pdf.add_font(family, "", str(DROID_FALLBACK))
    elif NOTO_CJK.exists():
        pdf.add_font(family, "", str(NOTO_CJK), collection_font_number=NOTO_CJK_SC_INDEX)
    else:
        raise NoCjkFont("install fonts-droid-fallback or fonts-noto-cjk")


# --- what the fonts can print ---------------------------------------------------------------

# Scripts that need shaping (joining, reordering, clusters) or right-to-left layout.
_NEEDS_LAYOUT = (
    (0x0590, 0x08FF),  # Hebrew, Arabic, Syriac, Thaana, NKo, Samaritan, Mandaic, Arabic Ext.
    (0x0900, 0x0DFF),  # Devanagari … Sinhala (the Indic scripts, Tamil among them)
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x0F00, 0x109F),  # Tibetan, Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0xFB1D, 0xFDFF),  # Hebrew and Arabic presentation forms
    (0xFE70, 0xFEFF),  # Arabic presentation forms B
)


@cache
def _covered() -> frozenset[int]:
    """Code points with a glyph in DejaVu Sans or the CJK font (empty: fonts not installed)."""
    points: set[int] = set()
    if DEJAVU.exists():
        points |= set(TTFont(str(DEJAVU), lazy=True).getBestCmap())
    if DROID_FALLBACK.exists():
        points |= set(TTFont(str(DROID_FALLBACK), lazy=True).getBestCmap())
    elif NOTO_CJK.exists():
        points |= set(TTCollection(str(NOTO_CJK), lazy=True).fonts[NOTO_CJK_SC_INDEX].getBestCmap())
    return frozenset(points)


def unprintable(text: str) -> list[str]:
    """The distinct characters of ``text`` a PDF cannot print right, in order of appearance
    (whitespace never counts)."""
    covered = _covered()
    found: dict[str, None] = {}
    for ch in text:
        if ch.isspace() or ch in found:
            continue
        point = ord(ch)
        layout = any(lo <= point <= hi for lo, hi in _NEEDS_LAYOUT)
        if layout or (covered and point not in covered):
            found[ch] = None
    return list(found)


def describe(chars: list[str], limit: int = 5) -> str:
    """``"🧾" (U+1F9FE), "ש" (U+05E9)`` — for a message naming refused characters."""
    return ", ".join(f'"{c}" (U+{ord(c):04X})' for c in chars[:limit]) + (
        " …" if len(chars) > limit else ""
    )


# --- cache and concurrency cap -------------------------------------------------------------


class RendererBusy(DomainError):
    status_code = 503
    code = "busy"
    default_message = N_("Too many PDFs are being prepared right now. Try again in a moment.")
    headers = {"Retry-After": "5"}  # noqa: RUF012 - constant


class PdfCache:
    """Rendered PDFs by key, at most ``max_renders`` renders at once per process, and one
    render per key: requests for a key being rendered wait for that render (up to
    ``FOLLOWER_WAIT_SECONDS``) instead of rendering it again."""

    def __init__(
        self,
        max_renders: int = MAX_RENDERS,
        max_entries: int = MAX_ENTRIES,
        wait_seconds: float = WAIT_SECONDS,
    ) -> None:
        self._slots = threading.BoundedSemaphore(max_renders)
        self._lock = threading.Lock()
        self._entries: LRUCache[Hashable, bytes] = LRUCache(maxsize=max_entries)
        self._rendering: dict[Hashable, threading.Event] = {}
        self.wait_seconds = wait_seconds
        self.renders = 0  # how many times a PDF was actually built (tests, metrics)

    def get_or_render(self, key: Hashable, render: Callable[[], bytes]) -> bytes:
        with self._lock:
            body = self._entries.get(key)
            if body is not None:
                return body
            done = self._rendering.get(key)
            leader = done is None
            if done is None:
                done = self._rendering[key] = threading.Event()
        if not leader:
            done.wait(FOLLOWER_WAIT_SECONDS)
            with self._lock:
                body = self._entries.get(key)
            if body is None:
                raise RendererBusy()  # the render failed or is still running
            return body
        try:
            if not self._slots.acquire(timeout=self.wait_seconds):
                raise RendererBusy()
            try:
                body = render()
                with self._lock:
                    self.renders += 1
                    self._entries[key] = body
                return body
            finally:
                self._slots.release()
        finally:
            with self._lock:
                self._rendering.pop(key, None)
            done.set()


def version_of(fields: dict[str, Any]) -> str:
    """A document version: a digest of every field (any change → a new cache key)."""
    raw = json.dumps(fields, sort_keys=True, default=str).encode()
    return hashlib.sha256(raw).hexdigest()


# One cache and one cap per process for every PDF: quotes and receipts share the slots, so
# a burst of either cannot hold more than MAX_RENDERS threads.
CACHE = PdfCache()
