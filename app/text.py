"""One rule for free text people type (pure, standard library only).

- NUL bytes and other control characters are removed everywhere (PostgreSQL refuses NUL;
  SQLite would store it — one rule on both).
- Bidirectional control characters (U+202A–U+202E, U+2066–U+2069, U+200E/F, U+061C) are
  removed: they make "txt.exe" read as "exe.txt" in a list or an email.
- Names, reasons, subjects — anything that may reach an email header, a PDF's metadata or
  a one-line list — are **single-line**: every line break (CR, LF, U+2028/9, NEL …) and run
  of whitespace becomes one space.
"""

from __future__ import annotations

import re
import unicodedata

BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_LINE_BREAKS = re.compile(r"[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _keep(ch: str, multiline: bool) -> bool:
    if ch in BIDI_CONTROLS:
        return False
    if multiline and ch in "\n\t":
        return True
    if ch == " ":
        return True
    return unicodedata.category(ch) != "Cc"  # C0/C1 controls incl. NUL, CR, LF, TAB


_ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")


def printable_only(text: str | None) -> str:
    """Without terminal escape sequences (``ESC[31m`` whole), other controls (but line
    breaks and tabs, which the callers fold) and format characters (zero-width spaces and
    joiners, bidi marks, soft hyphens, BOM): what text printed on a document keeps."""
    text = _ANSI_ESCAPE.sub("", text or "")
    return "".join(
        ch for ch in text if ch in "\n\r\t" or unicodedata.category(ch) not in ("Cc", "Cf")
    )


def strip_unsafe(text: str) -> str:
    """Remove NUL and bidi controls only (for any stored string; keeps line breaks)."""
    if "\x00" not in text and not BIDI_CONTROLS.intersection(text):
        return text
    return "".join(ch for ch in text if ch != "\x00" and ch not in BIDI_CONTROLS)


def single_line(text: str | None, max_len: int | None = None) -> str:
    """Header-safe one line: controls and bidi marks gone, whitespace runs → one space."""
    if not text:
        return ""
    text = _LINE_BREAKS.sub(" ", str(text))
    text = "".join(ch if _keep(ch, False) else " " for ch in text if ch not in BIDI_CONTROLS)
    text = " ".join(text.split())
    return text[:max_len].rstrip() if max_len is not None else text


def multi_line(text: str | None, max_len: int | None = None) -> str:
    """Notes: line breaks kept (normalised to LF), other controls and bidi marks removed."""
    if not text:
        return ""
    text = str(text).replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\u2028", "\n").replace("\u2029", "\n")
    text = "".join(ch for ch in text if _keep(ch, True)).strip()
    return text[:max_len] if max_len is not None else text
