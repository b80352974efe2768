"""The model list reads in Chinese: a preset's description in brackets (not its name) is
translated like the rest of the page (found by the hprobe session reading /size in Chinese:
five presets still said "sliding window + sinks", "384 experts", "text model")."""

from __future__ import annotations

import re

from app.i18n import translations_for
from app.sizing import list_presets

# words in the bracket beyond names and terms kept in Latin script (MoE, MLA, MTP)
_ENGLISH = re.compile(r"\([^)]*\b[a-z]{3,}\b")


def test_preset_descriptions_are_translated() -> None:
    zh = translations_for("zh_CN")
    described = [p["name"] for p in list_presets() if _ENGLISH.search(p["name"])]
    assert described  # the check below has something to check
    untranslated = [n for n in described if zh.gettext(n) == n]
    assert untranslated == []
