"""Build and check the translation catalogs.

``translations/zh_CN/*.po`` (one file per domain) are merged and compiled into
``app/locale/zh_CN/LC_MESSAGES/messages.mo``. ``check`` extracts every marked string
from ``app/`` and ``templates/`` and lists those without a Chinese translation.
"""

from __future__ import annotations

from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "translations"
OUT = ROOT / "app" / "locale"
LOCALES = ("zh_CN",)

METHOD_MAP = [
    ("app/**.py", "python"),
    ("templates/**.html", "jinja2"),
]
OPTIONS_MAP = {"templates/**.html": {"extensions": "jinja2.ext.i18n", "newstyle_gettext": "true"}}
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "N_": None, "lazy_gettext": None}


def merged(locale: str) -> Catalog:
    cat = Catalog(locale=locale, domain="messages")
    for po in sorted((SRC / locale).glob("*.po")):
        with po.open("rb") as f:
            part = read_po(f, locale=locale)
        for msg in part:
            if msg.id and msg.string:
                existing = cat.get(msg.id)
                if existing is None or not existing.string:
                    cat[msg.id] = msg
    return cat


def compile_all() -> list[Path]:
    written = []
    for locale in LOCALES:
        cat = merged(locale)
        target = OUT / locale / "LC_MESSAGES" / "messages.mo"
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as f:
            write_mo(f, cat)
        written.append(target)
    return written


def extract() -> dict[str, list[str]]:
    """msgid → source locations."""
    found: dict[str, list[str]] = {}
    for filename, lineno, message, _comments, _ctx in extract_from_dir(
        str(ROOT), METHOD_MAP, OPTIONS_MAP, keywords=KEYWORDS, strip_comment_tags=True
    ):
        ids = message if isinstance(message, tuple) else (message,)
        for mid in ids:
            if mid:
                found.setdefault(mid, []).append(f"{filename}:{lineno}")
    return found


def missing(locale: str = "zh_CN") -> dict[str, list[str]]:
    cat = merged(locale)
    out = {}
    for mid, where in extract().items():
        m = cat.get(mid)
        if m is None or not m.string:
            out[mid] = where
    return out


def write_missing(path: Path, locale: str = "zh_CN") -> int:
    """Write a .po skeleton of untranslated strings (for a translator to fill in)."""
    cat = Catalog(locale=locale)
    todo = missing(locale)
    for mid, where in todo.items():
        cat.add(mid, "", locations=[(w.rsplit(":", 1)[0], int(w.rsplit(":", 1)[1])) for w in where])
    with path.open("wb") as f:
        write_po(f, cat, width=100, omit_header=False)
    return len(todo)
